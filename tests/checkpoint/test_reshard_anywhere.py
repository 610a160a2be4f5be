"""Resharding from any stop points: n processes, each at its own position, continue on m.

Processes are simulated by iterators of the pipeline each would build (the real
multi-process run is in `test_multihost_elastic.py`); `chute.testing.assert_reshards`
stops them at random uneven points and checks that every record comes exactly once.
"""

import itertools
import json
import operator
import random
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import ReshardError, apply_document, make_document, reshard

SIZES = st.integers(0, 70)
COUNTS = st.integers(1, 8)


def _third(x):
    return x % 3 != 0


def _odd(x):
    return x % 2 == 1


def _twice(x):
    return 2 * x + 1


def _plus_noise(x, rng):
    return x + 1000 * int(rng.integers(1, 4))


def _fails_on_elevens(x):
    if x % 11 == 5:
        raise ValueError(f"record {x} is damaged")
    return x


def _file(record):
    return chute.MapDataset.range(record * 1000, record * 1000 + record % 4).to_iter_dataset()


@st.composite
def pipelines(draw):
    """A random pipeline of the ops that reshard after the shard, around one shard stage."""
    size = draw(SIZES)
    seed = draw(st.integers(0, 5))
    before = draw(st.lists(st.sampled_from(["shuffle", "map", "filter"]), max_size=3))
    after = draw(st.lists(st.sampled_from(["map", "filter", "prefetch"]), max_size=3))
    noise = draw(st.booleans())  # A random map (keyed by record) right after the reader.
    read = draw(st.sampled_from([None, 1, 3]))  # ReadOptions threads (None: plain reader).
    workers = draw(st.sampled_from([None, None, 0]))  # mp_prefetch, run here (0 workers).
    chunk = draw(st.integers(1, 9))
    batch = draw(st.sampled_from([None, 1, 2, 5]))
    budget = draw(st.booleans())  # A map that fails on some records, under skip_errors.
    window = draw(st.sampled_from([None, None, 2, 5]))  # A window shuffle before the batch.
    # Or each record names a file of `record % 4` records, read 1-3 at a time (interleave).
    cycle = draw(st.sampled_from([None, None, None, 1, 3]))
    if cycle is not None:  # What may not follow an interleave: the reader's options.
        noise, read, workers, window = False, None, None, None
    repeat = draw(st.sampled_from([None, None, None, 2]))  # A stream repeat after these.
    if cycle is not None:
        repeat = None  # An interleave's streams continue once, not per epoch: refused.
    if repeat is not None:  # Workers, windows and error budgets go before it, or not at all.
        workers, window, budget = None, None, False

    def make(index, count):
        ds = chute.MapDataset.range(size).seed(seed)
        for op in before:
            if op == "shuffle":
                ds = ds.shuffle()
            elif op == "map":
                ds = ds.map(_twice)
            else:
                ds = ds.filter(_odd)
        options = None if read is None else chute.ReadOptions(num_threads=read)
        if cycle is not None:
            files = ds.shard(index, count).map(_file)
            it = chute.IterDataset.interleave(files, cycle_length=cycle)
        else:
            it = ds.shard(index, count).to_iter_dataset(read_options=options)
        if noise:  # Keyed by record: the same draws on any process count.
            it = it.random_map(_plus_noise, seed=3, key="record")
        for op in after:
            if op == "map":
                it = it.map(operator.neg)
            elif op == "filter":
                it = it.filter(_third)
            else:
                it = it.prefetch(2)
        if repeat is not None:
            it = it.repeat(repeat)
        if budget:
            it = it.map(_fails_on_elevens)
        if workers is not None:
            options = chute.MultiprocessingOptions(num_workers=workers)
            it = it.mp_prefetch(options, chunk_size=chunk)
        if budget:
            it = it.skip_errors(1000)
        if window is not None:
            it = it.window_shuffle(window, seed=seed + 7)
        return it if batch is None else it.batch(batch)

    return make, batch is not None


@settings(max_examples=120, deadline=None)
@given(pipelines(), COUNTS, st.lists(COUNTS, min_size=1, max_size=3), st.integers(0, 2**16))
def test_any_pipeline_continues_exactly_once_on_any_counts(pipeline, old, news, seed):
    make, batched = pipeline
    chute.checkpoint.check_reshardable(iter(make(0, old)))  # Said at build time: it can.
    records = chute.testing.rows if batched else None
    run = chute.testing.assert_reshards(make, old, news, seed=seed, records=records)
    assert run.counts == (old, *news)
    assert len(run.stops) == len(news)


def _pipeline(index, count, workers=None, size=90):
    ds = chute.MapDataset.range(size).seed(2).shuffle().shard(index, count).to_iter_dataset()
    ds = ds.filter(_third)
    if workers is not None:
        ds = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=4)
    return ds.batch(4)


@pytest.mark.parametrize("workers", [1, 2])
def test_worker_processes_continue_exactly_once_across_4_3_6(workers):
    def make(index, count):
        return _pipeline(index, count, workers)

    for seed in range(3):
        run = chute.testing.assert_reshards(make, 4, [3, 6], seed=seed, records=chute.testing.rows)
        assert run.records == 60


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), COUNTS, st.lists(COUNTS, min_size=1, max_size=2), st.integers(0, 2**16))
def test_one_to_three_worker_processes_continue_exactly_once_on_any_counts(
    workers, old, news, seed
):
    def make(index, count):
        return _pipeline(index, count, workers)

    run = chute.testing.assert_reshards(make, old, news, seed=seed, records=chute.testing.rows)
    assert run.records == 60


def _run(iterators, counts):
    out = []
    for it, count in zip(iterators, counts, strict=True):
        out.extend(x for batch in (next(it) for _ in range(count)) for x in batch.tolist())
    return out


def test_processes_at_uneven_positions_continue_in_each_shard_order():
    """The exact continuation: each new process reads what is left of its stride, in order."""
    order = [x for x in chute.MapDataset.range(90).seed(2).shuffle() if _third(x)]
    olds = [iter(_pipeline(i, 2)) for i in range(2)]
    head = _run(olds, [3, 1])  # Shard 0 took 12 records, shard 1 took 4.
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    news = [iter(_pipeline(k, 3)) for k in range(3)]
    for k, document in enumerate(reshard(documents, 3)):
        apply_document(news[k], document)
    rest = {k: [x for batch in it for x in batch.tolist()] for k, it in enumerate(news)}
    every = list(chute.MapDataset.range(90).seed(2).shuffle())
    for k in range(3):  # Shard k of 3 reads global positions k, k + 3, ... not yet read.
        mine = [x for g, x in enumerate(every) if g % 3 == k and _third(x) and x not in head]
        assert rest[k] == mine
    assert sorted(head + [x for k in rest for x in rest[k]]) == sorted(order)


def test_a_resharded_state_holds_its_frontier_until_it_passes_it():
    olds = [iter(_pipeline(i, 2)) for i in range(2)]
    _run(olds, [5, 0])
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    (document,) = reshard(documents, 1)
    # Shard 0 read global 0, 2, ..., 50 (26 positions for 20 records the filter kept);
    # shard 1 nothing: one process reads from global 1 on, skipping even ones below 52.
    assert documents[0]["state"]["parent"]["parent"] == {"position": 26}
    assert document["state"]["parent"]["parent"] == {
        "position": 1,
        "frontier": {"shard": [0, 1], "levels": [[2, [52, 1]]]},
    }
    it = iter(_pipeline(0, 1))
    apply_document(it, document)
    next(it)
    assert "frontier" in json.dumps(it.get_state())
    for _ in range(7):  # 32 records: past global 52, so the frontier is behind it.
        next(it)
    assert "frontier" not in json.dumps(it.get_state())


def test_lockstep_totals_that_do_not_divide_continue_without_a_frontier():
    def plain(index, count):
        return chute.MapDataset.range(40).shard(index, count).to_iter_dataset()

    olds = [iter(plain(i, 2)) for i in range(2)]
    assert [next(olds[0]), next(olds[1]), next(olds[0]), next(olds[1])] == [0, 1, 2, 3]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    # 4 consumed, which 3 processes cannot split evenly: they start at 4, 5 and 6.
    states = [document["state"] for document in reshard(documents, 3)]
    assert states == [{"position": 2}, {"position": 1}, {"position": 1}]
    news = [iter(plain(k, 3)) for k in range(3)]
    for k, state in enumerate(states):
        news[k].set_state(state)
    assert [next(it) for it in news] == [6, 4, 5]


def test_a_map_batch_after_the_shard_at_uneven_positions_is_refused_with_the_reason():
    def batched(index, count):
        ds = chute.MapDataset.range(40).shard(index, count).batch(2)
        return ds.to_iter_dataset()

    olds = [iter(batched(i, 2)) for i in range(2)]
    next(olds[0])
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    with pytest.raises(ReshardError) as caught:
        reshard(documents, 3)
    assert str(caught.value) == (
        "the processes are at different local positions [1, 0] (by shard index), in batches "
        "of 2 (the MapDataset.batch after the shard): a batch cannot be split between "
        "processes; batch after to_iter_dataset() (IterDataset.batch) to reshard from any "
        "positions, or save every process at the same step."
    )


@pytest.mark.parametrize("workers", [None, 0])
def test_a_map_batch_after_the_shard_is_refused_when_built_unless_in_lockstep(workers):
    """Said when the pipeline is built, not after a preemption; `lockstep=True` accepts it,
    and processes that save together then reshard where the batches divide."""

    def batched(index, count):
        it = chute.MapDataset.range(40).shard(index, count).map(_twice).batch(2).to_iter_dataset()
        if workers is None:
            return it
        return it.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=2)

    with pytest.raises(ReshardError) as built:
        chute.checkpoint.check_reshardable(iter(batched(0, 2)))
    assert str(built.value) == (
        "stage 3 (batch) batches the shard before to_iter_dataset() (MapDataset.batch), so "
        "the states count whole batches (2 elements each), and a batch cannot be split "
        "between processes: they reshard only when every process saved at the same step and "
        "the batches consumed together split evenly among the new processes. Batch after "
        "to_iter_dataset() (IterDataset.batch) to reshard from any positions, or pass "
        "lockstep=True if every process always saves at the same step."
    )
    chute.checkpoint.check_reshardable(iter(batched(0, 2)), lockstep=True)
    olds = [iter(batched(i, 2)) for i in range(2)]
    head = [row for it in olds for _ in range(3) for row in next(it).tolist()]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    news = [iter(batched(k, 3)) for k in range(3)]  # 12 consumed: 2 batches per new process.
    for it, document in zip(news, reshard(documents, 3), strict=True):
        apply_document(it, document)
    rest = [row for it in news for batch in it for row in batch.tolist()]
    assert sorted(head + rest) == [_twice(x) for x in range(40)]
    # A pipeline that batches after to_iter_dataset() passes without the flag.
    chute.checkpoint.check_reshardable(
        iter(chute.MapDataset.range(40).shard(0, 2).to_iter_dataset().batch(2))
    )


def test_the_refusal_names_the_batch_that_groups_and_the_mixture_component_it_is_in():
    def shard(index, count):
        return chute.MapDataset.range(40).shard(index, count)

    # batch(1) keeps one element per output: the refusal names the batch(2) after it.
    regrouped = shard(0, 2).batch(1).map(_twice).batch(2).to_iter_dataset()
    with pytest.raises(ReshardError, match=r"^stage 4 \(batch\) batches the shard before"):
        chute.checkpoint.check_reshardable(iter(regrouped))
    # A MapDataset.batch after the shard inside one component of a mixture.
    plain = shard(0, 2).to_iter_dataset().batch(2)
    batched = shard(0, 2).map(_twice).batch(2).to_iter_dataset()
    mixture = chute.IterDataset.mix([plain, batched], [0.5, 0.5])
    with pytest.raises(ReshardError) as caught:
        chute.checkpoint.check_reshardable(iter(mixture))
    assert str(caught.value).startswith(
        "the mixture's component 1: stage 3 (batch) batches the shard before to_iter_dataset() "
        "(MapDataset.batch), so the states count whole batches (2 elements each)"
    )
    chute.checkpoint.check_reshardable(iter(mixture), lockstep=True)
    chute.checkpoint.check_reshardable(iter(chute.IterDataset.mix([plain, plain], [0.5, 0.5])))


def _sharded(index=0, count=2):
    return chute.MapDataset.range(40).seed(3).shuffle().shard(index, count)


@pytest.mark.parametrize(
    ("build", "stage"),
    [
        (lambda: _sharded().to_iter_dataset().limit(5), "stage 5 (limit)"),
        (lambda: _sharded()[2:].to_iter_dataset(), "stage 4 (slice)"),
        (lambda: _sharded().shuffle().to_iter_dataset(), "stage 4 (shuffle)"),
        (lambda: _sharded().to_iter_dataset().cache().repeat(2), "stage 5 (cache)"),
    ],
    ids=["limit", "slice", "shuffle", "cache"],
)
def test_stages_that_cannot_follow_the_shard_are_refused_when_built(build, stage):
    """The guide's list: limit and slice by their nature, shuffle and cache for now (a
    stream repeat and a MapDataset repeat reshard: `test_reshard_repeat.py`,
    `test_reshard_map_repeat.py`)."""
    with pytest.raises(ReshardError, match=rf"^{re.escape(stage)} follows the shard stage"):
        chute.checkpoint.check_reshardable(iter(build()))
    # Before the shard they are free.
    ahead = chute.MapDataset.range(40).seed(3).shuffle().repeat(2)[:60].shard(0, 2)
    chute.checkpoint.check_reshardable(iter(ahead.to_iter_dataset()))


def test_a_frontier_of_another_shard_is_refused():
    olds = [iter(_pipeline(i, 2)) for i in range(2)]
    _run(olds, [2, 0])
    documents = reshard([make_document(it, i, 2) for i, it in enumerate(olds)], 2)
    documents[1]["state"]["parent"]["parent"]["frontier"]["shard"] = [0, 2]
    with pytest.raises(ReshardError, match="state 1 holds the frontier of shard 0 of 2, but is of"):
        reshard(documents, 3)


@pytest.mark.parametrize(
    ("frontier", "message"),
    [
        ({"shard": [0, 1]}, "a frontier is a dict with the keys 'shard' and 'levels'"),
        ({"shard": [2, 1], "levels": [[1, [0]]]}, "shard is \\[index, count\\] with 0 <= index"),
        ({"shard": [0, 1], "levels": {}}, "levels are a list of at most 1024"),
        ({"shard": [0, 1], "levels": [[2, [0]]]}, "has 1 thresholds, not the 2 it names"),
        ({"shard": [0, 1], "levels": [[1, [-1]]]}, "holds a threshold that is no non-negative"),
        ({"shard": [0, 1], "levels": [[0, []]]}, "names 0 processes; a level has 1 to"),
    ],
)
def test_a_damaged_frontier_is_refused_naming_what_is_wrong(frontier, message):
    it = iter(chute.MapDataset.range(5).to_iter_dataset())
    with pytest.raises(chute.InvalidStateError, match=message):
        it.set_state({"position": 0, "frontier": frontier})


def test_the_state_stays_small_over_ten_reshards_of_a_billion_records():
    """Processes spread over thousands of positions, resharded ten times (4 -> ... -> 8)."""
    size = 10**9

    def make(index, count):
        return chute.MapDataset.range(size).shard(index, count).to_iter_dataset()

    rng = random.Random(7)
    count = 4
    iterators = [iter(make(i, count)) for i in range(count)]
    for it in iterators:  # Mid-epoch: each process somewhere near 10^8.
        it.set_state({"position": 10**8 // count + rng.randrange(5000)})
    largest = 0
    counts = [4, 7, 2, 8, 5, 1, 3, 6, 8, 3]
    for new in counts:
        documents = [make_document(it, i, count) for i, it in enumerate(iterators)]
        largest = max(largest, *(len(json.dumps(d["state"])) for d in documents))
        count, iterators = new, [iter(make(k, new)) for k in range(new)]
        for k, document in enumerate(reshard(documents, new)):
            apply_document(iterators[k], document)
            for _ in range(rng.randrange(3000)):
                next(iterators[k])
    largest = max(largest, *(len(json.dumps(it.get_state())) for it in iterators))
    assert largest < 600, largest  # A few levels of at most 8 thresholds, not the data.


@pytest.mark.parametrize(
    "tail",
    [
        lambda ds: ds.batch(2).window_shuffle(4, seed=0),
        lambda ds: ds.batch(2).flat_map(list),
        lambda ds: ds.batch(2).unbatch(),
    ],
    ids=["window_shuffle_of_batches", "flat_map_of_batches", "unbatch"],
)
def test_what_a_restore_would_refuse_is_refused_when_the_pipeline_is_built(tail):
    def make(index, count):
        return tail(chute.MapDataset.range(40).shard(index, count).to_iter_dataset())

    with pytest.raises(ReshardError) as built:
        chute.checkpoint.check_reshardable(iter(make(0, 2)))
    olds = [iter(make(i, 2)) for i in range(2)]
    next(olds[0])
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    with pytest.raises(ReshardError) as restored:
        reshard(documents, 3)
    assert str(built.value) == str(restored.value)


def _total(x):
    """One integer per element, whatever its shape: so that any pipeline's elements batch."""
    return int(np.sum(x))


REFUSED_AFTER = {
    "window_shuffle_of_batches": lambda ds: ds.map(_total).batch(2).window_shuffle(3, seed=1),
    "flat_map_of_batches": lambda ds: ds.map(_total).batch(2).flat_map(list),
    "rebatch": lambda ds: ds.map(_total).batch(2).rebatch(3),
    "unbatch": lambda ds: ds.map(_total).batch(2).unbatch(),
}


@settings(max_examples=40, deadline=None)
@given(
    pipelines(),
    st.one_of(st.none(), st.sampled_from(sorted(REFUSED_AFTER))),
    COUNTS,
    COUNTS,
    st.data(),
)
def test_check_reshardable_agrees_with_every_restore(pipeline, refused, old, new, data):
    """What a restore on another count refuses, `check_reshardable` refuses when built."""
    make, _ = pipeline

    def built(index, count):
        ds = make(index, count)
        return ds if refused is None else REFUSED_AFTER[refused](ds)

    try:
        chute.checkpoint.check_reshardable(iter(built(0, old)))
        at_build = None
    except ReshardError as error:
        at_build = str(error)
    olds = [iter(built(i, old)) for i in range(old)]
    for it in olds:
        for _ in range(data.draw(st.integers(0, 4), label="stop")):
            next(it, None)
    try:
        reshard([make_document(it, i, old) for i, it in enumerate(olds)], new)
        at_restore = None
    except ReshardError as error:
        at_restore = str(error)
    assert at_build == at_restore
    assert (at_build is None) == (refused is None)


def _tagged_noise(x, rng):
    return (x, int(rng.integers(1 << 30)))


@pytest.mark.parametrize("key", ["record", "position"])
def test_a_random_map_after_the_shard_reshards_each_record_once(key):
    """By record: the very draws of a run that never resharded. By position: new draws for
    what the new processes read (their positions count differently), each record once."""

    def make(index, count):
        ds = chute.MapDataset.range(60).seed(5).shuffle().shard(index, count).to_iter_dataset()
        return ds.random_map(_tagged_noise, seed=9, key=key)

    chute.checkpoint.check_reshardable(iter(make(0, 3)))
    olds = [iter(make(i, 3)) for i in range(3)]
    head = [x for it, stop in zip(olds, [4, 9, 1], strict=True) for x in itertools.islice(it, stop)]
    documents = [make_document(it, i, 3) for i, it in enumerate(olds)]
    news = [iter(make(k, 2)) for k in range(2)]
    for it, document in zip(news, reshard(documents, 2), strict=True):
        apply_document(it, document)
    seen = head + [x for it in news for x in it]
    assert sorted(x for x, _ in seen) == list(range(60))
    unsharded = dict(make(0, 1))
    same = sum(unsharded[x] == noise for x, noise in seen)
    assert same == 60 if key == "record" else same < 60
