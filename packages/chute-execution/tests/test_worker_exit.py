"""How a worker process ends: at once when asked to stop, reclaiming only after a lost consumer.

A worker whose consumer went without a word (killed) waits for it to be gone and
reclaims what it kept (`_worker._reclaim_after_consumer`). A worker the consumer asked
to stop must not: its consumer lives, and closes the connection as soon as the worker
confirms, so a closed connection alone does not tell a lost consumer. It once did, and
every worker of a stopped pool lingered a second waiting for a consumer that was not
going away (a fault scenario saw "the other worker still runs").

The other side, a killed consumer whose workers reclaim what it kept, is
`test_slab_pool.py::test_the_workers_of_a_killed_consumer_reclaim_the_slabs_it_kept`.

The workers are forked ("auto" forks here) from this process, patched: the check for a
lost consumer is delayed (so the consumer has closed the connection by then, as it may
always have), and a reclaim writes a file naming the worker.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from chute_execution import ChunkPlan, MultiprocessingOptions, MultiprocessPrefetchIter
from chute_execution import _worker as worker_module
from chute_testing.execution import all_exited
from chute_transforms import MapIter


def with_pid(value: int) -> tuple[int, int]:
    return value, os.getpid()


@pytest.fixture(name="reclaims")
def _reclaims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder where each forked worker that reclaims after its consumer leaves a file."""
    lost = worker_module._consumer_lost

    def late_lost(connection):  # type: ignore[no-untyped-def]
        time.sleep(0.3)  # The consumer has closed its end by now.
        return lost(connection)

    def reclaim(wait: float) -> None:
        (tmp_path / str(os.getpid())).write_text(str(wait))

    monkeypatch.setattr(worker_module, "_consumer_lost", late_lost)
    monkeypatch.setattr(worker_module, "_reclaim_after_consumer", reclaim)
    return tmp_path


@pytest.mark.parametrize("idle_worker_seconds", [0, 0.2], ids=["stopped", "parked, not taken"])
def test_a_worker_asked_to_stop_never_waits_to_reclaim_after_its_consumer(
    reclaims: Path, idle_worker_seconds: float
) -> None:
    plan = ChunkPlan(range(8), [(MapIter, (with_pid,), {})], chunk_size=2)
    options = MultiprocessingOptions(
        num_workers=2, start_method="auto", idle_worker_seconds=idle_worker_seconds
    )
    pairs = list(MultiprocessPrefetchIter(plan, options))
    pids = {pid for _, pid in pairs}
    assert [value for value, _ in pairs] == list(range(8))
    assert pids and os.getpid() not in pids
    assert all_exited(pids)
    assert sorted(path.name for path in reclaims.iterdir()) == []
