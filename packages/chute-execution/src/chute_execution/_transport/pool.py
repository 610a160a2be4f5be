"""`SlabPool`: a consumer's idle slabs, kept for the workers of its next iterator.

A fresh slab costs more than filling it: its pages are allocated and mapped on
creation (about 5 ms per 16 MiB here, against about 1.4 ms to copy 16 MiB). So when an
iterator's workers stop normally, they leave their slabs in place (those the consumer
does not still hold views into), and the consumer takes them over: it renames each
into its own name (`chute-<its pid>-...-pool-...`) and keeps it here. The workers of
the next iterator started by this process each take some at start, rename them into
their own names and map them: their pages are already there. This process keeps its
own mappings of the kept slabs too (`keep_mappings`), and the next iterator's reader
takes them up again (`mapping`, by inode, whatever the slab's name is by then).

Bounds and lifetimes:

- The pool holds at most `budget()` bytes: 512 MiB, and never more than 1/8 of the
  shared-memory folder's size; where that folder is smaller than 1 GiB (Docker's
  default `/dev/shm` is 64 MiB) it keeps nothing. The oldest slabs go first. A worker
  that could not make a slab (`SharedMemoryError`) empties it.
- An idle slab is unlinked once it has waited as long as the workers that left it
  may wait parked (`MultiprocessingOptions.idle_worker_seconds`, at least
  `MIN_IDLE_SECONDS`, so that iterators made one after another still share them), by
  a timer thread that runs only while slabs wait and never while this process forks
  (`timer_stopped`, registered with `quiet_during_forks`). `free_idle_slabs()` unlinks
  them all now; so does the exit of the process (`atexit`). A process killed by a
  signal leaves them to the next chute process, which reclaims them (the name says
  whose they were). Clean-up never raises and never stops at a file it cannot remove.
- A worker renames a slab into its own name when it takes it, so from then on it is
  the worker's, with every guarantee of a slab the worker made itself.

Example:
    >>> pool = SlabPool()
    >>> pool.idle_bytes(), pool.take(2)
    (0, [])
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from chute_core import ChuteError
from chute_core.internal import (
    SHM_PREFIX,
    new_segment_path,
    owner_tag,
    quiet_during_forks,
    shm_dir,
    thread_count,
)

from .slab import Slab, unlink_quietly

__all__ = ["MIN_IDLE_SECONDS", "POOL", "SlabPool", "budget", "free_idle_slabs"]

MIN_IDLE_SECONDS = 1.0
"""The shortest time an idle slab is kept (also after iterators with no idle workers)."""
KEPT = "kept"
"""What starts the name a consumer gives the slabs its stopping workers leave it
(`<owner tag>-kept<hex>`): `SlabPool.adopt` takes them over, `SlabPool.free` frees them."""
_MOST_BYTES = 512 * 2**20
_SHARE_OF_FOLDER = 8
_SMALL_FOLDER = 2**30


def budget() -> int:
    """Bytes of idle slabs a process keeps: 512 MiB, at most 1/8 of the shm folder.

    None at all in a folder under 1 GiB, where every MiB may be needed by a slab.
    """
    try:
        size = shutil.disk_usage(shm_dir()).total
    except OSError:
        return 0
    return 0 if size < _SMALL_FOLDER else min(_MOST_BYTES, size // _SHARE_OF_FOLDER)


class SlabPool:
    """Idle slabs of this process, oldest first; thread-safe, and inert in a forked child.

    A copy of the pool in a child made by `fork` belongs to the parent: the child sees
    an empty pool of its own and never touches the parent's files.
    """

    def __init__(self) -> None:
        self._owner = os.getpid()
        self._slabs: list[tuple[str, int]] = []  # (path, size), oldest first.
        self._until: dict[str, float] = {}  # path -> when it expires (`time.monotonic()`).
        self._mapped: dict[int, Slab] = {}  # By inode: our mappings of slabs kept.
        self._lock = threading.RLock()  # Reentrant: a finalizer (GC) may release within.
        self._timer: threading.Timer | None = None
        self._unstarted = False  # `_timer` is made but not started yet (see `_locked`).
        self._depth = 0  # How deep the owner of `_lock` is in `_locked` blocks.
        self._stopped = 0  # How many `timer_stopped` blocks run: no timer meanwhile.

    def _mine(self) -> list[tuple[str, int]]:
        if os.getpid() != self._owner:  # A forked child: start empty, own nothing.
            self._owner, self._slabs, self._lock = os.getpid(), [], threading.RLock()
            self._mapped, self._until, self._timer = {}, {}, None  # The parent's: left alone.
            self._unstarted = False
        return self._slabs

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Holds the lock; a timer made meanwhile starts once the lock is let go.

        Never while it is held: a new thread may run a finalizer that releases an
        iterator (garbage collection runs in any thread), which takes this lock, while
        `Thread.start` waits for the new thread: neither would go on.
        """
        with self._lock:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                timer = self._timer if self._unstarted and self._depth == 0 else None
                if timer is not None:
                    self._unstarted = False
        if timer is not None:
            timer.start()

    def _schedule(self) -> None:
        """(In `_locked`.) A timer for the next slab to expire, if any slab waits."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer, self._unstarted = None, False
        if not self._slabs or self._stopped:
            return
        delay = max(0.0, min(self._until.values(), default=0.0) - time.monotonic())
        self._timer = threading.Timer(delay, self._expire)
        self._timer.name, self._timer.daemon = "chute-idle-slabs", True
        self._unstarted = True

    def _expire(self) -> None:
        """Unlinks the slabs whose time is up (on the timer's thread)."""
        now = time.monotonic()
        with self._locked():
            if threading.current_thread() is not self._timer:
                return  # Cancelled or replaced meanwhile.
            self._timer = None
            slabs = self._mine()
            expired = [slab for slab in slabs if self._until.get(slab[0], 0.0) <= now]
            for slab in expired:
                slabs.remove(slab)
                self._until.pop(slab[0], None)
            self._schedule()
        for path, _ in expired:
            unlink_quietly(path)

    @contextlib.contextmanager
    def timer_stopped(self) -> Iterator[None]:
        """No expiry thread runs during the block (so that this process may fork).

        Slabs due meanwhile expire after it.
        """
        with self._locked():
            self._mine()
            self._stopped += 1
            timer, self._timer, self._unstarted = self._timer, None, False
        if timer is not None and timer.ident is not None:  # Started: wait for its end.
            timer.cancel()
            timer.join()
            for _ in range(100):  # Until its native thread is gone too (microseconds).
                if (thread_count() or 0) <= threading.active_count():
                    break
                time.sleep(0.0002)
        try:
            yield
        finally:
            with self._locked():
                self._stopped -= 1
                self._schedule()

    def keep_mappings(self, slabs: Iterable[Slab]) -> None:
        """Keeps this process's mappings of slabs now in the pool, for the next reader.

        A reader maps each slab its workers write to (`SlabReader`); when the workers
        of a later iterator write to a slab of the pool, mapping it again would cost
        as much as the first time. Mappings of slabs not in the pool are closed, and
        so are those kept before that no reader took (their slab may be gone).
        """
        with self._locked():
            pooled: set[int] = set()
            for path, _ in self._mine():
                with contextlib.suppress(OSError):
                    pooled.add(os.stat(path).st_ino)
            stale, self._mapped = list(self._mapped.values()), {}
            for slab in slabs:
                if slab.inode in pooled and slab.inode not in self._mapped:
                    self._mapped[slab.inode] = slab
                else:
                    stale.append(slab)
        for slab in stale:
            slab.close()

    def mapping(self, path: str, size: int) -> Slab | None:
        """A kept mapping of the slab at `path` (renamed since, maybe), if it has `size`."""
        with self._locked():
            if not self._mapped or os.getpid() != self._owner:
                return None
            try:
                inode = os.stat(path).st_ino
            except OSError:
                return None
            slab = self._mapped.get(inode)
            if slab is None or slab.size < size:
                return None
            del self._mapped[inode]
        slab.path = path  # Its name now.
        return slab

    def adopt(self, paths: Iterable[str], idle_seconds: float = MIN_IDLE_SECONDS) -> int:
        """Takes over the slabs at `paths` (of workers that stopped); returns how many.

        Each is renamed into this process's name; a path that is gone is skipped. Then
        the oldest slabs beyond `budget()` are unlinked. Each is unlinked after waiting
        `idle_seconds` (at least `MIN_IDLE_SECONDS`) with no iterator taking it.
        """
        taken: list[tuple[str, int]] = []
        for path in paths:
            target = new_segment_path("pool", Path(path).parent)  # Where it lies.
            try:
                size = os.stat(path).st_size
                os.rename(path, target)
            except OSError:
                continue
            taken.append((str(target), size))
        until = time.monotonic() + max(MIN_IDLE_SECONDS, idle_seconds)
        with self._locked():
            slabs = self._mine()
            slabs.extend(taken)
            self._until.update((path, until) for path, _ in taken)
            limit, total, drop = budget(), sum(size for _, size in slabs), 0
            while drop < len(slabs) and total > limit:
                total -= slabs[drop][1]
                drop += 1
            dropped, slabs[:drop] = slabs[:drop], []
            for path, _ in dropped:
                self._until.pop(path, None)
            self._schedule()
        for path, _ in dropped:
            unlink_quietly(path)
        return len(taken)

    def take(self, count: int) -> list[tuple[str, int]]:
        """Up to `count` slabs, largest first, as `(name, size)`; they leave the pool.

        Whoever takes them renames them (`SlabWriter.adopt`) or unlinks them.
        """
        with self._locked():
            slabs = self._mine()
            chosen = sorted(slabs, key=lambda slab: -slab[1])[: max(0, count)]
            for slab in chosen:
                slabs.remove(slab)
                self._until.pop(slab[0], None)
            if chosen:
                self._schedule()
        return [(os.path.basename(path), size) for path, size in chosen]

    def idle_bytes(self) -> int:
        """Bytes of slabs in the pool now."""
        with self._locked():
            return sum(size for _, size in self._mine())

    def free(self) -> int:
        """Unlinks every idle slab, and every slab given out but never taken over.

        Slabs that stopped workers left to this process (named `KEPT`) but that no
        release took over are unlinked too.

        Returns:
            Bytes freed (of the slabs in the pool).
        """
        with self._locked():
            owner = self._owner
            slabs, self._slabs = self._mine(), []
            mapped, self._mapped = list(self._mapped.values()), {}
            self._until = {}
            self._schedule()  # None: nothing waits.
        for slab in mapped:
            with contextlib.suppress(Exception):
                slab.close()
        for path, _ in slabs:
            unlink_quietly(path)
        if os.getpid() == owner:
            try:  # The folder may be gone, or its variable changed (at exit too).
                folder = shm_dir()
                mine = f"{SHM_PREFIX}{owner_tag(create=False)}-"
                names = [n for n in os.listdir(folder) if _idle_name(n, mine)]
            except (OSError, ChuteError):
                names = []
            for name in names:
                unlink_quietly(str(folder / name))
        return sum(size for _, size in slabs)


def _idle_name(name: str, mine: str) -> bool:
    """Whether `name` is one of this process's (`mine`) idle slabs: pooled, or left to it."""
    return name.startswith(mine) and ("-pool-" in name or name[len(mine) :].startswith(KEPT))


POOL = SlabPool()
"""This process's pool (of the consumer side)."""
quiet_during_forks(POOL.timer_stopped)


def free_idle_slabs() -> int:
    """Unlinks the idle shared-memory slabs this process keeps for its next iterators.

    chute keeps the slabs of an iterator's workers when they stop, so that the next
    iterator's workers start with their memory ready (see `SlabPool`). They are freed
    at exit anyway; call this to give the memory back sooner.

    Returns:
        The bytes freed.

    Example:
        >>> import numpy as np
        >>> from chute_execution import ChunkPlan, MultiprocessPrefetchIter
        >>> from chute_execution import MultiprocessingOptions as Options
        >>> plan = ChunkPlan(np.zeros((8, 2**12)), [], chunk_size=4)  # 128 KiB per chunk.
        >>> _ = list(MultiprocessPrefetchIter(plan, Options(num_workers=1)))
        >>> free_idle_slabs() > 0, POOL.idle_bytes()
        (True, 0)
    """
    return POOL.free()


atexit.register(POOL.free)
