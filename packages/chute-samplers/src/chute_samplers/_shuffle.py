"""`ShuffleMap`: a global shuffle of a random-access dataset, new in every epoch."""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from chute_core import RandomAccessDataSource, StageTraits, declare_op
from chute_core.internal import check_dataset, check_seed, distinct

from ._node import (
    EpochArray,
    PositionArray,
    PositionMap,
    consecutive,
    node_epoch_length,
)
from ._permutation import Permutation

__all__ = ["SHUFFLE", "ShuffleMap"]

T = TypeVar("T")

_CACHE_SIZE = 16
_WINDOW = 1 << 14  # The most permuted positions computed ahead for an in-order reader.
_AHEAD = 64  # A window holds this many reads of the size that asked for it.


class ShuffleMap(PositionMap[T]):
    """Permutes `parent` with a `Permutation` keyed by `(seed, epoch)`.

    The permutation is never materialised (O(1) memory, O(1) per position). The parent
    is shuffled one epoch block at a time (see `MapNode.epoch_length`): over a
    `RepeatMap`, each pass gets its own permutation and no element moves to another
    pass, so `ShuffleMap(RepeatMap(x, n), s)` equals `RepeatMap(ShuffleMap(x, s), n)`;
    under a `RepeatMap`, each pass is a new epoch and so a new permutation.

    A reader going through the positions in order in small reads (up to 1024, e.g.
    `SequentialIter`'s of large elements) gets them from a window computed ahead in one
    vectorised call: a read that continues where the last one ended, outside the
    window, computes the next `64 * its size` positions (at most 16384), which the next
    reads slice. Other reads compute what they ask for. The values are the same either
    way.

    Args:
        parent: a node, a source, or any sequence.
        seed: an int in `[0, 2**64)`; give each shuffle in a pipeline its own seed.

    Example:
        >>> node = ShuffleMap(range(6), seed=42)
        >>> sorted(node) == list(range(6)), list(node) != list(range(6))
        (True, True)
        >>> node[2] == list(node)[2]
        True
    """

    def __init__(self, parent: RandomAccessDataSource[T], seed: int) -> None:
        check_dataset(parent, "ShuffleMap")
        self._parent = parent
        self._seed = check_seed(seed, "ShuffleMap")
        self._length = len(parent)
        block = node_epoch_length(parent)
        self._block = block if 0 < block < self._length else self._length
        self._blocks = -(-self._length // self._block) if self._length else 0
        self._permutations: dict[tuple[int, int], Permutation] = {}
        self._window: tuple[Permutation, int, np.ndarray] | None = None  # (perm, first, values)
        self._follows = -1  # Where the last in-order read ended (its next position).

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)  # Caches are rebuilt where the copy is read.
        state.update(_permutations={}, _window=None, _follows=-1)
        return state

    @property
    def parent(self) -> RandomAccessDataSource[T]:
        """The shuffled dataset."""
        return self._parent

    @property
    def seed(self) -> int:
        """The seed."""
        return self._seed

    def __len__(self) -> int:
        return self._length

    @property
    def epoch_length(self) -> int:
        """The parent's epoch length: shuffling keeps the epoch blocks in place."""
        return self._block

    def _permutation(self, size: int, epoch: int) -> Permutation:
        perm = self._permutations.get((size, epoch))
        if perm is None:
            if len(self._permutations) >= _CACHE_SIZE:
                self._permutations.clear()
            perm = self._permutations[size, epoch] = Permutation(size, self._seed, epoch)
        return perm

    def parent_positions(
        self, positions: PositionArray, epochs: EpochArray
    ) -> tuple[RandomAccessDataSource[T], PositionArray, EpochArray]:
        if self._blocks <= 1:
            blocks = np.zeros_like(positions)
            within = positions
            keys = epochs
        else:
            blocks, within = np.divmod(positions, self._block)
            keys = epochs * np.uint64(self._blocks) + blocks.astype(np.uint64)
        shuffled = np.empty_like(positions)
        unique_keys = distinct(keys)
        for key in unique_keys.tolist():
            mask = None if unique_keys.size == 1 else keys == key
            block = int(blocks[0] if mask is None else blocks[mask][0])
            start = block * self._block
            size = min(self._block, self._length - start)
            perm = self._permutation(size, key)
            if mask is None:
                shuffled = start + self._take(perm, within)
            else:
                shuffled[mask] = start + perm.take(within[mask])
        return self._parent, shuffled, epochs

    def _take(self, perm: Permutation, within: PositionArray) -> PositionArray:
        """`perm.take(within)`, from the window when an in-order reader asks."""
        count = within.size
        if count == 0 or count * _AHEAD > _WINDOW * 4 or not consecutive(within):
            return perm.take(within)  # Large or scattered reads: computed as asked.
        first = int(within[0])
        window = self._window  # One read of a tuple: safe beside other threads.
        if window is not None and window[0] is perm:
            offset = first - window[1]
            if offset >= 0 and offset + count <= len(window[2]):
                self._follows = first + count
                return window[2][offset : offset + count]
        if first != self._follows:  # Not (yet) an in-order reader: no window.
            self._follows = first + count
            return perm.take(within)
        stop = min(first + max(count, min(_WINDOW, count * _AHEAD)), perm.size)
        values = perm.take(np.arange(first, stop, dtype=np.int64))
        self._window = (perm, first, values)
        self._follows = first + count
        return values[:count]

    def __repr__(self) -> str:
        return f"ShuffleMap({self._parent!r}, seed={self._seed})"


SHUFFLE = declare_op("shuffle", StageTraits(random=True, keeps_length=True), map_node=ShuffleMap)
"""The op's declaration (see `chute_core.declare_op`)."""
