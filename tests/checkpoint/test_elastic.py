"""Restore on another number of processes: batched, global and shared-replica pipelines.

Processes are simulated by iterators of the pipeline each would build; the real
multi-process runs (`jax.distributed`) are in `test_multihost_elastic.py`.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import (
    ReshardError,
    apply_document,
    make_document,
    reshard,
    reshard_for,
    restore,
    save,
)

SIZE = 60


def _order(size=SIZE):
    return list(chute.MapDataset.range(size).seed(4).shuffle())


def _stream_batched(index, count, size=SIZE, workers=None):
    """Shard, then batch the stream: 3 elements of this shard per batch."""
    ds = chute.MapDataset.range(size).seed(4).shuffle().shard(index, count).to_iter_dataset()
    if workers is not None:
        ds = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=4)
    return ds.batch(3)


def _map_batched(index, count, size=SIZE):
    """Shard, then batch positions (a MapDataset batch): the state counts batches."""
    ds = chute.MapDataset.range(size).seed(4).shuffle().shard(index, count)
    return ds.batch(3).to_iter_dataset()


def _lists(batches):
    return [b.tolist() for b in batches]


def _step(iterators, steps):
    """`steps` batches from every process, in lockstep: the global batches, process-major."""
    return [[x for it in iterators for x in next(it).tolist()] for _ in range(steps)]


def _shard_batches(order, start, index, count, size=3):
    """Batches of shard `index` of `count`, from global position `start` on."""
    mine = [x for p, x in enumerate(order) if p >= start and p % count == index]
    return [mine[i : i + size] for i in range(0, len(mine), size)]


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(0, 5))
def test_a_stream_batched_after_the_shard_continues_on_any_count(old, new, steps):
    olds = [iter(_stream_batched(i, old)) for i in range(old)]
    head = _step(olds, steps)
    documents = [make_document(it, i, old) for i, it in enumerate(olds)]
    consumed = steps * 3 * old  # Totals the new count does not divide continue too.
    news = [iter(_stream_batched(k, new)) for k in range(new)]
    for k, document in enumerate(reshard(documents, new)):
        apply_document(news[k], document)
        assert _lists(news[k]) == _shard_batches(_order(), consumed, k, new)
    assert sorted(x for batch in head for x in batch) == sorted(_order()[:consumed])


def test_worker_states_of_a_stream_batched_after_the_shard_reshard():
    olds = [iter(_stream_batched(i, 2, workers=0)) for i in range(2)]
    _step(olds, 5)  # 30 positions: each of 3 new processes continues from local 10.
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    for k, document in enumerate(reshard(documents, 3)):
        assert document["state"] == {"parent": {"position": 10, "offset": 0}}
        it = iter(_stream_batched(k, 3, workers=0))
        apply_document(it, document)
        assert _lists(it) == _shard_batches(_order(), 30, k, 3)


def test_a_map_batch_after_the_shard_counts_batches():
    olds = [iter(_map_batched(i, 2)) for i in range(2)]
    _step(olds, 3)  # 18 positions: 3 processes continue from their batch 2.
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    news = reshard(documents, 3)
    assert [d["state"] for d in news] == [{"position": 2}] * 3
    for k, document in enumerate(news):
        it = iter(_map_batched(k, 3))
        apply_document(it, document)
        assert _lists(it) == _shard_batches(_order(), 18, k, 3)


def test_a_map_batch_after_the_shard_refuses_to_start_inside_a_batch():
    olds = [iter(_map_batched(i, 2)) for i in range(2)]
    _step(olds, 1)
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    with pytest.raises(ReshardError) as caught:
        reshard(documents, 3)
    assert str(caught.value) == (
        "2 processes consumed 6 elements together; 3 processes would each continue from "
        "element 2 of their shard, inside a batch of 3 (the MapDataset.batch after the "
        "shard): restore from a step where the total is divisible by 9."
    )


def _keep(x):
    return x % 4 != 0


def test_a_filter_before_the_batch_continues_each_shard_where_it_stopped():
    def filtered(index, count):
        ds = chute.MapDataset.range(40).shard(index, count).to_iter_dataset()
        return ds.filter(_keep).batch(2)

    olds = [iter(filtered(i, 2)) for i in range(2)]
    # Shard 0 (even numbers) loses every other element to the filter, shard 1 none: at
    # the same step, shard 0 has read 8 of its positions and shard 1 only 4.
    assert _step(olds, 2) == [[2, 6, 1, 3], [10, 14, 5, 7]]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    (document,) = reshard(documents, 1)
    it = iter(filtered(0, 1))
    apply_document(it, document)
    # One process reads 9, 11, ... (shard 1's rest) and 16, 18, ... (shard 0's), in order.
    assert [x for batch in _lists(it) for x in batch] == [
        x for x in range(9, 40) if _keep(x) and (x % 2 or x >= 16)
    ]


def _global(size=SIZE):
    """No shard stage: every process walks the same global batches."""
    return chute.MapDataset.range(size).seed(4).shuffle().batch(6).to_iter_dataset()


def test_a_global_pipeline_gives_every_new_process_the_common_state():
    olds = [iter(_global()) for _ in range(2)]
    _step(olds, 4)
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    news = reshard(documents, 3)
    assert [(d["process_index"], d["process_count"], d["state"]) for d in news] == [
        (k, 3, {"position": 4}) for k in range(3)
    ]
    assert {d["fingerprint"] for d in news} == {documents[0]["fingerprint"]}
    it = iter(_global())
    apply_document(it, news[2])
    assert _lists(it) == [_order()[p : p + 6] for p in range(24, SIZE, 6)]


def test_a_global_pipeline_at_different_states_is_refused():
    olds = [iter(_global()) for _ in range(2)]
    next(olds[0])
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    with pytest.raises(ReshardError) as caught:
        reshard(documents, 1)
    assert str(caught.value) == (
        "the pipeline has no shard stage, so every process walks the same positions, but "
        "process 1's state {'position': 0} differs from process 0's {'position': 1}: save "
        "every process at the same step (or shard the data with .shard(...) or "
        "batch(..., sharding=...))."
    )
    other = make_document(iter(_global(size=SIZE + 1)), 1, 2)
    with pytest.raises(ReshardError, match="state 1 is of a different pipeline than state 0;"):
        reshard([documents[0], other], 1)


def _replica(shard, shards):
    return chute.MapDataset.range(SIZE).seed(4).shuffle().shard(shard, shards).to_iter_dataset()


def test_processes_that_share_a_replica_reshard_to_the_iterators_shard():
    # 4 processes, 2 data-parallel replicas (processes 0, 1 read shard 0; 2, 3 shard 1),
    # as shard(mesh, "data") gives them; each is 5 elements in.
    olds = [iter(_replica(p // 2, 2)) for p in range(4)]
    for it in olds:
        for _ in range(5):
            next(it)
    documents = [make_document(it, p, 4) for p, it in enumerate(olds)]
    # Then 2 processes in one replica: both read shard 0 of 1, from position 10.
    for process in range(2):
        it = iter(_replica(0, 1))
        document = reshard_for(documents, it, process_index=process, process_count=2)
        assert (document["process_index"], document["process_count"]) == (process, 2)
        apply_document(it, document)
        assert list(it) == _order()[10:]
    documents[1]["state"] = {"position": 4}
    with pytest.raises(ReshardError) as caught:
        reshard_for(documents, iter(_replica(0, 1)), process_index=0, process_count=2)
    assert str(caught.value) == (
        "processes 0 and 1 read the same shard 0 (they share a data-parallel replica) but are "
        "at different states; save every process at the same step."
    )


def test_an_iterator_without_the_shard_stage_is_refused():
    olds = [iter(_replica(p, 2)) for p in range(2)]
    documents = [make_document(it, p, 2) for p, it in enumerate(olds)]
    with pytest.raises(ReshardError) as caught:
        reshard_for(documents, iter(_global()), process_index=0, process_count=1)
    assert str(caught.value) == (
        "the checkpoint's pipeline shards at stage 3 (.shard(i, n)), but this iterator's "
        "pipeline has no shard stage there (its stages: ['source', 'seed', 'shuffle', "
        "'batch', 'to_iter_dataset']); restore into the same pipeline."
    )


def test_restore_reshards_a_folder_of_another_process_count(tmp_path):
    olds = [iter(_stream_batched(i, 2)) for i in range(2)]
    head = _step(olds, 4)
    for index, it in enumerate(olds):
        save(it, tmp_path, process_index=index, process_count=2)
    rest = []
    for k in range(3):
        it = restore(iter(_stream_batched(k, 3)), tmp_path, process_index=k, process_count=3)
        batches = _lists(it)
        assert batches == _shard_batches(_order(), 24, k, 3)
        rest += [x for batch in batches for x in batch]
    assert sorted(x for batch in head for x in batch) + sorted(rest) == sorted(
        _order()[:24]
    ) + sorted(_order()[24:])
    for k in range(5):  # 24 elements consumed, which 5 do not divide: they continue too.
        it = restore(iter(_stream_batched(k, 5)), tmp_path, process_index=k, process_count=5)
        assert _lists(it) == _shard_batches(_order(), 24, k, 5)


def _fails_on_sevens(x):
    if x % 7 == 3:
        raise ValueError(f"record {x} is damaged")
    return x


def _budgeted(index, count, workers=None):
    ds = chute.MapDataset.range(SIZE).seed(4).shuffle().shard(index, count).to_iter_dataset()
    ds = ds.map(_fails_on_sevens)
    if workers is not None:
        ds = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=4)
    return ds.skip_errors(20).batch(3)


@pytest.mark.parametrize("workers", [None, 0])
def test_a_pipeline_with_an_error_budget_reshards_its_skips_stay_skipped(workers):
    olds = [iter(_budgeted(index, 3, workers)) for index in range(3)]
    head = []
    for it, stop in zip(olds, [4, 1, 6], strict=True):
        head += [x for _ in range(stop) for x in next(it).tolist()]
    documents = [make_document(it, index, 3) for index, it in enumerate(olds)]
    failed = [document["state"]["parent"]["errors"]["failures"] for document in documents]
    assert sum(failed) > 0
    news = reshard(documents, 2)
    # The failures are shared among the new processes; the skipped are behind them all.
    assert [d["state"]["parent"]["errors"] for d in news] == [
        {"failures": (sum(failed) + 1) // 2, "skipped": []},
        {"failures": sum(failed) // 2, "skipped": []},
    ]
    rest = []
    for index, document in enumerate(news):
        it = iter(_budgeted(index, 2, workers))
        apply_document(it, document)
        rest += [x for batch in it for x in batch.tolist()]
    kept = [x for x in range(SIZE) if x % 7 != 3]
    assert sorted(head + rest) == kept  # Each kept record once; the damaged never.
