"""A stream repeat after the shard reshards: each epoch the processes are in continues
exactly, with a frontier of its own (issue 30).

`.shard(i, n).to_iter_dataset().repeat(E)` reads shard `i` again every epoch, and
processes stop in different epochs. Every record of every epoch comes once.
"""

import collections
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import ReshardError, apply_document, make_document, reshard
from chute_samplers.internal import REPEAT_ENDED

COUNTS = st.integers(1, 8)


def _not_threes(x):
    return x % 3 != 0


def _tagged(x):
    return -x


@st.composite
def pipelines(draw):
    """A repeat after the shard, with the stages that may come before and after it."""
    size = draw(st.integers(0, 40))
    epochs = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 5))
    before = draw(st.sampled_from(["none", "filter", "map", "prefetch"]))
    after = draw(st.sampled_from(["none", "filter", "map", "prefetch"]))
    batch = draw(st.sampled_from([None, 1, 3]))
    workers = draw(st.sampled_from([None, None, 0]))  # mp_prefetch before the repeat.
    chunk = draw(st.integers(1, 4))

    def make(index, count):
        ds = chute.MapDataset.range(size).seed(seed).shuffle().shard(index, count)
        it = ds.to_iter_dataset()
        it = _stage(it, before)
        if workers is not None:
            options = chute.MultiprocessingOptions(num_workers=workers)
            it = it.mp_prefetch(options, chunk_size=chunk)
        it = _stage(it.repeat(epochs), after)
        return it if batch is None else it.batch(batch)

    return make, batch is not None, size, epochs


def _stage(it, op):
    if op == "filter":
        return it.filter(_not_threes)
    if op == "map":
        return it.map(_tagged)
    if op == "prefetch":
        return it.prefetch(2)
    return it


@settings(max_examples=80, deadline=None)
@given(pipelines(), COUNTS, st.lists(COUNTS, min_size=1, max_size=3), st.integers(0, 2**16))
def test_every_record_of_every_epoch_comes_once_on_any_counts(pipeline, old, news, seed):
    make, batched, _, _ = pipeline
    chute.checkpoint.check_reshardable(iter(make(0, old)))
    records = chute.testing.rows if batched else None
    run = chute.testing.assert_reshards(make, old, news, seed=seed, records=records)
    assert run.counts == (old, *news)


def _pipeline(index, count, epochs=3):
    ds = chute.MapDataset.range(10).shard(index, count).to_iter_dataset()
    return ds.repeat(epochs)


def test_processes_in_different_epochs_continue_each_epoch_exactly():
    olds = [iter(_pipeline(i, 2)) for i in range(2)]
    # Shard 0 (0, 2, 4, 6, 8) reads 7: all of epoch 0 and 0, 2 of epoch 1; shard 1 reads 2.
    head = [*itertools.islice(olds[0], 7), *itertools.islice(olds[1], 2)]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    assert [d["state"]["epoch"] for d in documents] == [1, 0]
    news = reshard(documents, 3)
    states = [d["state"] for d in news]
    assert all(s["epoch"] == 0 for s in states)  # The smallest epoch a process was in.
    assert all(len(s["ahead"]) == 1 for s in states)  # Epoch 1, where shard 0 had read.
    rest = []
    for k, document in enumerate(news):
        it = iter(_pipeline(k, 3))
        apply_document(it, json.loads(json.dumps(document)))
        rest += list(it)
    counts = collections.Counter(head + rest)
    assert counts == collections.Counter(list(range(10)) * 3)


def _by_epoch(it, stop=None, until=None):
    """`(epoch, element)` pairs read from `it` (a repeat's state says the epoch)."""
    pairs = []
    for x in it:
        epoch = it.get_state()["epoch"]
        if until is not None and epoch >= until:
            break
        pairs.append((epoch, x))
        if len(pairs) == stop:
            break
    return pairs


def test_an_endless_repeat_reshards_epoch_by_epoch():
    def make(index, count):
        return chute.MapDataset.range(12).shard(index, count).to_iter_dataset().repeat()

    olds = [iter(make(i, 3)) for i in range(3)]
    head = [p for it, stop in zip(olds, [9, 2, 5], strict=True) for p in _by_epoch(it, stop)]
    documents = [make_document(it, i, 3) for i, it in enumerate(olds)]
    assert [d["state"]["epoch"] for d in documents] == [2, 0, 1]
    news = [iter(make(k, 2)) for k in range(2)]
    for it, document in zip(news, reshard(documents, 2), strict=True):
        apply_document(it, document)
    rest = [p for it in news for p in _by_epoch(it, until=4)]
    # Each record once in each of epochs 0 to 3.
    assert sorted(head + rest) == [(e, x) for e in range(4) for x in range(12)]


def test_a_state_keeps_one_parent_state_per_epoch_ahead():
    olds = [iter(_pipeline(i, 2, epochs=8)) for i in range(2)]
    _ = [*itertools.islice(olds[0], 33), *itertools.islice(olds[1], 1)]  # Epochs 6 and 0.
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    news = reshard(documents, 2)
    assert [len(d["state"]["ahead"]) for d in news] == [6, 6]  # Epochs 1 to 6.


@pytest.mark.parametrize(
    ("stage", "op"),
    [
        (lambda ds: ds.window_shuffle(3, seed=0), "window_shuffle"),
        (lambda ds: ds.flat_map(lambda x: [x, x]), "flat_map"),
    ],
)
def test_stages_that_hold_or_split_after_the_repeat_are_refused(stage, op):
    it = iter(stage(_pipeline(0, 2)))
    with pytest.raises(ReshardError, match=rf"\({op}\)"):
        chute.checkpoint.check_reshardable(it)


def test_worker_processes_before_the_repeat_continue_each_epoch():
    def make(index, count):
        it = chute.MapDataset.range(30).seed(1).shuffle().shard(index, count).to_iter_dataset()
        options = chute.MultiprocessingOptions(num_workers=1)
        return it.filter(_not_threes).mp_prefetch(options, chunk_size=4).repeat(2)

    run = chute.testing.assert_reshards(make, 3, [2, 4], seed=5)
    assert run.records == 2 * 20


def test_a_repeat_of_an_interleave_of_files_is_refused():
    def open_file(number):
        return chute.MapDataset.range(number * 10, number * 10 + 3).to_iter_dataset()

    files = chute.MapDataset.range(6).shard(0, 2).map(open_file)
    it = iter(chute.IterDataset.interleave(files, cycle_length=2).repeat(2))
    with pytest.raises(ReshardError, match=r"stage 4 \(repeat\) reads again the interleave"):
        chute.checkpoint.check_reshardable(it)


def test_a_process_with_an_empty_shard_does_not_hold_the_epochs_back():
    # An endless repeat of an empty shard ends; the others' epochs go on without it, so
    # the new states list no epochs ahead for it.
    def make(index, count):
        return chute.MapDataset.range(2).shard(index, count).to_iter_dataset().repeat()

    olds = [iter(make(i, 3)) for i in range(3)]
    head = [p for it in olds for p in _by_epoch(it, 200)]
    documents = [make_document(it, i, 3) for i, it in enumerate(olds)]
    news = reshard(documents, 3)
    assert all("ahead" not in d["state"] for d in news)
    assert [d["state"]["epoch"] for d in documents][2] == REPEAT_ENDED
    rest = [p for k, d in enumerate(news) for p in _by_epoch(_restored(make, k, 3, d), until=203)]
    assert sorted(head + rest) == [(e, x) for e in range(203) for x in range(2)]


def _restored(make, index, count, document):
    it = iter(make(index, count))
    apply_document(it, document)
    return it
