"""Workers parked after an iterator ends are taken over by the next one (`_idle_workers`).

Checked with real worker processes (their pids tell which ran): the next iterator with
the same options reuses them and yields exactly what fresh workers yield, for the same
pipeline or another one; what must not reuse them does not (a `worker_init_fn`,
`idle_worker_seconds=0`, another working folder, a failed pool); parked workers end on
their own when their time is up, when killed, at `stop_idle_workers()` and with the
consumer, leaving no process and nothing in the shared-memory folder.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from chute_core.internal import SHM_PREFIX, shm_dir
from chute_execution import (
    ChunkPlan,
    MultiprocessingOptions,
    MultiprocessPrefetchIter,
    WorkerDiedError,
    free_idle_slabs,
    stop_idle_workers,
)
from chute_sources.internal import reading_one_by_one
from chute_testing import assert_resumes
from chute_testing.execution import FullArray, all_exited
from chute_transforms import MapIter

EXITED_WITHIN = 15.0  # Seconds for workers told to stop to exit: a bound, not a speed.

ROWS = 2**17  # 1 MiB per element: leased to the consumer as views into the slab.


def with_pid(value: int) -> tuple[int, int]:
    """`(value, pid of the process that ran it)`."""
    return value, os.getpid()


def square(value: int) -> int:
    return value * value


def reads_one_by_one(value: int) -> bool:
    return reading_one_by_one()


def record_init(worker: int, num_workers: int) -> None:
    del worker, num_workers


def _iterator(length: int = 12, *, fn=with_pid, init=None, **options) -> MultiprocessPrefetchIter:
    plan = ChunkPlan(range(length), [(MapIter, (fn,), {})], chunk_size=2)
    options = MultiprocessingOptions(num_workers=2, **options)
    return MultiprocessPrefetchIter(plan, options, worker_init_fn=init)


def _run(it: MultiprocessPrefetchIter) -> tuple[list[int], set[int]]:
    """The values of a `with_pid` pipeline, and the pids of the workers that ran them."""
    pairs = list(it)
    return [value for value, _ in pairs], {pid for _, pid in pairs}


@pytest.fixture(autouse=True)
def _no_idle_workers():
    stop_idle_workers()
    yield
    stop_idle_workers()
    free_idle_slabs()


def test_the_next_iterator_takes_over_the_workers_and_yields_the_same() -> None:
    first, first_pids = _run(_iterator())
    second, second_pids = _run(_iterator())
    assert first == second == list(range(12))
    assert len(first_pids) == 2
    assert second_pids == first_pids
    assert stop_idle_workers() == 2
    assert all_exited(first_pids, seconds=EXITED_WITHIN)


def test_another_pipeline_with_the_same_options_runs_on_the_parked_workers() -> None:
    _, pids = _run(_iterator())
    it = _iterator(10, fn=square)
    assert list(it) == [value * value for value in range(10)]
    _, again = _run(_iterator())
    assert again == pids  # The squares ran on them in between, and parked them again.


def test_reuse_is_off_with_zero_idle_seconds_and_the_workers_end_with_the_iterator() -> None:
    values, pids = _run(_iterator(idle_worker_seconds=0))
    assert values == list(range(12))
    assert all_exited(pids, seconds=EXITED_WITHIN)
    assert stop_idle_workers() == 0
    _, fresh = _run(_iterator(idle_worker_seconds=0))
    assert not fresh & pids


def test_workers_with_an_init_function_are_never_reused() -> None:
    _, pids = _run(_iterator(init=record_init))
    assert all_exited(pids, seconds=EXITED_WITHIN)
    _, again = _run(_iterator(init=record_init))
    assert not again & pids
    assert stop_idle_workers() == 0


def test_other_options_or_another_working_folder_start_fresh_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chute_execution import _idle_workers

    monkeypatch.setattr(_idle_workers, "_most_idle", lambda: 6)
    _, pids = _run(_iterator())
    _, deeper = _run(_iterator(per_worker_buffer_size=3))
    assert not deeper & pids
    monkeypatch.chdir(tmp_path)
    _, elsewhere = _run(_iterator())
    assert not elsewhere & (pids | deeper)
    assert stop_idle_workers() == 6  # Each of the three groups waits for its like.


def test_the_oldest_groups_stop_when_too_many_workers_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from chute_execution import _idle_workers

    monkeypatch.setattr(_idle_workers, "_most_idle", lambda: 4)
    groups = [_run(_iterator(per_worker_buffer_size=size))[1] for size in (1, 2, 3)]
    assert all_exited(groups[0], seconds=EXITED_WITHIN)
    assert stop_idle_workers() == 4  # The two newest groups waited.
    assert all_exited(groups[1] | groups[2], seconds=EXITED_WITHIN)


class _FinalizerOnFirstLook:
    """A parked worker that looks dead, whose first liveness check runs `_expire` first.

    As the garbage collector does when it runs the finalizer of another pool (which
    parks it, then lets go of expired groups) in the middle of a look at the groups.
    """

    def __init__(self, process, expire) -> None:
        self._process, self._expire, self._fired = process, expire, False
        self.pid = process.pid

    def is_alive(self) -> bool:
        if not self._fired:
            self._fired = True
            self._expire()
        return False  # Its group is let go (the real process exits when told to).

    def __getattr__(self, name):
        return getattr(self._process, name)


def test_a_group_let_go_by_a_finalizer_mid_look_is_let_go_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from chute_execution import _idle_workers

    _, pids = _run(_iterator())
    [group] = _idle_workers._IDLE
    group.processes[0] = _FinalizerOnFirstLook(group.processes[0], _idle_workers._expire)
    released = []
    release = _idle_workers._release
    monkeypatch.setattr(_idle_workers, "_release", lambda g: released.append(g) or release(g))
    _idle_workers._expire()  # Raised ValueError: the inner call had taken the group.
    assert released == [group]
    assert _idle_workers.parked_count() == 0
    assert all_exited(pids, seconds=EXITED_WITHIN)
    values, fresh = _run(_iterator())
    assert values == list(range(12)) and not fresh & pids


def test_parked_workers_exit_when_their_time_is_up_and_fresh_ones_start() -> None:
    _, pids = _run(_iterator(idle_worker_seconds=0.3))
    assert all_exited(pids, seconds=EXITED_WITHIN)
    values, fresh = _run(_iterator(idle_worker_seconds=0.3))
    assert values == list(range(12))
    assert not fresh & pids


@pytest.mark.parametrize("start_method", ["auto", "forkserver"])
def test_a_parked_worker_killed_meanwhile_is_replaced_with_no_error(start_method: str) -> None:
    # A fork server's child is reaped by the server, which reports its end later: the
    # group may still look alive when it is claimed; the worker's missing answer to its
    # plan tells.
    _, pids = _run(_iterator(start_method=start_method))
    os.kill(min(pids), signal.SIGKILL)
    assert all_exited({min(pids)}, seconds=EXITED_WITHIN)
    values, fresh = _run(_iterator(start_method=start_method))
    assert values == list(range(12))
    assert not fresh & pids
    assert all_exited(
        pids, seconds=EXITED_WITHIN
    )  # The survivor of the broken group was told to exit.


def test_a_group_that_lost_a_worker_mid_run_is_not_parked() -> None:
    it = _iterator(400)
    value, pid = next(it)
    assert value == 0
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(WorkerDiedError):
        list(it)
    it.close()
    assert stop_idle_workers() == 0


def test_an_error_in_a_transform_leaves_the_workers_fit_for_reuse() -> None:
    it = MultiprocessPrefetchIter(
        ChunkPlan(range(6), [(MapIter, (FailAt(3),), {})], chunk_size=2),
        MultiprocessingOptions(num_workers=2),
    )
    assert [next(it), next(it), next(it)] == [0, 1, 2]
    with pytest.raises(ValueError, match="element 3"):
        next(it)
    it.close()
    values, _ = _run(_iterator())
    assert values == list(range(12))
    assert stop_idle_workers() == 2


class FailAt:
    def __init__(self, bad: int) -> None:
        self.bad = bad

    def __call__(self, value: int) -> int:
        if value == self.bad:
            raise ValueError(f"element {value}")
        return value


def test_batches_held_from_the_last_iterator_are_never_written_over() -> None:
    """Leased slabs stay with the batches that hold them; the reused workers get others."""
    plan = ChunkPlan(range(8), [(MapIter, (FullArray(ROWS),), {})], chunk_size=2)
    options = MultiprocessingOptions(num_workers=2)
    held = list(MultiprocessPrefetchIter(plan, options))
    before = [array.copy() for array in held]
    shifted = ChunkPlan(range(100, 116), [(MapIter, (FullArray(ROWS),), {})], chunk_size=2)
    again = [int(array[0]) for array in MultiprocessPrefetchIter(shifted, options)]
    assert again == list(range(100, 116))
    for array, copy in zip(held, before, strict=True):
        np.testing.assert_array_equal(array, copy)


def test_resume_is_exact_across_reused_workers() -> None:
    def make(workers: int):
        def build() -> MultiprocessPrefetchIter:
            plan = ChunkPlan(range(9), [(MapIter, (square,), {})], chunk_size=2)
            return MultiprocessPrefetchIter(plan, MultiprocessingOptions(num_workers=workers))

        return build

    assert_resumes(
        make(2),
        make_restored=[make(0), make(1)],
        expected=[value * value for value in range(9)],
        every=2,
    )
    assert stop_idle_workers() == 3  # The 2-worker and the 1-worker groups.


@pytest.mark.parametrize("seconds", [-1, float("nan"), True, "3"])
def test_idle_worker_seconds_must_be_a_number_of_seconds(seconds: object) -> None:
    with pytest.raises(ValueError, match="idle_worker_seconds must be a number of seconds >= 0"):
        MultiprocessingOptions(num_workers=2, idle_worker_seconds=seconds)  # type: ignore[arg-type]


_CONSUMER = """
import sys
sys.path.insert(0, {tests!r})
from chute_execution import ChunkPlan, MultiprocessPrefetchIter, MultiprocessingOptions
from chute_transforms import MapIter
from test_idle_workers import with_pid

plan = ChunkPlan(range(8), [(MapIter, (with_pid,), {{}})], chunk_size=2)
options = MultiprocessingOptions(num_workers=2, idle_worker_seconds=3600)
print(sorted({{pid for _, pid in MultiprocessPrefetchIter(plan, options)}}), flush=True)
{end}
"""


@pytest.mark.parametrize(
    "end", ["", "import os; os._exit(0)", "import os, signal; os.kill(os.getpid(), 9)"]
)
def test_parked_workers_never_outlive_their_consumer(end: str) -> None:
    """Exited normally, skipping its exit hooks, or killed: its parked workers end.

    A normal exit also leaves nothing in the shared-memory folder (the slabs kept for
    the next iterator are the consumer's); the others leave those for the next chute
    process to reclaim.
    """
    script = _CONSUMER.format(tests=str(Path(__file__).parent), end=end)
    consumer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE, text=True
    )
    out, _ = consumer.communicate(timeout=120)
    pids = set(ast.literal_eval(out.splitlines()[0]))
    assert len(pids) == 2
    assert all_exited(pids, seconds=EXITED_WITHIN), "a parked worker outlived its consumer"
    if not end:
        owners = pids | {consumer.pid}
        leftover = [
            name
            for name in os.listdir(shm_dir())
            if name.startswith(SHM_PREFIX) and any(f"-{pid}-" in name for pid in owners)
        ]
        assert leftover == []


@pytest.mark.parametrize("spare_cores", [0, 1])
def test_workers_read_one_by_one_when_they_take_every_core(spare_cores: int) -> None:
    """ArrayRecord's own read pool only where a core is left (see `read_one_by_one`)."""
    cores = len(os.sched_getaffinity(0))
    workers = max(1, cores - spare_cores)
    plan = ChunkPlan(range(4), [(MapIter, (reads_one_by_one,), {})], chunk_size=1)
    options = MultiprocessingOptions(num_workers=workers)
    assert set(MultiprocessPrefetchIter(plan, options)) == {workers >= cores}
