"""A consumer in a subprocess, and what the fault tests check of processes and `/dev/shm`.

Shared by `test_mp_faults.py` and `test_mp_killed_parent.py` (loaded by path: the tests
run with `--import-mode=importlib`). Segments count only when their name says one of the
given processes made them (`chute-<pid>-...`), so those of other tests or programs never
do.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable

from chute_core.internal import SHM_PREFIX, reclaim_orphaned_segments, shm_dir
from chute_testing.execution import ANSWER_CTRL_C

BOUND = 10.0  # Seconds within which each outcome must happen; generous, not a speed check.
STARTUP = 60.0  # Seconds a subprocess may take to import chute and start its workers.


def wait_until(condition: Callable[[], bool], seconds: float = BOUND) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def segments(pids: Iterable[int]) -> dict[str, int]:
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


def children() -> set[int]:
    return {p.pid for p in multiprocessing.active_children() if p.pid is not None}


def rss() -> int:
    """This process's resident memory in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def kill_survivors(pids: Iterable[int]) -> None:
    """Clean-up after a failed test: SIGKILLs what still runs of `pids`."""
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def report(test: str, **figures: object) -> None:
    """Prints measured figures (shown with `pytest -s`)."""
    print(f"\n[{test}] " + ", ".join(f"{k}={v}" for k, v in figures.items()))


PRELUDE = """
import json, multiprocessing, os, signal, sys, threading, time
from multiprocessing import forkserver
import chute
from chute_testing.execution import FullArray, SleepAt

def announce():
    print(json.dumps({
        "pid": os.getpid(),
        "workers": [p.pid for p in multiprocessing.active_children()],
        "forkserver": getattr(forkserver._forkserver, "_forkserver_pid", None),
    }), flush=True)
"""

ITERATE = """
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


class Consumer:
    """A subprocess running `script` after `PRELUDE`; it calls `announce()` once its
    workers run, which prints its pid, its workers' pids and its fork server's."""

    def __init__(self, script: str, new_session: bool = False) -> None:
        self._pending = b""
        self.process = subprocess.Popen(
            [sys.executable, "-c", ANSWER_CTRL_C + PRELUDE + script],
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
    ) -> Consumer:
        """Iterates `FullArray(size)` elements slowly; element `stuck_at` never comes."""
        script = ITERATE.format(size=size, chunk=chunk, pause=pause, stuck_at=stuck_at)
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
            names = segments(self.workers)
            return all(
                sum(name.startswith(f"{SHM_PREFIX}{pid}-") for name in names) >= per_worker
                for pid in self.workers
            )

        assert wait_until(held), (
            f"the workers made no shared memory: {segments(self.workers)}; workers alive: "
            f"{[alive(pid) for pid in self.workers]}, consumer exit code: {self.process.poll()}"
        )
        return segments(self.workers)

    def output_after_exit(self) -> tuple[str, str]:
        """What the subprocess printed after its first line, and its stderr."""
        out, err = self.process.communicate(timeout=BOUND)
        return (self._pending + out).decode(errors="replace"), err.decode(errors="replace")

    def kill(self) -> None:
        """Clean-up: the subprocess, its session if it has one, and its workers."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(BOUND)
        survivors = [pid for pid in self.processes if alive(pid)]
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
        if survivors:  # Their slabs are orphans now: reclaim them once they are reaped.
            wait_until(lambda: not any(map(alive, survivors)))
            wait_until(lambda: not (reclaim_orphaned_segments() or segments(survivors)))
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
