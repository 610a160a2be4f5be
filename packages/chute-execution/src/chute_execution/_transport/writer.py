"""`SlabWriter`: the worker's side of the shared-memory transport (see `_transport`)."""

from __future__ import annotations

import multiprocessing
import os
import secrets
import threading
import time
import weakref
from collections.abc import Callable
from multiprocessing.util import Finalize

import numpy as np

from chute_core import SharedMemoryError
from chute_core.internal import SHM_PREFIX, check_count, new_segment_path

from .arena import SlabArena
from .codec import SlabMessage, Span, dumps, layout
from .slab import Slab, slab_path, unlink_quietly

__all__ = ["DEFAULT_SLAB_SIZE", "SlabWriter"]

DEFAULT_SLAB_SIZE = 4 * 2**20
"""Bytes of a slab when first created; it grows to fit larger messages."""

_POLL = 0.05  # Seconds between checks that the consumer lives while waiting for a slab.
_PAGE = 4096
_MEMCPY_IN_NUMPY = 2**16  # Copies of this many bytes or more are worth numpy's overhead.


def _unlink_all(paths: set[str], owner_pid: int) -> None:
    """The writer's finalizer; a forked copy of the writer must not unlink its parent's."""
    if os.getpid() == owner_pid:
        for path in list(paths):
            unlink_quietly(path)
        paths.clear()


def _parent_alive() -> Callable[[], bool] | None:
    parent = multiprocessing.parent_process()
    return None if parent is None else parent.is_alive


class SlabWriter:
    """The worker's side: writes objects into a pool of reusable shared-memory slabs.

    Each `write` takes a free slab, copies the bytes of the object's arrays into it and
    returns a `SlabMessage` for the consumer; the slab stays busy until `release` is
    called with the message's token. A slab too small for a message is replaced by a
    larger one (a new segment), so a write never runs past a slab's end; slabs are
    created when first needed and never shrink. `write` and `release` may be called from
    different threads.

    A consumer that keeps a message's arrays as views into the slab (instead of copying
    them out) calls `lease(token)` first: the slab then stays the consumer's until
    `release(token)`, and the pool gets one more slot meanwhile, so writing never waits
    for the consumer's user to let go of a batch. Once leases end, free slabs beyond
    `num_slabs` are retired (unlinked), smallest first.

    The slabs are owner-only files in `/dev/shm`, unlinked by `close()`, when the writer
    is garbage collected, and at the exit of the process (also of a worker started by
    fork or forkserver); a copy of the writer in a forked child never unlinks them.

    Args:
        num_slabs: how many messages may be in flight (written, not yet released).
        initial_size: bytes of a slab when first created.
        wait_for_release: called with a number of seconds while every slab is busy;
            it should wait up to that long for release notices, call `release` for each,
            and raise if the consumer is gone. Without it, `write` waits for `release`
            to be called by another thread.
        consumer_alive: checked while waiting; `write` raises `BrokenPipeError` when it
            returns False. Defaults to "the parent process lives" in a child process.

    Example:
        >>> from chute_execution._transport import SlabReader
        >>> writer, reader = SlabWriter(num_slabs=2), SlabReader()
        >>> message = writer.write({"image": np.ones((2, 2), np.uint8), "label": 7})
        >>> reader.read(message)
        {'image': array([[1, 1],
               [1, 1]], dtype=uint8), 'label': 7}
        >>> writer.release(message.token)
        >>> reader.close()
        >>> writer.close()
    """

    def __init__(
        self,
        num_slabs: int,
        initial_size: int = DEFAULT_SLAB_SIZE,
        *,
        wait_for_release: Callable[[float], object] | None = None,
        consumer_alive: Callable[[], bool] | None = None,
    ) -> None:
        self._num_slabs = check_count(num_slabs, "num_slabs", "SlabWriter", minimum=1)
        self._initial_size = check_count(initial_size, "initial_size", "SlabWriter", minimum=1)
        self._wait_for_release = wait_for_release
        self._consumer_alive = consumer_alive or _parent_alive()
        self._id = f"{os.getpid()}-{secrets.token_hex(4)}"
        self._slabs: list[Slab | None] = [None] * self._num_slabs
        self._free = list(range(self._num_slabs))
        self._busy: dict[int, int] = {}  # token -> slot
        self._leased: set[int] = set()  # Tokens of busy slots the consumer has leased.
        self._spare: list[int] = []  # Slots retired after leases, to reuse for the next.
        self._next_token = 0
        self._last_needed = 0  # Bytes of slab the last message took: an arena's size.
        self._closed = False
        self._kept: list[Slab] = []  # Slabs left to the consumer, still mapped here.
        self._condition = threading.Condition()
        self._paths: set[str] = set()
        self._finalizer = weakref.finalize(self, _unlink_all, self._paths, os.getpid())
        # Children started by fork or forkserver leave through os._exit, not atexit.
        Finalize(self, self._finalizer, exitpriority=0)

    @property
    def id(self) -> str:
        """The writer's id in its messages: `"<pid>-<random hex>"`."""
        return self._id

    @property
    def num_slabs(self) -> int:
        """How many messages may be in flight."""
        return self._num_slabs

    @property
    def nbytes(self) -> int:
        """The bytes of shared memory the slabs hold now."""
        return sum(slab.size for slab in self._slabs if slab is not None)

    def write(
        self, obj: object, timeout: float | None = None, *, arena: SlabArena | None = None
    ) -> SlabMessage:
        """Pickles `obj` with its arrays' bytes in a free slab; returns the message.

        Args:
            obj: any picklable object, typically a list of elements or a batch.
            timeout: seconds to wait for a free slab; None waits as long as the
                consumer lives.
            arena: from `arena()`: the slab to write to, where arrays `obj` holds from
                `arena.empty` already are (their bytes are not copied).

        Raises:
            TimeoutError: no slab was released within `timeout`.
            BrokenPipeError: the consumer is gone.
            SharedMemoryError: a slab cannot be created (e.g. `/dev/shm` is full).
            ValueError: the writer is closed.
        """
        try:
            data, buffers = dumps(obj)
            views = [buffer.raw() for buffer in buffers]
        except BaseException:
            if arena is not None:
                arena.abandon()
            raise
        placed: list[Span | None] = [None] * len(views)
        if arena is not None:
            placed = [arena.span_of(view) for view in views]
            if not any(placed):  # Nothing was built in it: an ordinary write.
                arena.abandon()
                arena = None
        rest = [view for view, span in zip(views, placed, strict=True) if span is None]
        spans, packed, needed = layout([view.nbytes for view in rest])
        if arena is not None and needed > arena.floor:  # Does not fit below: copy all.
            views = [
                memoryview(bytes(view)) if span else view
                for view, span in zip(views, placed, strict=True)
            ]
            arena.abandon()
            arena, placed, rest = None, [None] * len(views), views
            spans, packed, needed = layout([view.nbytes for view in views])
        used = needed + (arena.used if arena is not None else 0)
        if used == 0:  # No array bytes: nothing to hold in shared memory.
            return SlabMessage(data, tuple(spans), 0, "", 0, self._id, -1, None)
        self._last_needed = used
        if arena is not None:
            slot, slab = arena.slot, arena.slab
            arena.taken()
        else:
            slot = self._acquire(needed, timeout)
        try:
            if arena is None:
                slab = self._slab_for(slot, needed)
            target, raw_target = slab.array, slab.array.data
            for view, (offset, size) in zip(rest, spans, strict=True):
                if size < _MEMCPY_IN_NUMPY:
                    raw_target[offset : offset + size] = view
                else:  # Releases the GIL for other threads of the worker.
                    np.copyto(target[offset : offset + size], np.frombuffer(view, np.uint8))
            del raw_target
        except BaseException:
            self._give_back(slot)
            raise
        spans_iter = iter(spans)
        all_spans = tuple(span if span is not None else next(spans_iter) for span in placed)
        with self._condition:
            if self._closed:  # Closed by another thread meanwhile: the slab may be new.
                slab.close()
                unlink_quietly(slab.path)
                raise ValueError("SlabWriter.write: the writer was closed during the write.")
            token, self._next_token = self._next_token, self._next_token + 1
            self._busy[token] = slot
        return SlabMessage(data, all_spans, packed, slab.name, slab.size, self._id, slot, token)

    def arena(self, timeout: float | None = None) -> SlabArena | None:
        """A free slab to build the next message's large arrays in (see `SlabArena`).

        Sized like the last message; before the first, the largest slab taken over
        (`adopt`), if any (None otherwise: nothing to go by). Pass it to the next
        `write`, or give it back with `arena.abandon()`.

        Raises:
            The errors of `write` (for the wait for a free slab).
        """
        needed = self._last_needed
        if needed == 0:
            with self._condition:
                sizes = [slab.size for slab in self._slabs if slab is not None]
            if not sizes:
                return None
            needed = max(sizes)
        slot = self._acquire(needed, timeout)
        try:
            slab = self._slab_for(slot, needed)
        except BaseException:
            self._give_back(slot)
            raise
        return SlabArena(slot, slab, self._give_back)

    def release(self, token: int | None) -> None:
        """Frees the slab of the message with `token`; the consumer has read it.

        A token of None (a message without a slab) frees nothing.

        Raises:
            ValueError: `token` is not one of a message in flight.
        """
        if token is None:
            return
        with self._condition:
            if self._closed:
                return  # A late notice after close: nothing to free.
            slot = self._busy.pop(token, None)
            if slot is None:
                raise ValueError(
                    f"SlabWriter.release: token {token!r} is not the token of a message in "
                    f"flight (in flight: {sorted(self._busy)}); release each message once."
                )
            self._free.append(slot)
            retired = self._retire_spare() if token in self._leased else None
            self._leased.discard(token)
            self._condition.notify()
        if retired is not None:
            retired.close()
            unlink_quietly(retired.path)
            self._paths.discard(retired.path)

    def lease(self, token: int | None) -> None:
        """Keeps the slab of the message with `token` busy until `release(token)`.

        For a consumer that hands out views into the slab; the pool grows by one slot
        meanwhile, so writes go on. A token of None (no slab) leases nothing.

        Raises:
            ValueError: `token` is not one of a message in flight, or is leased already.
        """
        if token is None:
            return
        with self._condition:
            if self._closed:
                return
            if token not in self._busy or token in self._leased:
                raise ValueError(
                    f"SlabWriter.lease: token {token!r} is not the token of a message in "
                    f"flight that is not leased yet (in flight: {sorted(self._busy)})."
                )
            self._leased.add(token)
            if self._spare:
                slot = self._spare.pop()
            else:
                slot = len(self._slabs)
                self._slabs.append(None)
            self._free.append(slot)
            self._condition.notify()

    @property
    def num_leased(self) -> int:
        """How many messages' slabs are leased to the consumer now."""
        return len(self._leased)

    def _retire_spare(self) -> Slab | None:
        """Takes the smallest free slot out of the pool once a lease ended (under lock)."""
        if len(self._free) <= self._num_slabs:
            return None  # Few enough free slabs: keep them, they are pre-faulted.
        slot = min(self._free, key=lambda s: 0 if (slab := self._slabs[s]) is None else slab.size)
        self._free.remove(slot)
        self._spare.append(slot)
        slab, self._slabs[slot] = self._slabs[slot], None
        return slab

    def adopt(self, slabs: list[tuple[str, int]]) -> int:
        """Takes over idle slabs `(name, size)` of the consumer (see `SlabPool`).

        Each goes into an empty slot, renamed into this writer's process's name (so it
        is this writer's to unlink, like one it made) and mapped with its pages, which
        already exist. A slab that is gone, or finds no empty slot, is skipped (and in
        the latter case unlinked). Returns how many were taken.

        Example:
            >>> from chute_execution._transport.slab import Slab
            >>> idle = Slab.create(8192); idle.close()
            >>> with SlabWriter(num_slabs=2) as writer:
            ...     writer.adopt([(idle.name, 8192), ("chute-0-0-pool-gone", 8192)])
            ...     writer.nbytes
            1
            8192
        """
        taken = 0
        for name, size in slabs:
            with self._condition:
                empty = [slot for slot in self._free if self._slabs[slot] is None]
            source = slab_path(name)
            if not empty:
                unlink_quietly(str(source))
                continue
            path = new_segment_path("slab")
            try:
                os.rename(source, path)
            except OSError:
                continue
            self._paths.add(str(path))
            try:
                slab = Slab.attach(path.name, size, writable=True)
            except SharedMemoryError:
                unlink_quietly(str(path))
                self._paths.discard(str(path))
                continue
            with self._condition:
                if self._closed or self._slabs[empty[0]] is not None:
                    slab.close()
                    unlink_quietly(str(path))
                    self._paths.discard(str(path))
                    continue
                self._slabs[empty[0]] = slab
            taken += 1
        return taken

    def close(self, *, keep_as: str | None = None) -> None:
        """Unlinks every slab; a consumer that already mapped one can still read it.

        Args:
            keep_as: for a worker stopped normally: the slabs the consumer holds no
                views into (not leased) are not unlinked but renamed to
                `chute-<keep_as>-<random hex>`, a name of the consumer's, for it to take
                over (`SlabPool.adopt`). Leased slabs are unlinked all the same. The
                kept slabs stay mapped until the writer is garbage: a stopped worker
                exits right after, and its exit unmaps them at no extra cost.
        """
        with self._condition:
            self._closed = True
            leased = {self._busy[token] for token in self._leased if token in self._busy}
            self._busy.clear()
            self._leased.clear()
            self._free.clear()
            self._condition.notify_all()
            slabs, self._slabs = self._slabs, [None] * self._num_slabs
        for slot, slab in enumerate(slabs):
            if slab is None:
                continue
            if keep_as is not None and slot not in leased:
                target = str(slab_path(f"{SHM_PREFIX}{keep_as}-{secrets.token_hex(6)}"))
                try:
                    os.rename(slab.path, target)
                except OSError:
                    pass  # Unlinked with the others below.
                else:
                    self._paths.discard(slab.path)
                    self._kept.append(slab)  # Unmapped with the writer (a worker exits).
                    continue
            slab.close()
        self._finalizer()

    def __enter__(self) -> SlabWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"SlabWriter(num_slabs={self._num_slabs}, id={self._id!r}, "
            f"nbytes={self.nbytes}, in_flight={len(self._busy)}, leased={len(self._leased)})"
        )

    def _acquire(self, needed: int, timeout: float | None) -> int:
        """Takes a free slot, preferring the smallest slab that fits `needed` bytes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._condition:
                if self._closed:
                    raise ValueError("SlabWriter.write: the writer is closed.")
                if self._free:
                    return self._take(needed)
                pause = _POLL if deadline is None else min(_POLL, deadline - time.monotonic())
                if pause > 0 and self._wait_for_release is None:
                    self._condition.wait(pause)
            if pause > 0 and self._wait_for_release is not None:
                self._wait_for_release(pause)
            with self._condition:
                if self._free or self._closed:
                    continue
            if self._consumer_alive is not None and not self._consumer_alive():
                raise BrokenPipeError(f"{self!r}: the consumer is gone; no slab will be released.")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{self!r}: no slab was released within {timeout} s; the consumer "
                    "must call release(message.token) for each message it has read."
                )

    def _take(self, needed: int) -> int:
        def rank(slot: int) -> tuple[int, int]:
            slab = self._slabs[slot]
            size = 0 if slab is None else slab.size
            return (0, size) if size >= needed else (1, size)  # Fits and smallest first.

        slot = min(self._free, key=rank)
        self._free.remove(slot)
        return slot

    def _give_back(self, slot: int) -> None:
        with self._condition:
            if not self._closed:
                self._free.append(slot)
                self._condition.notify()

    def _slab_for(self, slot: int, needed: int) -> Slab:
        """The slab of `slot`, replaced by a new, larger one if it is smaller than `needed`."""
        old = self._slabs[slot]
        if old is not None and old.size >= needed:
            return old
        size = self._initial_size if old is None else 2 * old.size
        size = -(-max(size, needed) // _PAGE) * _PAGE
        slab = Slab.create(size)  # Before retiring the old one: this may fail.
        self._paths.add(slab.path)
        self._slabs[slot] = slab
        if old is not None:
            old.close()
            unlink_quietly(old.path)
            self._paths.discard(old.path)
        return slab
