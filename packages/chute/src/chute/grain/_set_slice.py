"""Grain's `set_slice`: a source dataset cut down to a slice of itself, in place.

Grain's worker processes call `set_slice(slice(worker, None, workers),
sequential_slice=True)` on a pipeline's sources, so that each reads one contiguous
part of the data (Grain's even split: the first `len % workers` parts one longer).
Code written for Grain calls it too. chute's datasets are values (a dataset built
from a source keeps the data it was built with), so `set_slice` changes the source
dataset it is called on and the datasets built from it afterwards.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chute_core import InvalidArgumentError
from chute_samplers import EpochArray, MapNode, PositionArray, ShardOptions, fetch

from ._samplers import even_split

__all__ = ["SlicedInPlace", "set_slice"]


class SlicedInPlace(MapNode[Any]):
    """The positions `window` (a `range`) of `original`, as one node.

    Example:
        >>> node = SlicedInPlace([10, 11, 12, 13], range(1, 4, 2))
        >>> len(node), node.get_many(np.array([0, 1]), np.zeros(2, np.uint64))
        (2, [11, 13])
    """

    def __init__(self, original: Any, window: range) -> None:
        self.original = original
        self.window = window

    def __len__(self) -> int:
        return len(self.window)

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[Any]:
        window = self.window
        inner = window.start + np.asarray(positions, np.int64) * window.step
        return list(fetch(self.original, inner, epochs))


def _worker_part(sl: Any) -> tuple[int, int]:
    """`(worker index, worker count)` from Grain's `slice(index, None, count)`."""
    if not isinstance(sl, slice):
        raise TypeError(f"set_slice: expected a slice, got {type(sl).__name__}.")
    index, count = sl.start, sl.step
    for name, value in (("start (the worker index)", index), ("step (the worker count)", count)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgumentError(
                f"set_slice(sequential_slice=True): the slice's {name} must be an int, got "
                f"{value!r}; pass slice(worker_index, None, worker_count)."
            )
    if not 0 <= index < count:
        raise InvalidArgumentError(
            f"set_slice(sequential_slice=True): worker index {index} is not in "
            f"[0, {count}) (slice(worker_index, None, worker_count))."
        )
    return index, count


def set_slice(ds: Any, original: Any, plain: Any, sl: Any, sequential: bool) -> None:
    """Makes `ds` a slice of the source dataset `plain` (over the node `original`).

    With `sequential`, `sl` is `slice(worker_index, None, worker_count)` and `ds`
    becomes that worker's contiguous part (Grain's `even_split`); otherwise `sl` is any slice of
    the original positions. A second call slices the original again, not the slice.
    The description is the one `plain[window]` has, so fingerprints tell parts apart.
    """
    length = len(original)
    if sequential:
        index, count = _worker_part(sl)
        start, stop = even_split(length, ShardOptions(index, count, drop_remainder=False))
        window, described = range(start, stop), plain[start:stop]
    elif isinstance(sl, slice):
        window, described = range(length)[sl], plain[sl]
    else:
        raise TypeError(f"set_slice: expected a slice, got {type(sl).__name__}.")
    ds._node = SlicedInPlace(original, window)
    ds._stages = described._stages
