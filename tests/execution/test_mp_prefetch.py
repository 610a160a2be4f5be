"""Worker processes: the output never depends on the number of workers."""

import operator
import os
import time

import numpy as np
import pytest

import chute
import chute_testing.execution
from chute_execution import (
    ChunkPlan,
    MultiprocessingOptions,
    MultiprocessPrefetchIter,
    WorkerDiedError,
)
from chute_samplers import ShuffleMap
from chute_testing import assert_resumes, assert_trees_equal
from chute_testing.execution import AddNoise, FailAt, KillWorkerAt, Remainder, Repeat
from chute_transforms import FilterIter, FlatMapIter, MapIter

_is_odd = Remainder(2, 1)
_pair = Repeat(3)


def _pipeline(n=300):
    return (
        chute.MapDataset.range(n)
        .shuffle(seed=4)
        .to_iter_dataset()
        .filter(_is_odd)
        .flat_map(_pair)
        .random_map(AddNoise(), seed=9)
        .map(operator.neg)
        .batch(5)
    )


def _run(ds):
    return list(ds)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_output_is_identical_for_any_number_of_workers(workers):
    expected = _run(_pipeline())
    got = _run(_pipeline().mp_prefetch(MultiprocessingOptions(num_workers=workers), chunk_size=7))
    assert_trees_equal(got, expected)


def test_chunk_size_does_not_change_the_output():
    expected = _run(_pipeline())
    for size in (1, 5, 64, 1000):
        ds = _pipeline().mp_prefetch(MultiprocessingOptions(num_workers=0), chunk_size=size)
        assert_trees_equal(_run(ds), expected)


def test_resume_with_another_number_of_workers():
    base = chute.MapDataset.range(60).shuffle(seed=1).to_iter_dataset().filter(_is_odd)

    def make(workers):
        return lambda: iter(base.mp_prefetch(MultiprocessingOptions(workers), chunk_size=4))

    assert_resumes(make(0), every=None, make_restored=[make(2)], expected=list(base))


def test_a_worker_exception_keeps_its_type_and_names_worker_and_chunk():
    ds = chute.MapDataset.range(40).to_iter_dataset().map(FailAt(23, KeyError))
    it = iter(ds.mp_prefetch(MultiprocessingOptions(num_workers=2), chunk_size=10))
    # Every element before the failing one comes out first, as without workers.
    assert [next(it) for _ in range(23)] == list(range(23))
    with pytest.raises(KeyError) as info:
        next(it)
    notes = "\n".join(info.value.__notes__)
    assert "raised by map(FailAt) on the element at position 23" in notes
    assert "raised in worker 0 while running chunk 2 (base positions 20..29)" in notes
    assert "Traceback" in notes
    assert it.get_state() == {"position": 20, "offset": 3}
    with pytest.raises(KeyError):  # It stays at the failing element.
        next(it)


def test_a_killed_worker_raises_within_seconds():
    ds = chute.MapDataset.range(100).to_iter_dataset().map(KillWorkerAt(55))
    it = iter(ds.mp_prefetch(MultiprocessingOptions(num_workers=2), chunk_size=10))
    start = time.monotonic()
    with pytest.raises(WorkerDiedError, match=r"worker 1 \(pid \d+\) was killed by SIGKILL"):
        list(it)
    assert time.monotonic() - start < 5 + 10  # Startup included; detection polls every 50 ms.


def test_lambdas_travel_to_workers_and_unpicklable_pipelines_fail_at_once_with_a_hint():
    ds = chute.MapDataset.range(4).to_iter_dataset().map(lambda x: x * 10)
    assert list(ds.mp_prefetch(MultiprocessingOptions(num_workers=1))) == [0, 10, 20, 30]
    held = __import__("threading").Lock()
    ds = chute.MapDataset.range(4).to_iter_dataset().map(lambda x: (held, x)[1])
    with pytest.raises(TypeError, match=r"cannot be sent to worker processes.*in the worker"):
        iter(ds.mp_prefetch(MultiprocessingOptions(num_workers=1)))


def test_streams_that_are_not_position_based_are_refused():
    mixed = chute.IterDataset.mix([chute.MapDataset.range(3), chute.MapDataset.range(3)])
    with pytest.raises(TypeError, match="starts by reading a random-access dataset"):
        mixed.mp_prefetch(MultiprocessingOptions(num_workers=1))


def _children():
    return {p.pid for p in __import__("multiprocessing").active_children()}


@pytest.mark.parametrize("idle_seconds", [0, 30])
def test_workers_stop_or_park_on_exhaustion_close_and_garbage_collection(idle_seconds):
    """With `idle_worker_seconds=0` they end with each iterator; else they wait, parked,
    and each next iterator takes them over (the same two pids throughout)."""
    chute.stop_idle_workers()
    before = _children()
    options = MultiprocessingOptions(2, idle_worker_seconds=idle_seconds)
    ds = chute.MapDataset.range(30).to_iter_dataset().mp_prefetch(options)
    assert list(ds) == list(range(30))
    seen = _children() - before
    it = iter(ds)
    next(it)
    it.close()
    seen |= _children() - before
    it = iter(ds)
    next(it)
    pids = _children() - before
    assert pids
    seen |= pids
    del it
    import gc

    gc.collect()
    if idle_seconds:
        assert len(seen) == 2 and all(_alive(pid) for pid in pids)
        assert chute.stop_idle_workers() == 2
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(pid) for pid in seen):
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in seen)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_the_plan_runs_chunks_with_origins():
    plan = ChunkPlan(
        ShuffleMap(range(10), seed=0),
        [(FilterIter, (_is_odd,), {}), (FlatMapIter, (_pair,), {}), (MapIter, (abs,), {})],
        chunk_size=4,
    )
    outputs = [plan.run(c)[0] for c in range(plan.num_chunks)]
    single = list(MultiprocessPrefetchIter(plan, MultiprocessingOptions(0)))
    assert [x for chunk in outputs for x in chunk] == single
    assert np.all(np.asarray(single) % 2 == 1)


def _segments():
    from chute_core.internal import SHM_PREFIX, shm_dir

    return {name for name in os.listdir(shm_dir()) if name.startswith(SHM_PREFIX)}


def _wait_for_no_new_segments(before, seconds=5.0):
    chute.free_idle_slabs()  # Kept for the next iterator's workers; freed at exit anyway.
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and _segments() - before:
        time.sleep(0.05)
    return _segments() - before


def _arrays():
    return chute.MapDataset.range(64).to_iter_dataset().map(chute_testing.execution.FullArray(4096))


def test_arrays_come_back_equal_and_writable_through_shared_memory():
    expected = list(_arrays())
    before = _segments()
    got = list(_arrays().mp_prefetch(MultiprocessingOptions(num_workers=2), chunk_size=5))
    assert_trees_equal(got, expected)
    assert all(array.flags.writeable for array in got)
    assert _wait_for_no_new_segments(before) == set()


@pytest.mark.parametrize("how", ["exception", "killed worker", "garbage collected", "closed early"])
def test_no_shared_memory_is_left_behind(how):
    import gc

    before = _segments()
    ds = _arrays()
    if how == "exception":
        ds = ds.map(chute_testing.execution.FailOnSum(40 * 4096))
    if how == "killed worker":
        ds = ds.map(chute_testing.execution.KillWorkerOnSum(40 * 4096))
    it = iter(ds.mp_prefetch(MultiprocessingOptions(num_workers=2), chunk_size=5))
    if how in ("exception", "killed worker"):
        with pytest.raises((ValueError, WorkerDiedError)):
            list(it)
    else:
        next(it)
    if how == "closed early":
        it.close()
    del it
    gc.collect()
    assert _wait_for_no_new_segments(before) == set()


def test_a_stuck_worker_raises_after_the_timeout_and_leaves_nothing():
    from chute_execution import WorkerTimeoutError
    from chute_testing.execution import SleepAt

    before = _segments()
    ds = chute.MapDataset.range(40).to_iter_dataset().map(SleepAt(25, 3600))
    options = MultiprocessingOptions(num_workers=2, worker_timeout=2.0)
    it = iter(ds.mp_prefetch(options, chunk_size=10))
    assert [next(it) for _ in range(20)] == list(range(20))
    start = time.monotonic()
    with pytest.raises(WorkerTimeoutError, match=r"worker 0 \(pid \d+\) took more than 2.0 s"):
        next(it)
    assert time.monotonic() - start < 2.0 + 5
    assert it.get_state() == {"position": 20, "offset": 0}
    assert _wait_for_no_new_segments(before) == set()


def test_bad_worker_timeouts_are_refused():
    with pytest.raises(ValueError, match="worker_timeout must be None or > 0"):
        MultiprocessingOptions(num_workers=1, worker_timeout=0)


def test_the_fork_start_method_is_refused_with_the_reason():
    refused = (
        r"start_method must be 'auto', 'forkserver' or 'spawn', got 'fork' \('fork' is "
        r"refused: .*jax.*'auto' forks only when this process is provably single-threaded"
    )
    with pytest.raises(ValueError, match=refused):
        MultiprocessingOptions(num_workers=2, start_method="fork")  # type: ignore[arg-type]


def _plus_draw(x, rng):
    return x * 100 + int(rng.integers(100))


@pytest.mark.parametrize("workers", [0, 1])
def test_a_random_map_keyed_by_record_after_the_workers_draws_as_without_them(workers):
    """`prefetch()` ends what the workers run, so the random map runs after them, here."""

    def pipeline(options):
        ds = chute.MapDataset.range(40).seed(2).shuffle().to_iter_dataset().filter(bool)
        ds = ds.prefetch(2).random_map(_plus_draw, seed=5, key="record")
        return ds if options is None else ds.mp_prefetch(options, chunk_size=3)

    expected = list(pipeline(None))
    options = chute.MultiprocessingOptions(num_workers=workers)
    assert list(pipeline(options)) == expected
    assert sorted(x // 100 for x in expected) == list(range(1, 40))
