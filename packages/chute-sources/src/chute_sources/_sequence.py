"""`SequenceSource`: any Python sequence as a source."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, TypeVar

from ._base import Source

__all__ = ["SequenceSource"]

T = TypeVar("T")


class SequenceSource(Source[T]):
    """Any Python sequence (list, tuple, NumPy array, ...) as a random-access source.

    The sequence is held by reference and pickled with the source: each worker process
    gets its own copy. For large data shared by many workers use `SharedMemorySource`.

    Records that are dicts or lists are returned as shallow copies, so a transform that
    sets a key of its input (`element["image"] = ...`) cannot change what the source
    holds, and the next pass reads the original again (a pure function of position).

    Args:
        sequence: the records.

    Example:
        >>> source = SequenceSource(["cat", "dog", "eel"])
        >>> len(source), source[1], source.__getitems__([2, 0])
        (3, 'dog', ['eel', 'cat'])
    """

    def __init__(self, sequence: Sequence[T]) -> None:
        if not hasattr(sequence, "__len__") or not hasattr(sequence, "__getitem__"):
            raise TypeError(
                f"SequenceSource needs a sequence (len() and indexing), got "
                f"{type(sequence).__name__}; wrap iterables in list(...)."
            )
        self._sequence = sequence

    def __len__(self) -> int:
        return len(self._sequence)

    def _read(self, index: int) -> T:
        return _fresh(self._sequence[index])

    def _read_many(self, indices: Sequence[int]) -> list[T]:
        if len(indices) < 2:
            return [self._read(i) for i in indices]
        # One C-level gather, then one pass over the records' types: per record this is
        # a third of what a Python call to `_fresh` costs, and most records need no copy.
        records: list[T] = list(operator.itemgetter(*indices)(self._sequence))
        kinds = set(map(type, records))
        if dict in kinds or list in kinds:
            return [_fresh(record) for record in records]
        return records

    def _params(self) -> dict[str, Any]:
        return {"type": type(self._sequence).__name__, "len": len(self._sequence)}


def _fresh(record: T) -> T:
    kind = type(record)
    if kind is dict or kind is list:
        return record.copy()  # type: ignore[attr-defined, no-any-return]
    return record
