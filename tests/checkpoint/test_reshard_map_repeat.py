"""A `MapDataset.repeat` after the shard reshards epoch by epoch (issue 30).

`.shard(i, n)...repeat(E)` before `to_iter_dataset()` repeats each shard by itself: a
stride of each epoch of the shard's input, as a `DataLoader`'s sampler takes. Records
are tagged with a `random_map(key="record")` draw, which depends on the record and its
epoch only (the same on any process count), so "each record once" is "each record once
in each epoch".
"""

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import (
    CheckpointFormatError,
    ReshardError,
    apply_document,
    fingerprint,
    make_document,
    reshard,
)

COUNTS = st.integers(1, 8)


def _draw(x, rng):
    return (int(x), int(rng.integers(1 << 30)))


def _not_threes(x):
    return x % 3 != 0


def _pair(pair):
    return [pair, (pair[0], -pair[1] - 1)]


def _not_fives(pair):
    return pair[0] % 5 != 0


@st.composite
def pipelines(draw):
    """A map repeat after the shard, with the stages that may come around it."""
    size = draw(st.integers(0, 40))
    epochs = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 5))
    shuffled = draw(st.booleans())
    repeated_before = draw(st.sampled_from([None, 1, 2]))  # A repeat before the shard too.
    between = draw(st.sampled_from(["none", "map", "filter"]))
    after = draw(st.sampled_from(["none", "filter", "flat_map", "prefetch", "workers"]))
    batch = draw(st.sampled_from([None, 1, 3]))

    def make(index, count):
        ds = chute.MapDataset.range(size).seed(seed)
        if shuffled:
            ds = ds.shuffle()
        if repeated_before is not None:
            ds = ds.repeat(repeated_before)
        ds = ds.shard(index, count)
        if between == "map":
            ds = ds.map(abs)
        elif between == "filter":
            ds = ds.filter(_not_threes)
        it = ds.repeat(epochs).to_iter_dataset().random_map(_draw, seed=7, key="record")
        if after == "filter":
            it = it.filter(_not_fives)
        elif after == "flat_map":
            it = it.flat_map(_pair)
        elif after == "prefetch":
            it = it.prefetch(2)
        elif after == "workers":
            it = it.mp_prefetch(chute.MultiprocessingOptions(num_workers=0), chunk_size=3)
        return it if batch is None else it.batch(batch)

    return make, batch is not None


@settings(max_examples=60, deadline=None)
@given(pipelines(), COUNTS, st.lists(COUNTS, min_size=1, max_size=3), st.integers(0, 2**16))
def test_every_record_of_every_epoch_comes_once_on_any_counts(pipeline, old, news, seed):
    make, batched = pipeline
    chute.checkpoint.check_reshardable(iter(make(0, old)))
    records = chute.testing.rows if batched else None
    run = chute.testing.assert_reshards(make, old, news, seed=seed, records=records)
    assert run.counts == (old, *news)


def _pipeline(index, count, epochs=3):
    ds = chute.MapDataset.range(10).shard(index, count).repeat(epochs)
    return ds.to_iter_dataset().random_map(_draw, seed=1, key="record")


def _continued(make, documents, count):
    """What `count` processes read from `documents`' states, by process (via JSON)."""
    outputs = []
    for k, document in enumerate(reshard(documents, count)):
        it = iter(make(k, count))
        apply_document(it, json.loads(json.dumps(document)))
        outputs.append(list(it))
    return outputs


def test_processes_in_different_epochs_continue_each_epoch_exactly():
    olds = [iter(_pipeline(i, 2)) for i in range(2)]
    # Shard 0 (0, 2, 4, 6, 8) reads 7: all of epoch 0 and 0, 2 of epoch 1; shard 1 reads 2.
    head = [*itertools.islice(olds[0], 7), *itertools.islice(olds[1], 2)]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    assert [d["state"]["parent"]["position"] for d in documents] == [7, 2]
    news = _continued(_pipeline, documents, 3)
    everything = [pair for i in range(2) for pair in _pipeline(i, 2)]
    assert sorted(head + [pair for out in news for pair in out]) == sorted(everything)
    # Shard 1 of 2 (1, 3, 5, ...) read 1 and 3. Shard 0 of 3 reads 0, 3, 6, 9 of each
    # epoch: of epoch 0 only 9 (0 and 6 went to shard 0 of 2, 3 to shard 1); of epoch 1,
    # 3, 6 and 9 (0 went before); all of epoch 2.
    epochs = {pair: epoch for epoch in range(3) for pair in _tags(epoch)}
    assert [(epochs[p], p[0]) for p in news[0]] == [
        (0, 9), (1, 3), (1, 6), (1, 9), (2, 0), (2, 3), (2, 6), (2, 9),
    ]  # fmt: skip
    assert _continued(_pipeline, documents, 3) == news  # A function of the states.


def _tags(epoch):
    """The tagged records of `epoch` (read from one process that reads them all)."""
    it = iter(_pipeline(0, 1, epochs=epoch + 1))
    return list(it)[epoch * 10 :]


def test_an_endless_repeat_continues_as_a_long_finite_one():
    def make(epochs):
        return lambda index, count: _pipeline(index, count, epochs)

    streams = {}
    for epochs in (None, 50):
        olds = [iter(make(epochs)(i, 3)) for i in range(3)]
        for it, stop in zip(olds, [9, 2, 14], strict=True):
            list(itertools.islice(it, stop))
        documents = [make_document(it, i, 3) for i, it in enumerate(olds)]
        news = [iter(make(epochs)(k, 2)) for k in range(2)]
        for it, document in zip(news, reshard(documents, 2), strict=True):
            apply_document(it, document)
        streams[epochs] = [list(itertools.islice(it, 40)) for it in news]
    assert streams[None] == streams[50]


def test_a_repeat_or_batch_before_the_shard_sets_the_epoch():
    def make(index, count):
        ds = chute.MapDataset.range(7).repeat(2).shard(index, count).repeat(2)
        return ds.to_iter_dataset()

    run = chute.testing.assert_reshards(make, 3, [2, 5], seed=3)
    assert run.records == 7 * 2 * 2
    for drop in (False, True):

        def batched(index, count, drop=drop):
            ds = chute.MapDataset.range(11).batch(3, drop_remainder=drop)
            return ds.shard(index, count).repeat(3).to_iter_dataset()

        run = chute.testing.assert_reshards(batched, 2, [3, 1], seed=4, records=chute.testing.rows)
        assert run.records == 3 * (9 if drop else 11)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: chute.MapDataset.range(10).shard(0, 2, drop_remainder=True).repeat(2),
            r"drops a remainder \(drop_remainder=True\) and stage 2 \(repeat\)",
        ),
        (
            lambda: chute.MapDataset.mix([chute.MapDataset.range(4)] * 2).shard(0, 2).repeat(2),
            r"stage 0 \(mix\) does not say its length",
        ),
        (
            lambda: chute.MapDataset.range(10).repeat().shard(0, 2).repeat(),
            r"stage 1 \(repeat\) does not say its length",
        ),
        (
            lambda: chute.MapDataset.range(10).shard(0, 2).repeat(2).batch(2),
            r"stage 3 \(MapDataset.batch\) follows the repeat of stage 2, which repeats each",
        ),
        (
            lambda: chute.MapDataset.range(10).shard(0, 2).shuffle(seed=0).repeat(2),
            r"stage 2 \(shuffle\) follows the shard stage",
        ),
    ],
)
def test_what_cannot_continue_by_epochs_is_refused_when_checked(make, message):
    it = iter(make().to_iter_dataset())
    with pytest.raises(ReshardError, match=message):
        chute.checkpoint.check_reshardable(it)


@pytest.mark.parametrize(
    ("stage", "op"),
    [
        (lambda it: it.window_shuffle(3, seed=0), "window_shuffle"),
        (lambda it: it.repeat(2), "repeat"),
    ],
)
def test_a_window_or_stream_repeat_after_it_is_refused(stage, op):
    it = iter(stage(chute.MapDataset.range(10).shard(0, 2).repeat(2).to_iter_dataset()))
    with pytest.raises(ReshardError, match=rf"\({op}\) follows the repeat of stage 2"):
        chute.checkpoint.check_reshardable(it)


def _mixed(index, count):
    ds = chute.MapDataset.mix([chute.MapDataset.range(4)] * 2).shard(index, count).repeat(2)
    return ds.to_iter_dataset().window_shuffle(3, seed=0)


def test_a_restore_refuses_what_the_check_refuses_naming_the_same_stage():
    olds = [iter(_mixed(i, 2)) for i in range(2)]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    message = r"stage 0 \(mix\) does not say its length"
    with pytest.raises(ReshardError, match=message):
        reshard(documents, 3)
    with pytest.raises(ReshardError, match=message):
        chute.checkpoint.check_reshardable(iter(_mixed(0, 2)))


@pytest.mark.parametrize(
    ("head", "length"),
    [
        (lambda: chute.MapDataset.source(list(range(13))), 13),
        (lambda: chute.MapDataset.source(range(3, 29, 2)), 13),
        (lambda: chute.MapDataset.source(np.arange(26).reshape(13, 2)), 13),
        (lambda: chute.MapDataset.range(40)[3:29:2], 13),
        (lambda: chute.MapDataset.range(40)[::-3], 14),
        (lambda: chute.MapDataset.range(7).repeat(2).batch(2, drop_remainder=True), 7),
    ],
)
def test_the_length_of_the_shards_input_is_read_through_sources_slices_and_batches(head, length):
    def make(index, count):
        return head().shard(index, count).repeat(2).to_iter_dataset()

    run = chute.testing.assert_reshards(make, 3, [2, 4], seed=1, records=_rows_or_items)
    assert run.records == 2 * length


def _rows_or_items(element):
    """An element's records: a batch's rows, an array row as a tuple, or the element."""
    if isinstance(element, np.ndarray) and element.ndim:
        return [tuple(np.asarray(element).reshape(-1).tolist())]
    return [element]


def test_damaged_lengths_in_a_document_are_refused_with_chute_errors():
    def make(index, count):
        ds = chute.MapDataset.range(10).repeat(2).shard(index, count).repeat(2)
        return ds.to_iter_dataset()

    olds = [iter(make(i, 2)) for i in range(2)]
    for it in olds:
        next(it)
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    for change, message in [
        (lambda stages: stages[1]["params"].update(num_epochs=-1), "num_epochs"),
        (lambda stages: stages[0]["params"]["source"].update(len=2**63), "longer than sys"),
    ]:
        damaged = json.loads(json.dumps(documents))
        for document in damaged:
            change(document["pipeline"]["stages"])
            document["fingerprint"] = fingerprint(document["pipeline"])
        with pytest.raises((ReshardError, CheckpointFormatError), match=message):
            reshard(damaged, 3)
