"""A `chute.DataLoader` whose `IndexSampler` takes a shard of each epoch reshards.

Shard `i` of `n` reads records `i, i + n, ...` of every epoch: the global positions are
counted epoch by epoch (`Frontier.epoch`), so each record of each epoch comes once
whatever the process counts and wherever the processes stopped.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
import chute.grain as grain
from chute.testing import assert_reshards, rows
from chute_checkpoint import ReshardError, apply_document, make_document, reshard


class Drawn(chute.RandomMapTransform):
    """A record with a draw of its own generator: the copies of each epoch differ."""

    def random_map(self, element, rng):
        return np.array([element, rng.integers(2**62)])


class Odd(chute.FilterTransform):
    """Keeps odd records."""

    def filter(self, element):
        return element[0] % 2 == 1


class Tagged(chute.MapTransform):
    """A record as (record, tag): a map before the batch."""

    def map(self, element):
        return element * 10 + 1


class FailSevens(chute.MapTransform):
    """Fails on records that are multiples of 7 (skipped within an error budget)."""

    def map(self, element):
        if element[0] % 7 == 0:
            raise ValueError(f"record {element[0]}")
        return element


class Twice(chute.FlatMapTransform):
    """Each record twice."""

    max_fan_out = 2

    def flat_map(self, element):
        return [element, element]


class Fan(chute.FlatMapTransform):
    """0 to 2 outputs per record, each tagged with its number: every output distinct."""

    max_fan_out = 2

    def flat_map(self, element):
        return [np.append(element, k) for k in range(int(element[0]) % 3)]


def _loader(
    records, epochs, *, shuffle=True, operations=(), workers=0, drop_remainder=False, budget=None
):
    def make(index, count):
        options = chute.ShardOptions(index, count, drop_remainder=drop_remainder)
        sampler = chute.IndexSampler(
            records, num_epochs=epochs, shard_options=options, shuffle=shuffle, seed=11
        )
        return chute.DataLoader(
            data_source=chute.RangeSource(records),
            sampler=sampler,
            operations=[Drawn(), *operations],
            worker_count=workers,
            error_budget=budget,
        )

    return make


_OPERATIONS = {  # Each after `Drawn`: every record of every epoch distinct.
    "none": ((), None),
    "filter": ((Odd(),), None),
    "map, batch": ((Tagged(), chute.BatchTransform(3)), rows),
    "batch": ((chute.BatchTransform(4),), rows),
    "filter, batch": ((Odd(), chute.BatchTransform(2, drop_remainder=False)), rows),
    "flat_map": ((Fan(),), None),
    "flat_map, batch": ((Fan(), chute.BatchTransform(3)), rows),
    "filter, flat_map, map, batch": ((Odd(), Fan(), Tagged(), chute.BatchTransform(2)), rows),
}


@settings(max_examples=40, deadline=None)
@given(
    records=st.integers(1, 40),
    epochs=st.integers(1, 3),
    shuffle=st.booleans(),
    operations=st.sampled_from(sorted(_OPERATIONS)),
    workers=st.integers(0, 1),
    counts=st.lists(st.integers(1, 7), min_size=2, max_size=3),
    seed=st.integers(0, 2**16),
)
def test_every_record_of_every_epoch_comes_once(
    records, epochs, shuffle, operations, workers, counts, seed
):
    ops, of = _OPERATIONS[operations]
    make = _loader(records, epochs, shuffle=shuffle, operations=ops, workers=workers)
    run = assert_reshards(make, counts[0], counts[1:], seed=seed, records=of)
    assert run.counts == tuple(counts)


def test_four_uneven_processes_continue_on_three_then_six():
    run = assert_reshards(_loader(1000, 2), 4, [3, 6], seed=5)
    assert len(run.stops) == 2
    assert run.counts == (4, 3, 6) and run.records == 2000
    assert run.largest_state < 400


def test_an_error_budget_keeps_its_failures_across_the_reshard():
    budget = chute.ErrorBudget(max_failures=18)  # Exactly the failures of the run.
    make = _loader(60, 2, operations=(FailSevens(),), budget=budget)
    run = assert_reshards(make, 3, [2, 5], seed=2)
    assert run.records == 2 * (60 - 9)  # 0, 7, ..., 56 fail in each epoch.


def test_drop_remainder_reshards_between_counts_that_drop_nothing():
    assert_reshards(_loader(24, 2, drop_remainder=True), 4, [3, 6], seed=1)


def test_drop_remainder_with_a_remainder_is_refused():
    make = _loader(25, 1, drop_remainder=True)
    olds = [iter(make(i, 5)) for i in range(5)]
    next(olds[0])
    documents = [make_document(it, i, 5) for i, it in enumerate(olds)]
    with pytest.raises(ReshardError, match=r"drops the remainder of each epoch of 25 records"):
        reshard(documents, 2)
    assert len(reshard(documents, 1)) == 1  # 25 % 5 == 25 % 1 == 0: nothing dropped.


class Pair(chute.FlatMapTransform):
    """Two outputs per record, tagged 0 and 1."""

    max_fan_out = 2

    def flat_map(self, element):
        return [np.append(element, 0), np.append(element, 1)]


@pytest.mark.parametrize("workers", [0, 1])
def test_a_flat_map_in_the_workers_continues_a_record_stopped_inside(workers):
    """A process stopped between the two outputs of a record: its new owner gives the
    second one only."""
    make = _loader(30, 2, operations=(Pair(),), workers=workers)
    olds = [iter(make(i, 3)) for i in range(3)]
    head = [next(olds[0]) for _ in range(5)] + [next(olds[2])]
    documents = [make_document(it, i, 3) for i, it in enumerate(olds)]
    assert documents[0]["state"]["at"] == [2, 1]  # Output 0 of its third record given.
    news = [iter(make(k, 2)) for k in range(2)]
    for it, document in zip(news, reshard(documents, 2), strict=True):
        apply_document(it, document)
    seen = [tuple(x.tolist()) for x in head] + [tuple(x.tolist()) for it in news for x in it]
    everything = [tuple(x.tolist()) for i in range(3) for x in make(i, 3)]
    assert sorted(seen) == sorted(everything) and len(set(everything)) == 120


@pytest.mark.parametrize(
    "operations",
    [(Twice(), Fan()), (chute.BatchTransform(2), Twice())],
    ids=["two_flat_maps", "flat_map_after_batch"],
)
def test_flat_maps_that_cannot_continue_elsewhere_are_refused_when_built(operations, refused_alike):
    message = refused_alike(_loader(20, 1, operations=operations))
    assert "two FlatMapTransforms, or one after a BatchTransform" in message


def test_a_checkpoint_that_does_not_say_what_its_operations_do_is_refused():
    make = _loader(20, 1, operations=(Odd(),))
    olds = [iter(make(i, 2)) for i in range(2)]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    for document in documents:  # As a chute before 2026-11-28 wrote it.
        del document["traits"]["operation"]
    with pytest.raises(ReshardError, match=r"does not say what its operations do"):
        reshard(documents, 3)


def test_states_resharded_offline_restore_into_loaders_of_default_chunk_sizes():
    make = _loader(100, 2)  # Default chunk sizes: 4 records for shards of 50, 3 of 34.
    olds = [iter(make(i, 2)) for i in range(2)]
    seen = [next(olds[0]) for _ in range(30)] + [next(olds[1]) for _ in range(7)]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    news = [iter(make(k, 3)) for k in range(3)]
    for it, document in zip(news, reshard(documents, 3), strict=True):
        apply_document(it, document)  # Only the chunk sizes differ: the state is by position.
    seen += [x for it in news for x in it]
    expected = [x for i in range(2) for x in make(i, 2)]
    assert sorted(map(tuple, seen)) == sorted(map(tuple, expected))


def test_a_grain_sampler_through_chute_grain_is_refused_when_built(refused_alike):
    def make(index, count):
        options = grain.sharding.ShardOptions(index, count)
        sampler = grain.samplers.IndexSampler(10, options, shuffle=False, num_epochs=1, seed=3)
        return grain.DataLoader(data_source=list(range(10)), sampler=sampler)

    message = refused_alike(make)
    assert "in a way its checkpoint does not describe (a Grain sampler" in message


def test_one_process_of_a_sampler_without_shards_is_a_global_pipeline():
    def make(index, count):
        sampler = chute.IndexSampler(10, num_epochs=1, shuffle=True, seed=1)
        return chute.DataLoader(data_source=chute.RangeSource(10), sampler=sampler)

    olds = [iter(make(i, 2)) for i in range(2)]
    for it in olds:
        next(it)
    new = reshard([make_document(it, i, 2) for i, it in enumerate(olds)], 3)
    assert [document["state"] for document in new] == [olds[0].get_state()] * 3
