"""Worker processes under faults: Ctrl-C, a killed parent, a long run, a stuck worker.

Promise 4 (DESIGN.md): nothing leaks, nothing hangs. Each test bounds its outcome
with a generous time limit (never a speed check) and checks `/dev/shm` for segments
of the processes involved (`chute-<pid>-...`), so that segments of other tests or
programs never count. The Ctrl-C and killed-parent tests run the consumer in a
subprocess, which is signalled from here.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable

import pytest

import chute
from chute_execution import MultiprocessingOptions
from chute_execution._transport_writer import DEFAULT_SLAB_SIZE
from chute_execution.testing import FullArray, SleepAt
from chute_sources import ChuteError
from chute_sources._shm import SHM_PREFIX, reclaim_orphaned_segments, shm_dir

BOUND = 10.0  # Seconds within which each outcome must happen; generous, not a speed check.
STARTUP = 60.0  # Seconds a subprocess may take to import chute and start its workers.


# --- helpers ------------------------------------------------------------------------


def _wait_until(condition: Callable[[], bool], seconds: float = BOUND) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _segments(pids: Iterable[int]) -> dict[str, int]:
    """The chute segments in /dev/shm owned by `pids`, with their sizes in bytes."""
    owners = {str(pid) for pid in pids}
    found: dict[str, int] = {}
    folder = shm_dir()
    for name in os.listdir(folder):
        if name.startswith(SHM_PREFIX) and name[len(SHM_PREFIX) :].split("-")[0] in owners:
            try:
                found[name] = os.stat(folder / name).st_size
            except FileNotFoundError:
                pass  # Unlinked meanwhile.
    return found


def _children() -> set[int]:
    return {p.pid for p in multiprocessing.active_children() if p.pid is not None}


def _rss() -> int:
    """This process's resident memory in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _kill_survivors(pids: Iterable[int]) -> None:
    """Clean-up after a failed test: SIGKILLs what still runs of `pids`."""
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _report(test: str, **figures: object) -> None:
    """Prints measured figures (shown with `pytest -s`)."""
    print(f"\n[{test}] " + ", ".join(f"{k}={v}" for k, v in figures.items()))


_PRELUDE = """
import json, multiprocessing, os, signal, sys, threading, time
from multiprocessing import forkserver
import chute
from chute_execution.testing import FullArray, SleepAt

def announce():
    print(json.dumps({
        "pid": os.getpid(),
        "workers": [p.pid for p in multiprocessing.active_children()],
        "forkserver": getattr(forkserver._forkserver, "_forkserver_pid", None),
    }), flush=True)
"""

_ITERATE = """
ds = (
    chute.MapDataset.range(1_000_000)
    .to_iter_dataset()
    .map(SleepAt({stuck_at}, seconds=3600))
    .map(FullArray({size}))
    .mp_prefetch(chute.MultiprocessingOptions(num_workers=2), chunk_size={chunk})
)
it = iter(ds)
next(it)
announce()
for _ in it:
    time.sleep({pause})
"""


class _Consumer:
    """A subprocess running `script` after `_PRELUDE`; it calls `announce()` once its
    workers run, which prints its pid, its workers' pids and its fork server's."""

    def __init__(self, script: str, new_session: bool = False) -> None:
        self._pending = b""
        self.process = subprocess.Popen(
            [sys.executable, "-c", _PRELUDE + script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=new_session,
        )
        info = json.loads(self.line())
        self.pid: int = info["pid"]
        self.workers: list[int] = info["workers"]
        self.forkserver: int | None = info["forkserver"]
        assert self.pid == self.process.pid
        assert len(self.workers) == 2, info

    @classmethod
    def iterating(
        cls, size: int, chunk: int, pause: float, stuck_at: int = -1, new_session: bool = False
    ) -> _Consumer:
        """Iterates `FullArray(size)` elements slowly; element `stuck_at` never comes."""
        script = _ITERATE.format(size=size, chunk=chunk, pause=pause, stuck_at=stuck_at)
        return cls(script, new_session)

    @property
    def processes(self) -> list[int]:
        """The workers and the fork server: what must not outlive the consumer."""
        return [*self.workers, *([self.forkserver] if self.forkserver else [])]

    def line(self) -> str:
        """The next line the subprocess prints (it has STARTUP seconds)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + STARTUP
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            data = os.read(fd, 4096) if ready else b""
            if not data:
                self.process.kill()
                _, err = self.process.communicate(timeout=BOUND)
                raise AssertionError(f"the consumer printed no line; stderr:\n{err.decode()}")
            self._pending += data
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode()

    def wait_for_segments(self, per_worker: int = 1) -> dict[str, int]:
        """Waits until every worker holds `per_worker` segments (its results in flight)."""

        def held() -> bool:
            names = _segments(self.workers)
            return all(
                sum(name.startswith(f"{SHM_PREFIX}{pid}-") for name in names) >= per_worker
                for pid in self.workers
            )

        assert _wait_until(held), f"the workers made no shared memory: {_segments(self.workers)}"
        return _segments(self.workers)

    def output_after_exit(self) -> tuple[str, str]:
        """What the subprocess printed after its first line, and its stderr."""
        out, err = self.process.communicate(timeout=BOUND)
        return (self._pending + out).decode(errors="replace"), err.decode(errors="replace")

    def kill(self) -> None:
        """Clean-up: the subprocess, its session if it has one, and its workers."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(BOUND)
        survivors = [pid for pid in self.processes if _alive(pid)]
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
        if survivors:  # Their slabs are orphans now: reclaim them once they are reaped.
            _wait_until(lambda: not any(map(_alive, survivors)))
            _wait_until(lambda: not (reclaim_orphaned_segments() or _segments(survivors)))
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


# --- 1. Ctrl-C -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "where"),
    [
        ("process", "in the loop body"),
        ("process group", "in the loop body"),
        ("process", "waiting for a stuck worker"),
    ],
)
def test_ctrl_c_exits_with_keyboard_interrupt_and_leaves_nothing(target, where):
    # "process": SIGINT to the consumer only. "process group": what a terminal's Ctrl-C
    # does, SIGINT to the consumer, its fork server and its workers at once. The
    # consumer is either sleeping in its loop body (workers ahead, slabs in flight) or
    # blocked in next() on element 9, which worker 0 (chunk 2) never finishes.
    stuck = where == "waiting for a stuck worker"
    consumer = _Consumer.iterating(
        size=2**15,
        chunk=4,
        pause=0.05,
        stuck_at=9 if stuck else -1,
        new_session=target == "process group",
    )
    try:
        held = consumer.wait_for_segments()
        if stuck:
            time.sleep(1.0)  # Elements 0-7 take 0.4 s; then next() waits for element 9.
        start = time.monotonic()
        if target == "process":
            os.kill(consumer.pid, signal.SIGINT)
        else:
            os.killpg(consumer.pid, signal.SIGINT)
        code = consumer.process.wait(BOUND)
        exit_seconds = time.monotonic() - start
        _, stderr = consumer.output_after_exit()
        # Python exits with the SIGINT status on an uncaught KeyboardInterrupt, after
        # printing one traceback; nothing may fail while shutting down.
        assert code == -signal.SIGINT, f"exit code {code}; stderr:\n{stderr}"
        assert stderr.rstrip().endswith("KeyboardInterrupt"), stderr
        assert stderr.count("Traceback") == 1 and "Exception ignored" not in stderr, stderr

        assert _wait_until(lambda: not any(map(_alive, consumer.processes))), [
            pid for pid in consumer.processes if _alive(pid)
        ]
        gone_seconds = time.monotonic() - start
        left = _segments([consumer.pid, *consumer.workers])
        assert left == {}, f"left in /dev/shm after Ctrl-C: {sorted(left)}"
        _report(
            f"ctrl-c to the {target}, {where}",
            segments_held_before=len(held),
            exit_s=f"{exit_seconds:.2f}",
            processes_gone_s=f"{gone_seconds:.2f}",
            leftovers=len(left),
        )
    finally:
        consumer.kill()


_CATCH_CTRL_C = """
ds = (
    chute.MapDataset.range(100)
    .to_iter_dataset()
    .map(SleepAt(25, seconds=2.0))
    .map(FullArray(1024))
    .mp_prefetch(chute.MultiprocessingOptions(num_workers=2), chunk_size=10)
)
it = iter(ds)
got = [int(next(it)[0]) for _ in range(20)]
announce()
state = it.get_state()
# Element 25 takes worker 0 two seconds: next() is waiting for it when Ctrl-C comes.
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    got.append(int(next(it)[0]))
    interrupted = False
except KeyboardInterrupt:
    interrupted = True
same_state = it.get_state() == state
got.extend(int(array[0]) for array in it)
print(json.dumps({"interrupted": interrupted, "same_state": same_state, "got": got}))
"""


def test_iteration_continues_exactly_after_a_caught_ctrl_c():
    # As in a notebook: Ctrl-C interrupts next() while it waits for a worker, the user
    # catches KeyboardInterrupt (or the kernel does) and goes on with the same iterator.
    # The interrupted next() yielded nothing, so the stream must go on unchanged.
    consumer = _Consumer(_CATCH_CTRL_C)
    try:
        code = consumer.process.wait(BOUND)
        out, stderr = consumer.output_after_exit()
        assert code == 0, f"exit code {code}; stderr:\n{stderr}"
        result = json.loads(out)
        assert result["interrupted"], "Ctrl-C came too late to interrupt next()"
        assert result["same_state"]
        assert result["got"] == list(range(100))
        assert _wait_until(lambda: not any(map(_alive, consumer.processes)))
        assert _segments([consumer.pid, *consumer.workers]) == {}
    finally:
        consumer.kill()


# --- 2. the parent killed ------------------------------------------------------------


@pytest.mark.parametrize("workers", ["waiting for the consumer", "one stuck in user code"])
def test_a_killed_parent_lets_its_workers_exit_and_leaves_no_shared_memory(workers):
    # 8 MiB elements, two per chunk: each worker fills its slabs and waits for the
    # consumer to release one, which it never will (the consumer sleeps, then dies).
    # Or worker 0 is inside the user's function (element 4, chunk 2) for an hour; it
    # holds the slab of chunk 0 meanwhile.
    stuck_at = 4 if workers == "one stuck in user code" else -1
    consumer = _Consumer.iterating(size=2**20, chunk=2, pause=30.0, stuck_at=stuck_at)
    try:
        held = consumer.wait_for_segments()
        held_bytes = sum(held.values())
        start = time.monotonic()
        os.kill(consumer.pid, signal.SIGKILL)
        assert consumer.process.wait(BOUND) == -signal.SIGKILL
        assert _wait_until(lambda: not any(map(_alive, consumer.processes))), (
            f"still running {BOUND} s after the parent was killed: workers "
            f"{[pid for pid in consumer.workers if _alive(pid)]} of {consumer.workers}, "
            f"fork server {consumer.forkserver if _alive(consumer.forkserver or 0) else None}"
        )
        gone_seconds = time.monotonic() - start
        owners = [consumer.pid, *consumer.workers]
        left_by_workers = _segments(owners)  # Each worker unlinks its slabs as it exits.
        # A segment is reclaimable once its owner is reaped (a zombie still has a start
        # time); the orphans are reaped by init, so give that a moment.
        _wait_until(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in consumer.workers))
        reclaimed = reclaim_orphaned_segments()  # What the next chute process does.
        left = _segments(owners)
        assert left == {}, f"left in /dev/shm after the parent was killed: {sorted(left)}"
        _report(
            f"parent SIGKILLed, workers {workers}",
            segments_held=len(held),
            MiB_held=held_bytes // 2**20,
            workers_gone_s=f"{gone_seconds:.2f}",
            left_before_reclaim=len(left_by_workers),
            reclaimed_of_these=len([n for n in reclaimed if n in left_by_workers]),
            leftovers=len(left),
        )
    finally:
        consumer.kill()


# --- 3. a long run -------------------------------------------------------------------


def test_memory_stays_bounded_over_a_long_run():
    workers, buffer_size = 2, 2
    element = 2**15  # int64: 256 KiB per element.
    batch, chunk, num_batches, warm_up = 4, 8, 200, 20  # 1 MiB batches, 2 MiB chunks.
    ds = (
        chute.MapDataset.range(batch * num_batches)
        .to_iter_dataset()
        .map(FullArray(element))
        .mp_prefetch(MultiprocessingOptions(workers, buffer_size), chunk_size=chunk)
        .batch(batch)
    )
    before = _children()
    it = iter(ds)
    first = next(it)
    pids = _children() - before
    assert len(pids) == workers

    most_per_worker, most_bytes, largest = 0, 0, 0
    rss_base = rss_peak = 0
    count = 1
    assert first.shape == (batch, element) and int(first[-1, 0]) == batch - 1
    for index, array in enumerate(it, start=1):
        assert int(array[0, 0]) == index * batch and int(array[-1, -1]) == index * batch + 3
        count += 1
        segments = _segments(pids)
        for pid in pids:
            mine = [n for n in segments if n.startswith(f"{SHM_PREFIX}{pid}-")]
            most_per_worker = max(most_per_worker, len(mine))
        most_bytes = max(most_bytes, sum(segments.values()))
        largest = max([largest, *segments.values()])
        del array
        if index == warm_up:
            rss_base = rss_peak = _rss()
        elif index > warm_up:
            rss_peak = max(rss_peak, _rss())
    assert count == num_batches

    # Each worker has per_worker_buffer_size + 1 slabs at most, plus one per chunk whose
    # batches (views into its slab) this process still holds: `first`'s and the current
    # one's. A 2 MiB chunk fits the initial slab, so none grows.
    slab_bound = max(DEFAULT_SLAB_SIZE, 2 * chunk * element * 8)
    held = 2
    assert most_per_worker <= buffer_size + 1 + held
    assert largest <= slab_bound
    assert most_bytes <= (workers * (buffer_size + 1) + held) * slab_bound
    # After warm-up the consumer's memory stays flat: keeping every batch would add
    # ~160 MiB (measured); mapping slabs made late and allocator noise stay far below
    # 48 MiB.
    growth = rss_peak - rss_base
    assert growth <= 48 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB after warm-up"
    assert _wait_until(lambda: not any(map(_alive, pids)))  # Exhaustion stops the workers.
    assert _wait_until(lambda: not _segments(pids)), sorted(_segments(pids))
    _report(
        "long run",
        batches=count,
        MiB_through=count * batch * element * 8 // 2**20,
        max_slabs_per_worker=most_per_worker,
        max_shm_MiB=f"{most_bytes / 2**20:.1f}",
        largest_slab_MiB=f"{largest / 2**20:.1f}",
        rss_after_warm_up_MiB=f"{rss_base / 2**20:.1f}",
        rss_growth_MiB=f"{growth / 2**20:.1f}",
        leftovers=len(_segments(pids)),
    )


# --- 4. a stuck worker ---------------------------------------------------------------


def _stuck_pipeline() -> chute.IterDataset:
    # Element 25 (chunk 2, so worker 0) sleeps for an hour: a stuck worker.
    return (
        chute.MapDataset.range(40)
        .to_iter_dataset()
        .map(SleepAt(25, seconds=3600))
        .map(FullArray(1024))
        .mp_prefetch(MultiprocessingOptions(num_workers=2), chunk_size=10)
    )


def test_close_from_another_thread_stops_a_stuck_worker_and_wakes_the_consumer():
    before = _children()
    it = iter(_stuck_pipeline())
    got: list[int] = []
    outcome: dict[str, BaseException | str] = {}

    def consume() -> None:
        try:
            for array in it:
                got.append(int(array[0]))
            outcome["end"] = "exhausted"
        except BaseException as error:
            outcome["error"] = error

    consumer = threading.Thread(target=consume, name="fault-test-consumer", daemon=True)
    consumer.start()
    assert _wait_until(lambda: len(got) == 20 or not consumer.is_alive(), STARTUP), outcome
    pids = _children() - before
    try:
        assert len(pids) == 2
        # What happens today: there is no timeout option, so the consumer just waits.
        consumer.join(1.5)
        assert consumer.is_alive() and got == list(range(20)) and not outcome

        closed: dict[str, BaseException | None] = {}

        def close() -> None:
            try:
                it.close()
                closed["error"] = None
            except BaseException as error:
                closed["error"] = error

        start = time.monotonic()
        closer = threading.Thread(target=close, name="fault-test-closer", daemon=True)
        closer.start()
        closer.join(BOUND)
        consumer.join(max(0.0, BOUND - (time.monotonic() - start)))
        assert not closer.is_alive(), "close() hangs"
        assert not consumer.is_alive(), "the consumer still waits after close()"
        woke_seconds = time.monotonic() - start
        assert _wait_until(lambda: not any(map(_alive, pids))), [p for p in pids if _alive(p)]
        gone_seconds = time.monotonic() - start
        assert closed == {"error": None}, f"close() raised {closed['error']!r}"
        # The waiting next() raises a clear chute error (today: WorkerDiedError, the worker
        # "was killed by SIGTERM"), never an unrelated one from the concurrent clean-up.
        error = outcome.get("error")
        assert isinstance(error, ChuteError), f"the consumer ended with {outcome!r}"
        assert _wait_until(lambda: not _segments(pids)), sorted(_segments(pids))
        _report(
            "stuck worker, close() from another thread",
            consumer_woke_s=f"{woke_seconds:.2f}",
            workers_gone_s=f"{gone_seconds:.2f}",
            consumer_error=f"{type(error).__name__}: {error}",
            leftovers=len(_segments(pids)),
        )
    finally:
        _kill_survivors(pids)


def test_dropping_the_iterator_stops_a_worker_stuck_ahead_of_the_consumer():
    # The consumer has read chunks 0 and 1; worker 0 is stuck on chunk 2, prefetched.
    # (An iterator that another thread is inside `next` of cannot be dropped: that
    # thread holds it. Use close() then, as above.)
    before = _children()
    found: dict[str, object] = {}

    def use_and_drop() -> None:
        it = iter(_stuck_pipeline())
        found["got"] = [int(next(it)[0]) for _ in range(20)]
        found["pids"] = _children() - before
        time.sleep(0.5)  # Worker 0 is now well inside element 25.
        start = time.monotonic()
        del it
        gc.collect()
        found["drop_s"] = time.monotonic() - start

    user = threading.Thread(target=use_and_drop, name="fault-test-user", daemon=True)
    user.start()
    user.join(STARTUP)
    pids = found.get("pids", set())
    assert isinstance(pids, set)
    try:
        assert not user.is_alive(), "dropping the iterator hangs"
        assert found.get("got") == list(range(20)), found
        assert len(pids) == 2
        assert _wait_until(lambda: not any(map(_alive, pids))), [p for p in pids if _alive(p)]
        assert _wait_until(lambda: not _segments(pids)), sorted(_segments(pids))
        _report(
            "stuck worker, iterator dropped",
            drop_s=f"{found['drop_s']:.2f}",
            leftovers=len(_segments(pids)),
        )
    finally:
        _kill_survivors(pids)
