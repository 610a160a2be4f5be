"""A worker sent SIGTERM frees its shared memory before it exits.

Jupyter shuts a kernel down (or restarts it) by terminating its whole process group,
workers included, often before the kernel's own clean-up has run.
"""

import multiprocessing
import os
import signal
import time

import numpy as np
import pytest

import chute
from chute_core import SharedMemoryError
from chute_core.internal import shm_dir
from chute_execution import MultiprocessingOptions, WorkerDiedError

SETTLE_SECONDS = 10.0  # A bound for terminated workers to exit, not a speed check.


def _image(x):
    return {"image": np.full((28, 28), x, np.int64)}


def _slabs_of(pids):
    folder = shm_dir()
    return sorted(n for n in os.listdir(folder) if n.startswith(tuple(f"chute-{p}-" for p in pids)))


def test_terminated_workers_leave_no_shared_memory():
    before = set(multiprocessing.active_children())
    ds = chute.MapDataset.range(600).to_iter_dataset().map(_image)
    it = iter(ds.mp_prefetch(MultiprocessingOptions(num_workers=2), chunk_size=16))
    assert next(it)["image"][0, 0] == 0
    workers = [p for p in multiprocessing.active_children() if p not in before]
    assert len(workers) == 2
    pids = [worker.pid for worker in workers]
    # Both at work, each with slabs (the second may still be starting at the first next()).
    deadline = time.monotonic() + SETTLE_SECONDS
    while not all(_slabs_of([pid]) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(_slabs_of([pid]) for pid in pids)
    for worker in workers:
        os.kill(worker.pid, signal.SIGTERM)
    for worker in workers:
        worker.join(SETTLE_SECONDS)
    assert [w.exitcode for w in workers] == [128 + signal.SIGTERM] * 2
    assert _slabs_of(pids) == []
    # After the chunks that arrived before the workers ended: the death, or a result
    # whose slab its worker freed as it exited.
    with pytest.raises((WorkerDiedError, SharedMemoryError), match="exited"):
        list(it)
