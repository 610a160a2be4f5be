"""`unbatch` and `rebatch` of the stream, and `map_with_index`, after the shard reshard
(issue 30).

An unbatch or a rebatch splits each element of the stream (a batch) into rows, as a flat
map does: the batch a process stopped inside goes back to be read by its new owner,
which leaves out the rows delivered before. A `map_with_index` keeps one output per
position, so it reshards as `map` does; the index it passes counts the new process's
own elements.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import ReshardError, apply_document, make_document, reshard

COUNTS = st.integers(1, 8)


def _rows(x):
    """A batch of 0 to 3 rows, each a distinct record (10 * x + k)."""
    return np.arange(10 * x, 10 * x + x % 4, dtype=np.int64)


def _kept(x):
    return x % 5 != 2


def _record(row):
    return int(row)


@st.composite
def pipelines(draw):
    """A stream unbatch or rebatch after the shard, with filters, workers and a batch."""
    size = draw(st.integers(0, 60))
    seed = draw(st.integers(0, 5))
    before = draw(st.booleans())  # A filter between the reader and the unbatch.
    workers = draw(st.sampled_from([None, 0, 1]))  # mp_prefetch before the unbatch...
    inside = draw(st.booleans())  # ... or after it: the unbatch runs in the workers.
    chunk = draw(st.integers(1, 5))
    after = draw(st.booleans())  # A filter of the rows.
    batch = draw(st.sampled_from([None, 1, 3]))
    rebatch = draw(st.sampled_from([None, 1, 2, 5]))  # Rebatch rather than unbatch.

    def make(index, count):
        ds = chute.MapDataset.range(size).seed(seed).shuffle().shard(index, count)
        it = ds.to_iter_dataset()
        if before:
            it = it.filter(_kept)
        it = it.map(_rows)
        options = None if workers is None else chute.MultiprocessingOptions(num_workers=workers)
        if options is not None and (rebatch is not None or not inside):
            it = it.mp_prefetch(options, chunk_size=chunk)
        if rebatch is not None:
            return it.filter(len).rebatch(rebatch)  # Rebatch needs batches with rows.
        it = it.unbatch().map(_record)
        if after:
            it = it.filter(_kept)
        if options is not None and inside:  # A batch after it is stacked by the workers.
            it = it.mp_prefetch(options, chunk_size=chunk)
        return it if batch is None else it.batch(batch)

    return make, batch is not None or rebatch is not None


@settings(max_examples=60, deadline=None)
@given(pipelines(), COUNTS, st.lists(COUNTS, min_size=1, max_size=3), st.integers(0, 2**16))
def test_every_row_comes_once_on_any_counts(pipeline, old, news, seed):
    make, batched = pipeline
    chute.checkpoint.check_reshardable(iter(make(0, old)))
    records = chute.testing.rows if batched else None
    run = chute.testing.assert_reshards(make, old, news, seed=seed, records=records)
    assert run.counts == (old, *news)


def _pipeline(index, count):
    """Batches of 3 rows read from a source whose records are batches."""
    batches = [np.array([10 * x, 10 * x + 1, 10 * x + 2]) for x in range(12)]
    ds = chute.MapDataset.source(batches).shard(index, count).to_iter_dataset()
    return ds.unbatch().map(_record)


def test_the_batch_a_process_stopped_inside_continues_on_its_new_owner():
    olds = [iter(_pipeline(i, 2)) for i in range(2)]
    # Process 0 takes batches 0 and 2 and two rows of 4; process 1 one row of batch 1.
    head = [*itertools.islice(olds[0], 8), next(olds[1])]
    assert head[-3:] == [40, 41, 10]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    assert (
        documents[0]["state"]["parent"]["offset"] == 2
        and documents[0]["state"]["parent"]["at"] == 2
    )
    new = reshard(documents, 3)
    # Global 4 is position 1 of shard 1 of 3, global 1 position 0 of shard 1 too.
    assert new[1]["state"]["parent"]["skip"] == [[0, 1], [1, 2]]
    assert "skip" not in new[0]["state"]["parent"] and "skip" not in new[2]["state"]["parent"]
    news = [iter(_pipeline(k, 3)) for k in range(3)]
    for it, document in zip(news, new, strict=True):
        apply_document(it, document)
    assert list(itertools.islice(news[1], 3)) == [11, 12, 42]
    rest = [x for it in news for x in it]
    assert sorted([*head, 11, 12, 42, *rest]) == sorted(
        10 * x + k for x in range(12) for k in range(3)
    )


@pytest.mark.parametrize(
    ("make", "stage", "reason"),
    [
        (
            lambda i, n: (
                chute.MapDataset.range(9)
                .shard(i, n)
                .to_iter_dataset()
                .map(_rows)
                .unbatch()
                .batch(2)
                .mp_prefetch(chute.MultiprocessingOptions(num_workers=0))
            ),
            "stage 6 (mp_prefetch) runs the batch of stage 5 in its workers, over the outputs "
            "of the unbatch of stage 4",
            "apply the batch after mp_prefetch(...)",
        ),
        (
            lambda i, n: (
                chute.MapDataset.range(9)
                .shard(i, n)
                .to_iter_dataset()
                .map(_rows)
                .unbatch()
                .map(_rows)
                .unbatch()
            ),
            "stage 6 (unbatch) follows the shard stage",
            "put it before .shard(...)",
        ),
        (
            lambda i, n: chute.MapDataset.range(9).shard(i, n).batch(2).unbatch().to_iter_dataset(),
            "stage 3 (unbatch) follows the shard stage",
            "put it before .shard(...)",
        ),
    ],
    ids=["batched_inside_workers", "two_unbatches", "before_the_stream"],
)
def test_unbatches_that_cannot_continue_elsewhere_are_refused_when_built(
    make, stage, reason, refused_alike
):
    message = refused_alike(make)
    assert message.startswith(stage) and reason in message


def _indexed(index, x):
    return (index, x)


@pytest.mark.parametrize("level", ["map", "stream"])
def test_map_with_index_after_the_shard_gives_each_record_once(level):
    """Each record once; the indices the new processes pass are their own counts, the
    same in two runs from the same states."""

    def make(index, count):
        ds = chute.MapDataset.range(50).seed(3).shuffle().shard(index, count)
        if level == "map":
            return ds.map_with_index(_indexed).to_iter_dataset()
        return ds.to_iter_dataset().filter(_kept).map_with_index(_indexed)

    chute.checkpoint.check_reshardable(iter(make(0, 4)))
    run = chute.testing.assert_reshards(make, 4, [3, 6], seed=5, records=lambda e: [e[1]])
    assert run.records == (50 if level == "map" else 40)

    olds = [iter(make(i, 3)) for i in range(3)]
    for it, stop in zip(olds, [5, 1, 3], strict=True):
        list(itertools.islice(it, stop))
    documents = [make_document(it, i, 3) for i, it in enumerate(olds)]

    def continued():
        news = [iter(make(k, 2)) for k in range(2)]
        for it, document in zip(news, reshard(documents, 2), strict=True):
            apply_document(it, document)
        return [list(it) for it in news]

    first = continued()
    assert first == continued()
    if level == "map":  # Position p of a new shard passes p: ascending, below its 25.
        indices = [i for i, _ in first[1]]
        assert indices == sorted(set(indices)) and indices[-1] == 24


def _rebatched(index, count):
    batches = [np.arange(10 * x, 10 * x + 3) for x in range(10)]
    ds = chute.MapDataset.source(batches).shard(index, count).to_iter_dataset()
    return ds.rebatch(2)


def test_the_rows_of_a_batch_a_rebatch_stopped_inside_go_to_its_new_owner():
    olds = [iter(_rebatched(i, 2)) for i in range(2)]
    head = [next(olds[0]).tolist(), next(olds[0]).tolist()]  # Batch 0, and a row of 2.
    assert head == [[0, 1], [2, 20]]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    assert documents[0]["state"] == {"parent": {"position": 1}, "offset": 1, "at": 1}
    new = reshard(documents, 3)
    assert new[2]["state"]["skip"] == [[0, 1]]  # Global 2 is position 0 of shard 2 of 3.
    news = [iter(_rebatched(k, 3)) for k in range(3)]
    for it, document in zip(news, new, strict=True):
        apply_document(it, document)
    assert next(news[2]).tolist() == [21, 22]
    rest = [x for it in news for batch in it for x in batch.tolist()]
    seen = [x for batch in head for x in batch] + [21, 22] + rest
    assert sorted(seen) == [10 * x + k for x in range(10) for k in range(3)]


def _tiles(index, x):
    """A batch whose length follows the index: another host would make another one."""
    return np.full(index % 4 + 1, x, dtype=np.int64)


def _tokens(index, x):
    return {"tokens": _tiles(index, x)}


def _crops(x, rng):
    return np.full(int(rng.integers(1, 6)), x, dtype=np.int64)


@pytest.mark.parametrize(
    ("make", "stage"),
    [
        (
            lambda i, n: (
                chute.MapDataset.range(40)
                .shard(i, n)
                .map_with_index(_tiles)
                .to_iter_dataset()
                .unbatch()
            ),
            "stage 4 (unbatch) continues elsewhere an element a process stopped inside, but "
            "stage 2 (map_with_index) before it",
        ),
        (
            lambda i, n: (
                chute.MapDataset.range(40)
                .shard(i, n)
                .to_iter_dataset()
                .random_map(_crops, seed=0)
                .rebatch(3)
            ),
            "stage 4 (rebatch) continues elsewhere an element a process stopped inside, but "
            "stage 3 (random_map) before it makes that element from the number its process "
            "gives it, which another process count gives anew, so the element would differ; "
            'put random_map(...) after rebatch(...), or key="record" to draw by record',
        ),
        (
            lambda i, n: (
                chute.MapDataset.range(40)
                .shard(i, n)
                .to_iter_dataset()
                .map_with_index(_tiles)
                .flat_map(list)
            ),
            "stage 4 (flat_map) continues elsewhere",
        ),
        (
            lambda i, n: (
                chute.MapDataset.range(40)
                .shard(i, n)
                .to_iter_dataset()
                .map_with_index(_tokens)
                .pack(4, method="concat_split")
            ),
            "stage 4 (pack) continues elsewhere",
        ),
    ],
    ids=["index_then_unbatch", "position_draws_then_rebatch", "index_then_flat_map", "pack"],
)
def test_a_split_after_a_stage_that_follows_the_host_numbering_is_refused(
    make, stage, refused_alike
):
    """The element a host stopped inside must be the same on its new owner."""
    assert refused_alike(make).startswith(stage)


def test_draws_by_record_before_an_unbatch_reshard_each_row_once():
    def make(index, count):
        ds = chute.MapDataset.range(40).seed(2).shuffle().shard(index, count).to_iter_dataset()
        return ds.random_map(_crops, seed=0, key="record").unbatch().map(_record)

    run = chute.testing.assert_reshards(make, 3, [4, 2], seed=7)
    assert run.counts == (3, 4, 2)


def test_a_checkpoint_that_records_older_traits_says_so_when_refused():
    def make(index, count):
        ds = chute.MapDataset.range(20).shard(index, count).to_iter_dataset()
        return ds.map_with_index(_indexed)

    olds = [iter(make(i, 2)) for i in range(2)]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    for document in documents:  # As a chute that did not reshard map_with_index saved it.
        document["traits"]["map_with_index"] = {}
    with pytest.raises(ReshardError) as caught:
        reshard(documents, 3)
    assert str(caught.value).startswith("stage 3 (map_with_index) follows the shard stage")
    assert str(caught.value).endswith(
        "(The checkpoint records what map_with_index did in the chute that saved it, which "
        "this release does otherwise: a checkpoint saved by this release may reshard.)"
    )


def _token_draws(x, rng):
    return {"tokens": np.full(int(rng.integers(1, 4)), x, dtype=np.int64)}


def _row_tokens(row):
    tokens = row["tokens"] if isinstance(row, dict) else row[0]["tokens"]
    return sorted(set(int(t) for t in np.ravel(tokens)) - {0})


@pytest.mark.parametrize("method", ["first_fit", "best_fit"])
def test_packers_that_put_back_whole_elements_reshard_after_draws_by_position(method):
    """Only a packer that cuts elements between rows needs them the same on a new host."""

    def make(index, count):
        ds = chute.MapDataset.range(1, 41).shard(index, count).to_iter_dataset()
        return ds.random_map(_token_draws, seed=0).pack(6, method=method)

    chute.checkpoint.check_reshardable(iter(make(0, 2)))
    run = chute.testing.assert_reshards(make, 2, [3], seed=4, records=_row_tokens)
    assert run.records == 40


def test_a_checkpoint_that_does_not_say_its_stage_is_numbered_is_refused_all_the_same():
    olds = [iter(_numbered_unbatch(i, 2)) for i in range(2)]
    next(olds[0])
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    for document in documents:  # As the first chute that resharded map_with_index saved it.
        document["traits"]["map_with_index"] = {"keeps_positions": True}
    with pytest.raises(ReshardError, match=r"stage 4 \(unbatch\) continues elsewhere"):
        reshard(documents, 3)


def _numbered_unbatch(index, count):
    ds = chute.MapDataset.range(40).shard(index, count).map_with_index(_tiles)
    return ds.to_iter_dataset().unbatch()
