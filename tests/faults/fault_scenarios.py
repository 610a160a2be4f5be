"""Fault scenarios run through the public API; shared by `test_faults.py` and `measure_faults.py`.

Each `run_*` function builds a pipeline on two worker processes, injects one fault at a
place chosen by `seed`, iterates until the error (or the end) and returns an `Outcome`:
what was yielded, the exception, the seconds from the fault to the exception, and the
chute segments in `/dev/shm` left by the processes involved once everything is stopped.

Worker-side functions all come from importable modules (`chute_testing.execution`,
`chute.decode_record`): workers started by forkserver or spawn import them by name.

Fault-to-error time is measured as follows:
- a worker killed: from the moment its process stopped running (seen in `/proc`, polled
  every 2 ms by a thread of this process) to the exception;
- a worker that hangs, a corrupt record, a raising transform: from the last element the
  consumer received (when `next()` began to wait) to the exception;
- a truncated file: from the truncation (`os.truncate`) to the exception.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

import chute
from chute_core.internal import SHM_PREFIX, shm_dir
from chute_testing.execution import ANSWER_CTRL_C, FailAt, KillWorkerAt, KillWorkerOnSum, SleepAt

SETTLE = 10.0  # Seconds processes and segments get to go away: a bound, not a speed check.
BATCH = 4


@dataclasses.dataclass
class Outcome:
    """What one run of a scenario gave."""

    got: list[Any]
    error: BaseException | None
    seconds: float  # From the fault to the exception (see the module docstring).
    fault_at: int  # The element (or record) position where the fault was put.
    workers: list[int]
    leftovers: list[str]
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


# --- processes and shared memory ------------------------------------------------------


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def segments(pids: Iterable[int]) -> list[str]:
    """The chute segments in /dev/shm whose names say one of `pids` made them."""
    owners = {str(pid) for pid in pids}
    return sorted(
        name
        for name in os.listdir(shm_dir())
        if name.startswith(SHM_PREFIX) and name[len(SHM_PREFIX) :].split("-")[0] in owners
    )


def wait_until(condition: Callable[[], bool], seconds: float = SETTLE) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def children() -> set[int]:
    return {p.pid for p in multiprocessing.active_children() if p.pid is not None}


def workers_in_order(before: set[int]) -> list[int]:
    """The pids of the children started since `before`, worker 0 first.

    By the index in each worker's process name (`chute-worker-<i>`), not by pid: pids
    wrap around (a worker started later can have the smaller pid).
    """

    def index(process: multiprocessing.Process) -> tuple[int, int]:
        name = process.name or ""
        number = name.rsplit("-", 1)[-1]
        return (
            int(number) if name.startswith("chute-worker-") and number.isdigit() else 1 << 30,
            process.pid or 0,
        )

    started = [
        p for p in multiprocessing.active_children() if p.pid is not None and p.pid not in before
    ]
    return [p.pid for p in sorted(started, key=index) if p.pid is not None]


class DeathWatch:
    """A thread noting when the first of `pids` stops running (polls `/proc` every 2 ms)."""

    def __init__(self, pids: Iterable[int]) -> None:
        self.pids = list(pids)
        self.died_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="fault-death-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            if not all(map(alive, self.pids)):
                self.died_at = time.monotonic()
                return
            time.sleep(0.002)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _finish(
    it: Any,
    got: list[Any],
    before: set[int],
    fault_at: int,
    *,
    first: Callable[[], None] | None = None,
    watch_death: bool = False,
) -> Outcome:
    """Iterates `it` into `got` until it ends or raises; collects the outcome.

    `first` runs once the workers are up (after the first element): e.g. to truncate
    a file. Fault time: the death of a worker, or the last element received.
    """
    got.append(next(it))
    workers = workers_in_order(before)
    watch = DeathWatch(workers) if watch_death else None
    fault_time = time.monotonic()
    if first is not None:
        first()
        fault_time = time.monotonic()
    error: BaseException | None = None
    try:
        while True:
            try:
                element = next(it)
            except StopIteration:
                break
            got.append(element)
            if first is None:
                fault_time = time.monotonic()
    except Exception as caught:
        error = caught
    raised_at = time.monotonic()
    if watch is not None:
        watch.stop()
        if watch.died_at is not None:
            fault_time = watch.died_at
    # A dead or stuck worker stops the pool by itself; after an error in the data the
    # iterator stays usable (it can go on or be restored), so the workers run on until
    # the iterator is closed or dropped, as a user's program would.
    # A bound for "it stops", not a timing: under load, processes take a while to end.
    stopped_by_itself = wait_until(lambda: not any(map(alive, workers)), 10.0)
    state = _state(it)
    close = getattr(it, "close", None)
    if close is not None:
        close()
    del it
    gc.collect()
    # Workers that stopped cleanly wait, parked, for the next iterator: end them.
    chute.stop_idle_workers()
    stopped = wait_until(lambda: not any(map(alive, workers)))
    # The slabs of workers that stopped normally are kept for the next iterator until
    # the process exits or frees them (`chute.free_idle_slabs`): the check is then
    # that nothing else is left, and that they can be freed.
    chute.free_idle_slabs()
    owners = [os.getpid(), *workers]
    wait_until(lambda: not segments(owners))
    return Outcome(
        got=got,
        error=error,
        seconds=raised_at - fault_time,
        fault_at=fault_at,
        workers=workers,
        leftovers=segments(owners),
        extra={
            "stopped_by_itself": stopped_by_itself,
            "workers_stopped": stopped,
            "state": state,
        },
    )


def _state(it: Any) -> Any:
    try:
        return it.get_state()
    except Exception as error:
        return error


def options(timeout: float = 30.0) -> chute.MultiprocessingOptions:
    return chute.MultiprocessingOptions(num_workers=2, worker_timeout=timeout)


# --- 1. a worker killed by SIGKILL mid-batch --------------------------------------------


def killed_pipeline(batch: str, kill_at: int, length: int = 400) -> chute.IterDataset:
    """`range(length)` in batches of 4; the worker producing element (or batch) `kill_at`
    SIGKILLs itself. `batch`: "before" mp_prefetch (workers make whole batches) or
    "after" (workers make elements, the consumer batches them)."""
    if batch == "before":
        total = sum(range(kill_at * BATCH, (kill_at + 1) * BATCH))  # Unique per batch.
        return (
            chute.MapDataset.range(length)
            .batch(BATCH)
            .to_iter_dataset()
            .map(KillWorkerOnSum(total if kill_at >= 0 else -1))
            .mp_prefetch(options(), chunk_size=2)
        )
    return (
        chute.MapDataset.range(length)
        .to_iter_dataset()
        .map(KillWorkerAt(kill_at))
        .mp_prefetch(options(), chunk_size=8)
        .batch(BATCH)
    )


def run_worker_killed(seed: int, batch: str) -> Outcome:
    """Scenario 1: the worker making batch `fault_at` (or element, batch "after") dies."""
    rng = random.Random(seed)
    kill_at = rng.randrange(10, 90) if batch == "before" else rng.randrange(40, 360)
    before = children()
    it = iter(killed_pipeline(batch, kill_at))
    return _finish(it, [], before, kill_at, watch_death=True)


# --- 2. a worker that hangs -----------------------------------------------------------


def run_worker_hangs(seed: int, timeout: float = 2.0) -> Outcome:
    """Scenario 2: element `fault_at` sleeps for an hour, with `worker_timeout=timeout`."""
    hang_at = random.Random(seed).randrange(40, 360)
    ds = (
        chute.MapDataset.range(400)
        .to_iter_dataset()
        .map(SleepAt(hang_at, seconds=3600))
        .mp_prefetch(options(timeout), chunk_size=8)
    )
    before = children()
    return _finish(iter(ds), [], before, hang_at)


# --- 3. a data file truncated mid-epoch ---------------------------------------------


NUM_RECORDS = 2000


def record(i: int) -> dict[str, Any]:
    """Record `i` of the test files: incompressible, so that the file is long."""
    values = np.random.default_rng(i).integers(0, 2**31, 64, dtype=np.int64)
    return {"i": i, "x": values}


def is_record(element: Any, i: int) -> bool:
    return (
        isinstance(element, dict)
        and element.get("i") == i
        and np.array_equal(element.get("x"), record(i)["x"])
    )


def run_truncated_file(seed: int, folder: str, decode: Any = "auto") -> Outcome:
    """Scenario 3: after `fault_at` elements, the file is cut to a seeded fraction."""
    rng = random.Random(seed)
    (path,) = chute.write_array_record(
        (record(i) for i in range(NUM_RECORDS)), os.path.join(folder, f"cut-{seed}")
    )
    size = os.path.getsize(path)
    keep = rng.uniform(0.3, 0.7)
    read_first = rng.randrange(50, 150)
    source = chute.ArrayRecordSource(path, decode=decode)
    ds = chute.MapDataset.source(source).to_iter_dataset().mp_prefetch(options(), chunk_size=16)
    before = children()
    it = iter(ds)
    got = [next(it) for _ in range(read_first - 1)]

    def cut() -> None:
        os.truncate(path, int(size * keep))

    outcome = _finish(it, got, before, read_first, first=cut)
    outcome.extra["path"] = path
    outcome.extra["bad"] = [k for k, element in enumerate(outcome.got) if not is_record(element, k)]
    return outcome


# --- 4. one record that fails to decode ---------------------------------------------


def run_corrupt_record(seed: int, folder: str) -> Outcome:
    """Scenario 4: record `fault_at` of 200 is junk behind the codec's magic bytes."""
    rng = random.Random(seed)
    bad = rng.randrange(20, 180)
    records = [chute.encode_record(record(i)) for i in range(200)]
    junk = bytearray(records[bad])
    junk[8:24] = rng.randbytes(16)  # The header length and the start of the header.
    records[bad] = bytes(junk)
    (path,) = chute.write_array_record(records, os.path.join(folder, f"bad-{seed}"), encode=False)
    ds = (
        chute.MapDataset.source(chute.ArrayRecordSource(path, decode=False))
        .to_iter_dataset()
        .map(chute.decode_record)
        .mp_prefetch(options(), chunk_size=8)
    )
    before = children()
    return _finish(iter(ds), [], before, bad)


# --- 5. a transform raising on one element in a million -----------------------------


MILLION = 1_000_000


def million_pipeline(fail_at: int) -> chute.IterDataset:
    return (
        chute.MapDataset.range(MILLION)
        .to_iter_dataset()
        .map(FailAt(fail_at))
        .mp_prefetch(options(), chunk_size=4096)
    )


def run_one_in_a_million(seed: int) -> Outcome:
    """Scenario 5: `FailAt(fault_at)` over `range(1_000_000)`; positions 100_000 and up."""
    fail_at = random.Random(seed).randrange(100_000, MILLION)
    before = children()
    return _finish(iter(million_pipeline(fail_at)), [], before, fail_at)


def notes(error: BaseException) -> str:
    return "\n".join(getattr(error, "__notes__", []))


# --- 6. Ctrl-C at a seeded place, caught ------------------------------------------------

CTRL_C_SCRIPT = """
import json, multiprocessing, os, signal, threading, time
import chute
from chute_testing.execution import SleepAt

stuck = {stuck}
ds = (
    chute.MapDataset.range(100)
    .to_iter_dataset()
    .map(SleepAt(stuck, seconds=2.0))
    .mp_prefetch(chute.MultiprocessingOptions(num_workers=2), chunk_size=10)
)
it = iter(ds)
got = [next(it) for _ in range(stuck // 10 * 10)]
workers = [p.pid for p in multiprocessing.active_children()]
state = it.get_state()
sent = []

def ctrl_c():
    sent.append(time.monotonic())
    os.kill(os.getpid(), signal.SIGINT)

threading.Timer(0.5, ctrl_c).start()
try:
    got.extend(next(it) for _ in range(stuck % 10 + 1))
    interrupted = None
except KeyboardInterrupt:
    interrupted = time.monotonic() - sent[0]
same_state = it.get_state() == state
got.extend(it)
print(json.dumps({{"pid": os.getpid(), "workers": workers, "interrupted_s": interrupted,
                  "same_state": same_state, "got": got}}), flush=True)
"""


def run_caught_ctrl_c(seed: int) -> dict[str, Any]:
    """Scenario 6: Ctrl-C while `next()` waits for a worker sleeping 2 s on element
    `stuck` (seeded); the program catches it and reads on with the same iterator.

    Returns what the subprocess printed (`interrupted_s`: from the SIGINT to the
    `KeyboardInterrupt`, None if it came too late to interrupt), its exit code and
    stderr, the seconds from its exit until its workers were gone, and its segments left.
    """
    stuck = random.Random(seed).randrange(20, 100)
    done = subprocess.run(
        [sys.executable, "-c", ANSWER_CTRL_C + CTRL_C_SCRIPT.format(stuck=stuck)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    exited = time.monotonic()
    result: dict[str, Any] = json.loads(done.stdout) if done.returncode == 0 else {}
    workers = result.get("workers", [])
    gone = wait_until(lambda: not any(map(alive, workers)))
    gone_s = time.monotonic() - exited
    owners = [result.get("pid", -1), *workers]
    wait_until(lambda: not segments(owners))
    return {
        **result,
        "stuck": stuck,
        "returncode": done.returncode,
        "stderr": done.stderr,
        "workers_gone": gone,
        "workers_gone_s": gone_s,
        "leftovers": segments(owners),
    }


# --- 8. /dev/shm nearly full ----------------------------------------------------------

SHM_FULL_SCRIPT = Path(__file__).with_name("shm_full_run.py")
TMPFS_MIB = 64  # As in shm_full_run.py.


def private_tmpfs(folder: str) -> list[str] | str:
    """A command prefix that runs a command with a fresh tmpfs of `TMPFS_MIB` MiB at
    `folder`, in a mount namespace of its own (so the mount ends with the command), or
    the reason why this machine cannot (no `unshare`, or mounting is not permitted)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "the unshare command (util-linux) is missing"
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    mount = f'mount -t tmpfs -o size={TMPFS_MIB}m,mode=0700 chute-faults "$0" && exec "$@"'
    prefix = [unshare, *user, "--mount", "--propagation", "private", "--", "sh", "-c", mount]
    probe = subprocess.run([*prefix, folder, "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"cannot mount a tmpfs in a private mount namespace: {probe.stderr.strip()}"
    return [*prefix, folder]


def run_shm_full(seeds: list[int], folder: str) -> list[dict[str, Any]] | str:
    """Scenario 8: `shm_full_run.py` for `seeds` with `CHUTE_SHM_DIR` on a private,
    nearly full tmpfs at `folder`; one dict per seed (see that script), or the reason
    why no tmpfs can be mounted here."""
    prefix = private_tmpfs(folder)
    if isinstance(prefix, str):
        return prefix
    done = subprocess.run(
        [*prefix, sys.executable, str(SHM_FULL_SCRIPT), *map(str, seeds)],
        capture_output=True,
        text=True,
        timeout=60 + 30 * len(seeds),
        env={**os.environ, "CHUTE_SHM_DIR": folder},
    )
    if done.returncode != 0:
        raise AssertionError(f"shm_full_run.py exited with {done.returncode}:\n{done.stderr}")
    return [json.loads(line) for line in done.stdout.splitlines()]
