"""A worker sent SIGTERM frees its shared memory before it exits.

Jupyter shuts a kernel down (or restarts it) by terminating its whole process group,
workers included, often before the kernel's own clean-up has run.
"""

import multiprocessing
import os
import signal
import uuid
from pathlib import Path

import numpy as np
import pytest

import chute
from chute_execution import MultiprocessingOptions, WorkerDiedError

SETTLE_SECONDS = 10.0  # A bound for terminated workers to exit, not a speed check.


def _image(x):
    return {"image": np.full((28, 28), x, np.int64)}


def test_terminated_workers_leave_no_shared_memory(monkeypatch):
    folder = Path("/dev/shm" if os.path.isdir("/dev/shm") else "/tmp") / f"chute-{uuid.uuid4().hex}"
    folder.mkdir()
    monkeypatch.setenv("CHUTE_SHM_DIR", str(folder))
    try:
        before = set(multiprocessing.active_children())
        ds = chute.MapDataset.range(600).to_iter_dataset().map(_image)
        it = iter(ds.mp_prefetch(MultiprocessingOptions(num_workers=2), chunk_size=16))
        assert next(it)["image"][0, 0] == 0
        workers = [p for p in multiprocessing.active_children() if p not in before]
        assert len(workers) == 2
        assert os.listdir(folder)  # Their slabs.
        for worker in workers:
            os.kill(worker.pid, signal.SIGTERM)
        for worker in workers:
            worker.join(SETTLE_SECONDS)
        assert [w.exitcode for w in workers] == [128 + signal.SIGTERM] * 2
        assert sorted(os.listdir(folder)) == []
        with pytest.raises(WorkerDiedError, match=r"exited with code 143"):
            list(it)  # After the chunks that arrived before the workers ended.
    finally:
        for name in os.listdir(folder):
            os.unlink(folder / name)
        folder.rmdir()
