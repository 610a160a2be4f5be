"""`SlabReader`: the consumer's side of the shared-memory transport (see `_transport`)."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from chute_core.internal import COUNTERS, SHM_BYTES

from .codec import SlabMessage, loads
from .pool import POOL
from .slab import Slab, slab_path, unlink_quietly

__all__ = ["SlabReader"]


class SlabReader:
    """The consumer's side: reads `SlabMessage`s from any number of writers.

    `read` maps each slab once (and keeps it mapped while its writer uses it), copies
    every array's bytes out once into fresh memory, and unpickles. The arrays it returns
    are writable and share memory with neither the slab nor each other, so the slab can
    be released as soon as `read` returns. The small arrays of one message (under 16 KiB
    each) are copied as one block and share its allocation, each in its own bytes.
    `read` may be called from several threads at once.

    `read` unpickles, which can run any code the stream names: give it only messages
    from this program's own worker processes, never bytes from a file or the network.

    When a writer's process ends, `forget_process` unmaps its slabs (and unlinks them if
    the process was killed and could not).

    Each message read adds the bytes its writer put in shared memory for it (its
    arrays' bytes) to `chute_core.internal.COUNTERS` (`SHM_BYTES`): counted here, in the
    consumer, the process whose metrics report them, as the message arrives (a writer
    in a worker counts after its result left: they would arrive a result late).

    Example:
        >>> import numpy as np
        >>> from chute_execution._transport import SlabWriter
        >>> with SlabWriter(num_slabs=1) as writer, SlabReader() as reader:
        ...     message = writer.write([np.arange(3), "text"])
        ...     batch = reader.read(message)
        ...     writer.release(message.token)
        >>> batch
        [array([0, 1, 2]), 'text']
    """

    def __init__(self) -> None:
        self._slabs: dict[tuple[str, int], Slab] = {}  # (writer, slot) -> its current slab
        self._seen: dict[str, set[str]] = {}  # writer -> paths of every slab seen
        self._lock = threading.Lock()

    def read(self, message: SlabMessage) -> Any:
        """Rebuilds the object of `message`; its slab may be released right after.

        Raises:
            SharedMemoryError: the slab is gone (its writer exited or closed).
        """
        if not message.spans:
            return loads(message.data)
        _count(message)
        source = self._attach(message).array if message.slab else np.empty(0, np.uint8)
        block = np.empty(message.packed, np.uint8)
        if message.packed:
            np.copyto(block, source[: message.packed])
        buffers: list[np.ndarray[Any, np.dtype[np.uint8]]] = []
        for offset, size in message.spans:
            if offset + size <= message.packed:
                buffers.append(block[offset : offset + size])
            else:
                buffers.append(source[offset : offset + size].copy())
        del source
        return loads(message.data, buffers)

    def read_leased(self, message: SlabMessage, on_release: Callable[[], object]) -> Any:
        """Like `read`, but the large arrays are views into the slab instead of copies.

        The slab stays the consumer's until every array made from it is garbage, then
        `on_release()` runs, once (at once if the message has no large arrays). It runs
        in whichever thread drops the last array, possibly inside another call: it must
        be quick and must not block (append to a `collections.deque`, say). The writer
        must not reuse the slab meanwhile: `SlabWriter.lease(token)` takes it out of
        its pool. The arrays are writable and share memory with nothing the caller can
        reach but each other's slab; small ones (under 16 KiB) are copied as in `read`.

        Raises:
            SharedMemoryError: the slab is gone (its writer exited or closed).

        Example:
            >>> import numpy as np
            >>> from chute_execution._transport import SlabWriter
            >>> released = []
            >>> with SlabWriter(num_slabs=1) as writer, SlabReader() as reader:
            ...     message = writer.write({"x": np.arange(5000.0), "y": np.arange(3)})
            ...     writer.lease(message.token)
            ...     batch = reader.read_leased(message, lambda: released.append(1))
            ...     total, held = float(batch["x"].sum()), released == []
            ...     del batch
            >>> total, held, released
            (12497500.0, True, [1])
        """
        large = [(o, n) for o, n in message.spans if o + n > message.packed]
        if not large:
            result = self.read(message)
            on_release()
            return result
        slab = self._attach(message)
        _count(message)
        start = min(offset for offset, _ in large)
        region = slab.region(start, max(offset + size for offset, size in large))
        finalizer = weakref.finalize(region, on_release)
        finalizer.atexit = False
        block = np.empty(message.packed, np.uint8)
        if message.packed:
            np.copyto(block, slab.array[: message.packed])
        buffers = [
            block[offset : offset + size]
            if offset + size <= message.packed
            else region[offset - start : offset - start + size]
            for offset, size in message.spans
        ]
        del region, slab
        return loads(message.data, buffers)

    def forget_process(self, pid: int, *, unlink: bool = True) -> list[str]:
        """Unmaps the slabs of writers in process `pid`, which has exited or died.

        Args:
            pid: the writer process's id.
            unlink: also unlink those slabs (a killed process could not).

        Returns:
            The names of the slabs unlinked.
        """
        prefix = f"{pid}-"
        with self._lock:
            keys = [key for key in self._slabs if key[0].startswith(prefix)]
            slabs = [self._slabs.pop(key) for key in keys]
            writers = [writer for writer in self._seen if writer.startswith(prefix)]
            paths = set().union(*(self._seen.pop(writer) for writer in writers))
        for slab in slabs:
            slab.close()
        return sorted(os.path.basename(p) for p in paths if unlink and unlink_quietly(p))

    def unlink_all_seen(self) -> list[str]:
        """Unlinks every slab this reader has seen; for after every writer has stopped."""
        with self._lock:
            paths = set().union(*self._seen.values())
        return sorted(os.path.basename(p) for p in paths if unlink_quietly(p))

    def hand_over_mappings(self) -> None:
        """Gives the mappings of slabs now in the pool to it (`SlabPool.keep_mappings`)."""
        with self._lock:
            slabs, self._slabs = list(self._slabs.values()), {}
        POOL.keep_mappings(slabs)

    def close(self) -> None:
        """Unmaps every slab (arrays already read stay valid: they are copies)."""
        with self._lock:
            slabs, self._slabs = list(self._slabs.values()), {}
        for slab in slabs:
            slab.close()

    def __enter__(self) -> SlabReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _attach(self, message: SlabMessage) -> Slab:
        key = (message.writer, message.slot)
        slab = self._slabs.get(key)
        if slab is not None and slab.name == message.slab:
            return slab
        with self._lock:
            slab = self._slabs.get(key)
            if slab is not None and slab.name == message.slab:
                return slab
            path = str(slab_path(message.slab))
            self._seen.setdefault(message.writer, set()).add(path)
            new = POOL.mapping(path, message.slab_size)  # A slab of the pool, still mapped.
            if new is None:
                new = Slab.attach(message.slab, message.slab_size, writable=True)
            self._slabs[key] = new
        if slab is not None:  # The writer replaced this slot's slab by a larger one.
            slab.close()
        return new


def _count(message: SlabMessage) -> None:
    """Counts the bytes of shared memory that carried `message` (its arrays' bytes)."""
    if message.slab:
        COUNTERS.add(SHM_BYTES, sum(size for _, size in message.spans))
