"""The consumer SIGKILLed while its workers hold shared memory: nothing lingers.

The consumer runs in a subprocess (`consumer_process.Consumer`) and is killed from here
at a place the seed chooses: the array size, the chunk size, how many elements it has
read, and (for the stuck variant) which element a worker is stuck on for an hour. Its
workers must exit by themselves within `BOUND` seconds and unlink their slabs as they
go, so that nothing is left even before another chute process starts (one that does
would reclaim the segments of dead processes: `test_transport.py`).
"""

from __future__ import annotations

import importlib.util
import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "consumer_process", Path(__file__).with_name("consumer_process.py")
)
assert _spec is not None and _spec.loader is not None
cp = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("consumer_process", cp)
_spec.loader.exec_module(cp)

BOUND = cp.BOUND
SEEDS = [0, 1, 2]

_KILLED = """
ds = (
    chute.MapDataset.range(1_000_000)
    .to_iter_dataset()
    .map(SleepAt({stuck_at}, seconds=3600))
    .map(FullArray({size}))
    .mp_prefetch(chute.MultiprocessingOptions(num_workers=2), chunk_size={chunk})
)
it = iter(ds)
for _ in range({read}):
    next(it)
announce()
{then}
"""


def _place(seed: int, workers: str) -> dict[str, int | str]:
    """Where the parent dies: after `read` elements of `size` int64s, in chunks of
    `chunk`; asleep in its loop body (the workers fill their slabs and wait for it), or
    iterating on until `next()` blocks on element `stuck_at`, which worker
    `stuck_at // chunk % 2` sleeps on (after both workers made a slab: from chunk 2 on)."""
    rng = random.Random(seed)
    size = rng.choice([2**17, 2**19, 2**20])  # 1, 4 or 8 MiB.
    chunk = rng.choice([1, 2, 3])
    read = rng.randrange(1, 3 * chunk + 1)
    place: dict[str, int | str] = {
        "size": size,
        "chunk": chunk,
        "read": read,
        "stuck_at": -1,
        "then": "time.sleep(3600)",
    }
    if workers == "one stuck in user code":
        place["stuck_at"] = max(read, 2 * chunk) + rng.randrange(2 * chunk)
        place["then"] = "for _ in it:\n    pass"
    return place


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("workers", ["waiting for the consumer", "one stuck in user code"])
def test_a_killed_parent_lets_its_workers_exit_and_unlink_their_shared_memory(workers, seed):
    place = _place(seed, workers)
    consumer = cp.Consumer(_KILLED.format(**place))
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
        # Each worker unlinks its slabs before it exits: nothing is left for the next
        # chute process to reclaim (and the dead cannot make more).
        left = cp.segments(owners)
        assert left == {}, f"left in /dev/shm after the parent was killed: {sorted(left)}"
        cp.report(
            f"parent SIGKILLed, workers {workers}, seed {seed}",
            read=place["read"],
            stuck_at=place["stuck_at"],
            segments_held=len(held),
            MiB_held=held_bytes // 2**20,
            workers_gone_s=f"{gone_seconds:.2f}",
            leftovers=len(left),
        )
    finally:
        consumer.kill()
