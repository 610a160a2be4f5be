"""Where shard `index` of `count` reads: a stride of the whole stream, or of each epoch.

A `.shard(i, n)` stage takes the stride `i, i + n, ...` of the whole stream; an
`IndexSampler` (a `chute.DataLoader`'s) takes it of each epoch of `epoch` records, so
position `p` of its shard is record `(p % L) * n + i` of epoch `p // L`, `L` being the
shard's records per epoch. Resharding counts the global positions either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "first_position",
    "has_records",
    "residue",
    "shard_global",
    "shard_globals",
    "shard_locals",
]


def _epoch_length(index: int, count: int, epoch: int) -> int:
    """How many records of an epoch of `epoch` shard `index` of `count` reads."""
    return len(range(index, epoch, count))


def shard_globals(local: np.ndarray, index: int, count: int, epoch: int = 0) -> np.ndarray:
    """The global positions of positions `local` of shard `index` of `count`.

    A stride of the whole stream (`epoch` 0), or of each epoch of `epoch` records.

    Example:
        >>> shard_globals(np.arange(4), 1, 3).tolist()
        [1, 4, 7, 10]
        >>> shard_globals(np.arange(4), 1, 3, epoch=5).tolist()  # Records 1 and 4 of each 5.
        [1, 4, 6, 9]
    """
    local = np.asarray(local, dtype=np.int64)
    if not epoch:
        return np.asarray(index + count * local, dtype=np.int64)
    epochs, within = np.divmod(local, max(1, _epoch_length(index, count, epoch)))
    return np.asarray(epochs * epoch + within * count + index, dtype=np.int64)


def shard_locals(globals_: np.ndarray, index: int, count: int, epoch: int) -> np.ndarray:
    """The shard's positions of its global positions `globals_` (`shard_globals` inverted).

    Example:
        >>> shard_locals(np.array([1, 4, 6, 9]), 1, 3, epoch=5).tolist()
        [0, 1, 2, 3]
    """
    if not epoch:
        return np.asarray((globals_ - index) // count, dtype=np.int64)
    epochs, within = np.divmod(globals_, epoch)
    length = _epoch_length(index, count, epoch)
    return np.asarray(epochs * length + (within - index) // count, dtype=np.int64)


def shard_global(position: int, index: int, count: int, epoch: int = 0) -> int:
    """The global position of `position` of shard `index` of `count` (exact Python ints).

    Example:
        >>> shard_global(3, 1, 3), shard_global(3, 1, 3, epoch=5)
        (10, 9)
    """
    if not epoch:
        return index + count * position
    epochs, within = divmod(position, max(1, _epoch_length(index, count, epoch)))
    return epochs * epoch + within * count + index


def has_records(index: int, count: int, epoch: int) -> bool:
    """Whether shard `index` of `count` reads any record of an epoch (always, with no epoch).

    Example:
        >>> has_records(3, 4, 0), has_records(3, 4, 3)
        (True, False)
    """
    return not epoch or index < epoch


def residue(global_position: Any, n: int, epoch: int = 0) -> Any:
    """The shard of `n` that reads `global_position` (an int or an array).

    Example:
        >>> residue(7, 3), residue(7, 3, epoch=5)  # Record 2 of epoch 1: shard 2 of 3.
        (1, 2)
    """
    return global_position % n if not epoch else (global_position % epoch) % n


def first_position(at: int, index: int, count: int, epoch: int = 0) -> int:
    """The first position of shard `index` of `count` whose global position is `>= at`.

    Example:
        >>> first_position(7, 1, 3), first_position(7, 1, 3, epoch=5)
        (2, 3)
    """
    if not epoch:
        return max(0, -(-(at - index) // count))
    epochs, within = divmod(at, epoch)
    return epochs * _epoch_length(index, count, epoch) + len(range(index, within, count))
