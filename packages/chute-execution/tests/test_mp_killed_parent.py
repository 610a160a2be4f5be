"""The consumer SIGKILLed while its workers hold shared memory.

The consumer runs in a subprocess (`consumer_process.Consumer`) and is killed from here.
Its workers must exit by themselves within `BOUND` seconds; their segments are unlinked
as they exit or reclaimed by the next chute process.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from chute_sources._shm import reclaim_orphaned_segments

_spec = importlib.util.spec_from_file_location(
    "consumer_process", Path(__file__).with_name("consumer_process.py")
)
assert _spec is not None and _spec.loader is not None
cp = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("consumer_process", cp)
_spec.loader.exec_module(cp)

BOUND = cp.BOUND


@pytest.mark.parametrize("workers", ["waiting for the consumer", "one stuck in user code"])
def test_a_killed_parent_lets_its_workers_exit_and_leaves_no_shared_memory(workers):
    # 8 MiB elements, two per chunk: each worker fills its slabs and waits for the
    # consumer to release one, which it never will (the consumer sleeps, then dies).
    # Or worker 0 is inside the user's function (element 4, chunk 2) for an hour; it
    # holds the slab of chunk 0 meanwhile.
    stuck_at = 4 if workers == "one stuck in user code" else -1
    consumer = cp.Consumer.iterating(size=2**20, chunk=2, pause=30.0, stuck_at=stuck_at)
    try:
        held = consumer.wait_for_segments()
        held_bytes = sum(held.values())
        start = time.monotonic()
        os.kill(consumer.pid, signal.SIGKILL)
        assert consumer.process.wait(BOUND) == -signal.SIGKILL
        assert cp.wait_until(lambda: not any(map(cp.alive, consumer.processes))), (
            f"still running {BOUND} s after the parent was killed: workers "
            f"{[pid for pid in consumer.workers if cp.alive(pid)]} of {consumer.workers}, "
            f"fork server {consumer.forkserver if cp.alive(consumer.forkserver or 0) else None}"
        )
        gone_seconds = time.monotonic() - start
        owners = [consumer.pid, *consumer.workers]
        left_by_workers = cp.segments(owners)  # Each worker unlinks its slabs as it exits.
        # A segment is reclaimable once its owner is reaped (a zombie still has a start
        # time); the orphans are reaped by init, so give that a moment.
        cp.wait_until(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in consumer.workers))
        reclaimed = reclaim_orphaned_segments()  # What the next chute process does.
        left = cp.segments(owners)
        assert left == {}, f"left in /dev/shm after the parent was killed: {sorted(left)}"
        cp.report(
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
