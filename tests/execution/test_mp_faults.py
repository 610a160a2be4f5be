"""Worker processes under faults: Ctrl-C, a long run, a stuck worker (a killed parent:
`test_mp_killed_parent.py`).

Promise 4 (DESIGN.md): nothing leaks, nothing hangs. Each test bounds its outcome
with a generous time limit (never a speed check) and checks `/dev/shm` for segments
of the processes involved (`chute-<pid>-...`), so that segments of other tests or
programs never count. The Ctrl-C and killed-parent tests run the consumer in a
subprocess, which is signalled from here.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

import chute
from chute_core import ChuteError
from chute_core.internal import SHM_PREFIX
from chute_execution import MultiprocessingOptions
from chute_execution.internal import DEFAULT_SLAB_SIZE
from chute_testing.execution import FullArray, SleepAt

_spec = importlib.util.spec_from_file_location(
    "consumer_process", Path(__file__).with_name("consumer_process.py")
)
assert _spec is not None and _spec.loader is not None
cp = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("consumer_process", cp)
_spec.loader.exec_module(cp)

BOUND, STARTUP = cp.BOUND, cp.STARTUP
_alive, _children, _segments, _wait_until = cp.alive, cp.children, cp.segments, cp.wait_until
_kill_survivors, _report, _rss, _Consumer = cp.kill_survivors, cp.report, cp.rss, cp.Consumer


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
    chute.stop_idle_workers()  # Those of earlier tests: this one's are counted at the end.
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
    assert chute.stop_idle_workers() == workers  # Exhaustion parked them for the next.
    assert _wait_until(lambda: not any(map(_alive, pids)))
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
