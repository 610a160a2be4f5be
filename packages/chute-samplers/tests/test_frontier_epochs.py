"""A frontier over shards of each epoch (an `IndexSampler`'s) keeps exactly what is left."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_samplers import IndexSampler, ShardOptions
from chute_samplers.internal import (
    Frontier,
    first_position,
    is_watermark,
    level_of,
    watermark,
)


def _globals(records, epochs, index, count):
    """The global positions shard `index` of `count` reads, as its sampler numbers them."""
    sampler = IndexSampler(records, num_epochs=epochs, shard_options=ShardOptions(index, count))
    return [sampler[p].index for p in range(len(sampler))]


@settings(max_examples=200, deadline=None)
@given(
    records=st.integers(1, 30),
    epochs=st.integers(1, 3),
    old=st.integers(1, 6),
    new=st.integers(1, 6),
    data=st.data(),
)
def test_the_new_shards_keep_exactly_what_the_old_ones_left(records, epochs, old, new, data):
    read = [_globals(records, epochs, k, old) for k in range(old)]
    stops = [
        data.draw(st.integers(0, len(globals_)), label=f"stop {k}")
        for k, globals_ in enumerate(read)
    ]
    consumed = {g for globals_, stop in zip(read, stops, strict=True) for g in globals_[:stop]}
    level = level_of(stops, records)
    low = watermark(level)
    assert all(g in consumed for g in range(low))  # Below the watermark: all consumed.
    left = []
    for k in range(new):
        mine = _globals(records, epochs, k, new)
        start = first_position(low, k, new, records)
        assert all(g < low for g in mine[:start]) and all(g >= low for g in mine[start:])
        frontier = Frontier(k, new, (level,), (), records)
        kept = frontier.kept(np.arange(start, len(mine)))
        assert [frontier.global_position(p) for p in range(len(mine))] == mine
        left += [g for g, keep in zip(mine[start:], kept.tolist(), strict=True) if keep]
        assert frontier.after(start) is None or frontier.after(start).epoch == records
    everything = {g for k in range(old) for g in read[k]}
    assert sorted(left) == sorted(everything - consumed)
    if is_watermark(level, records):
        assert everything - consumed == {g for g in everything if g >= low}


def test_a_frontier_with_epochs_goes_through_json():
    frontier = Frontier(1, 3, ((2, (7, 5)),), (11, 17), 10)  # Records 1 and 7 of epoch 1.
    again = Frontier.from_json(frontier.to_json(), "reader")
    assert again == frontier and again.to_json()["epoch"] == 10
