"""`SlabArena`: arrays built straight in a free slab, sent without copying their bytes.

A worker that stacks a chunk into one batch would first fill fresh memory and then copy
it into a slab. Instead it takes an arena from its writer (`SlabWriter.arena`), stacks
into arrays the arena hands out from the top of the slab downwards
(`chute_transforms.stacking_into(arena.empty)`), and writes the result with
`SlabWriter.write(obj, arena=arena)`: the bytes of those arrays already lie in the slab,
so only the other buffers are copied, below them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .codec import ALIGN, SMALL_BUFFER, Span
from .slab import Slab

__all__ = ["SlabArena", "address_of"]


def address_of(view: memoryview) -> int:
    """The address of the first byte of a (contiguous) buffer."""
    address: int = np.frombuffer(view, np.uint8).__array_interface__["data"][0]
    return address


class SlabArena:
    """The top of one free slab, handed out as arrays for one message.

    Made by `SlabWriter.arena`; used for one `SlabWriter.write(obj, arena=...)` (or
    given back with `abandon()`). Arrays below 16 KiB are not placed here (they are
    packed at the start of the slab as in any message), nor arrays that do not fit.

    Args:
        slot: the writer's slot of the slab.
        slab: the slab, busy for this arena.
        give_back: returns the slot to the writer's free slots, unused.

    Example:
        >>> from chute_execution._transport import SlabWriter
        >>> with SlabWriter(num_slabs=1) as writer:
        ...     _ = writer.write([np.zeros(2**16)])  # The first write sizes the slab.
        ...     writer.release(0)
        ...     arena = writer.arena()
        ...     batch = arena.empty((2, 2**15), np.dtype(np.float64))
        ...     batch[:] = 1.0
        ...     message = writer.write([batch], arena=arena)
        >>> message.spans[0][0] == arena.floor, len(message.spans)
        (True, 1)
    """

    def __init__(self, slot: int, slab: Slab, give_back: Callable[[int], None]) -> None:
        self.slot = slot
        self.slab = slab
        self.floor = slab.size  # Arrays are handed out below the top, downwards.
        self._base: int = slab.array.__array_interface__["data"][0]
        self._give_back: Callable[[int], None] | None = give_back

    def empty(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray[Any, Any] | None:
        """An uninitialised C-contiguous array in the slab, or None (small, or no room)."""
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes < SMALL_BUFFER or dtype.hasobject:
            return None
        start = (self.floor - nbytes) // ALIGN * ALIGN
        if start < 0:
            return None
        self.floor = start
        raw = self.slab.array[start : start + nbytes]
        return raw.view(dtype).reshape(shape)

    def span_of(self, view: memoryview) -> Span | None:
        """Where `view`'s bytes lie in the slab, if they are one of this arena's arrays."""
        if view.nbytes < SMALL_BUFFER:
            return None
        offset = address_of(view) - self._base
        if self.floor <= offset and offset + view.nbytes <= self.slab.size:
            return offset, view.nbytes
        return None

    @property
    def used(self) -> int:
        """Bytes handed out (with alignment)."""
        return self.slab.size - self.floor

    def abandon(self) -> None:
        """Gives the slab back unused (the arrays handed out must not be used after)."""
        give_back, self._give_back = self._give_back, None
        if give_back is not None:
            give_back(self.slot)

    def taken(self) -> None:
        """Marks the arena as consumed by a write (its slab now holds a message)."""
        self._give_back = None
