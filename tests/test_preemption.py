"""Preemption: a training script killed with SIGKILL at random moments loses no record.

`preemption_trainer.py` logs every batch it trains on and checkpoints every k steps;
this test kills it at seeded random moments and restarts it until it finishes the
epoch. Then, for every step, all the runs that trained it got the same batch; the
steps are exactly those of an uninterrupted run, in order, with the same batches; each
restart replays only the steps since the last checkpoint; and no shared memory of
the killed processes (or their workers) is left in /dev/shm.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chute_core.internal import SHM_PREFIX, reclaim_orphaned_segments, shm_dir

TRAINER = Path(__file__).with_name("preemption_trainer.py")
STARTUP = 120.0  # Seconds a run may take to start and train one step (generous, not a check).
MAX_KILLS = 4


def _trainer():
    spec = importlib.util.spec_from_file_location("preemption_trainer", TRAINER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _segments(pids) -> list[str]:
    owners = {str(pid) for pid in pids}
    return [
        name
        for name in os.listdir(shm_dir())
        if name.startswith(SHM_PREFIX) and name[len(SHM_PREFIX) :].split("-")[0] in owners
    ]


def _read_line(process: subprocess.Popen[str], seconds: float) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], seconds)
    assert ready, f"no output from the trainer within {seconds} s"
    return process.stdout.readline()


def _run_until_done(folder: Path, variant: str, save_every: int, seed: int):
    """Runs the trainer, killing it at random moments; returns the runs' announcements."""
    rng = random.Random(seed)
    runs, pids = [], []
    for run in range(MAX_KILLS + 1):
        process = subprocess.Popen(
            [sys.executable, str(TRAINER), str(folder), variant, str(save_every), str(run)],
            stdout=subprocess.PIPE,
            text=True,
        )
        pids.append(process.pid)
        try:
            line = _read_line(process, STARTUP)
            if line.strip() == "done":
                runs.append({"killed": False, "resumed_from": None, "workers": []})
                break
            announced = json.loads(line)
            pids.extend(announced["workers"])
            if run == MAX_KILLS:  # Let the last run finish.
                assert process.wait(STARTUP) == 0
                runs.append({"killed": False, **announced})
                break
            time.sleep(rng.uniform(0.05, 0.35))
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
            code = process.wait(STARTUP)
            assert code in (0, -signal.SIGKILL)  # 0: it finished just before the kill.
            killed = code == -signal.SIGKILL
            runs.append({"killed": killed, **announced})
            if not killed:
                break
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
    return runs, pids


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variant", "seed"), [("plain", 0), ("plain", 1), ("workers", 2), ("orbax", 3)]
)
def test_sigkilled_training_resumes_without_losing_or_reordering_records(tmp_path, variant, seed):
    save_every = 5
    runs, pids = _run_until_done(tmp_path, variant, save_every, seed)
    assert sum(run["killed"] for run in runs) >= 1, "the trainer was never killed"

    trained: dict[int, list[str]] = {}
    first_steps = []
    log = (tmp_path / "records.log").read_text()
    lines = log.split("\n")[:-1]  # A line cut by the kill has no newline: drop it.
    previous = 0
    for line in lines:
        step_text, batch = line.split(" ", 1)
        step = int(step_text)
        if step <= previous:  # A restart: it replays from its checkpoint.
            first_steps.append((previous, step))
        trained.setdefault(step, []).append(batch)
        previous = step
    for step, batches in trained.items():
        assert len(set(batches)) == 1, f"step {step} got different batches across restarts"

    expected = [json.dumps(b.tolist()) for b in _trainer().dataset("plain")]
    assert sorted(trained) == list(range(1, len(expected) + 1))
    assert [trained[step][0] for step in sorted(trained)] == expected

    # Each restart resumes at a checkpoint: a multiple of save_every, at most one save
    # (two for asynchronous Orbax saves in flight) behind the last step trained.
    slack = 2 * save_every if variant == "orbax" else save_every
    for last_trained, resumed_at in first_steps:
        assert (resumed_at - 1) % save_every == 0
        assert 0 <= last_trained - (resumed_at - 1) <= slack

    print(
        f"\n[{variant}, seed {seed}] kills: {sum(r['killed'] for r in runs)}, "
        f"(last step trained, resumed at): {first_steps}"
    )
    deadline = time.monotonic() + 30
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_alive, pids)), "a worker outlived its killed trainer"
    reclaim_orphaned_segments()
    assert _segments(pids) == []
