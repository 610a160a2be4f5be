"""`TakeMap`: the elements of a dataset at given positions, as NumPy's `take` does.

`ds.slice([7, 0, 7])`, `ds[np.array([...])]` or `ds.slice(other_ds)` (a dataset of
integers) select positions by index rather than by a range: any order, repeats and
negative indices (counted from the end) allowed. A boolean mask of the dataset's length
selects where it is true. Like a slice, the selection is a fixed subset: the parent is
read in epoch 0 whatever epoch the selection is read in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from chute_core import (
    ArgumentTypeError,
    InvalidArgumentError,
    RandomAccessDataSource,
    RecordIndexError,
    StageTraits,
    declare_op,
)
from chute_core.internal import check_dataset

from ._node import EpochArray, MapNode, PositionArray, PositionMap, fetch

__all__ = ["TAKE", "TakeMap"]

T = TypeVar("T")


def _positions(indices: Any, length: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """`indices` (integers or a boolean mask) as in-range non-negative positions."""
    array = np.asarray(indices)
    if array.dtype == np.bool_:
        if array.shape != (length,):
            raise InvalidArgumentError(
                f"TakeMap: a boolean mask must have the dataset's length {length}, got "
                f"shape {array.shape}."
            )
        return np.flatnonzero(array).astype(np.int64)
    if array.size == 0:
        return np.zeros(0, np.int64)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise ArgumentTypeError(
            f"TakeMap: indices must be a 1-d sequence of integers (or a boolean mask), got "
            f"{array.dtype} of shape {array.shape}."
        )
    return _in_range(array.astype(np.int64), length, "index")


def _in_range(
    array: np.ndarray[Any, Any], length: int, what: str
) -> np.ndarray[Any, np.dtype[np.int64]]:
    outside = (array < -length) | (array >= length)
    if outside.any():
        first = int(array[np.argmax(outside)])
        raise RecordIndexError(
            f"TakeMap: {what} {first} is out of range [-{length}, {length}) of the dataset."
        )
    return np.asarray(np.where(array < 0, array + length, array), dtype=np.int64)


class TakeMap(PositionMap[T]):
    """The elements `parent[i]` for each `i` of `indices`, in that order.

    Args:
        parent: a node, a source, or any sequence.
        indices: a 1-d sequence or array of integers (negative ones count from the
            end), a boolean mask of the parent's length, or a random-access dataset of
            integers (read as the selection is read, and checked then).

    Raises:
        ArgumentTypeError: indices that are not integers, or not 1-d.
        InvalidArgumentError: a mask of another length.
        RecordIndexError: an index out of range (for a dataset of indices: when read).

    Example:
        >>> node = TakeMap(range(10), [7, 0, -1, 7])
        >>> list(node), len(node)
        ([7, 0, 9, 7], 4)
        >>> list(TakeMap(range(4), [True, False, False, True]))
        [0, 3]
    """

    def __init__(self, parent: RandomAccessDataSource[T], indices: Any) -> None:
        check_dataset(parent, "TakeMap")
        self._parent: RandomAccessDataSource[T] = parent
        self._length = len(parent)
        self._lazy: RandomAccessDataSource[Any] | None = None
        self._array: np.ndarray[Any, np.dtype[np.int64]] | None = None
        is_dataset = isinstance(indices, MapNode) or (
            hasattr(indices, "__getitem__")
            and hasattr(indices, "__len__")
            and not isinstance(indices, Sequence | np.ndarray)
        )
        if is_dataset:
            self._lazy = indices
        elif isinstance(indices, str | bytes) or not hasattr(indices, "__len__"):
            raise ArgumentTypeError(
                f"TakeMap: expected a sequence of integers, a boolean mask or a dataset of "
                f"integers, got {type(indices).__name__} {indices!r}."
            )
        else:
            self._array = _positions(indices, self._length)

    @property
    def parent(self) -> RandomAccessDataSource[T]:
        """The dataset the elements are taken from."""
        return self._parent

    def describe_indices(self) -> str:
        """The selection in a few words, for the pipeline's description (a fingerprint).

        Example:
            >>> TakeMap(range(10), [7, 0]).describe_indices()
            '2 positions, sha1 c8a674e2f71a'
        """
        if self._array is None:
            return f"the dataset {self._lazy!r}"
        digest = hashlib.sha1(self._array.tobytes()).hexdigest()[:12]
        return f"{len(self._array)} positions, sha1 {digest}"

    def __len__(self) -> int:
        if self._array is not None:
            return len(self._array)
        assert self._lazy is not None
        return len(self._lazy)

    def parent_positions(
        self, positions: PositionArray, epochs: EpochArray
    ) -> tuple[RandomAccessDataSource[T], PositionArray, EpochArray]:
        if self._array is not None:
            taken = self._array[positions]
        else:
            assert self._lazy is not None
            read = fetch(self._lazy, positions, np.zeros_like(epochs))
            try:
                values = np.asarray(read, dtype=np.int64)
                exact = np.array_equal(values, np.asarray(read))
            except (TypeError, ValueError, OverflowError):
                exact = False
            if not exact or values.shape != positions.shape:
                raise ArgumentTypeError(
                    f"TakeMap: the dataset of indices holds {read[:3]!r}...: integers "
                    "expected (one per position)."
                )
            taken = _in_range(values, self._length, "index (read from the dataset)")
        return self._parent, taken, np.zeros_like(epochs)

    def __repr__(self) -> str:
        return f"TakeMap({self._parent!r}, {self.describe_indices()})"


TAKE = declare_op("take", StageTraits(), map_node=TakeMap)
"""The op's declaration (see `chute_core.declare_op`)."""
