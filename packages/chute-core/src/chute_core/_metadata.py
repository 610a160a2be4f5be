"""Record metadata: what a sampler says about the next record to read."""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["DROPPED", "RecordMetadata"]


@dataclasses.dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a record sits in the stream, which record it is, and its randomness.

    Attributes:
        index: the record's position in the stream (0, 1, 2, ...), unique per shard; a
            checkpoint is a position.
        record_key: the key to read from the source.
        rng: a generator derived from (seed, position), or None when nothing is random.

    Example:
        >>> RecordMetadata(index=0, record_key=4)
        RecordMetadata(index=0, record_key=4, rng=None)
    """

    index: int
    record_key: int
    rng: np.random.Generator | None = None

    def __repr__(self) -> str:
        rng = "None"
        if self.rng is not None:
            rng = f"Generator({type(self.rng.bit_generator).__name__})"
        return f"RecordMetadata(index={self.index}, record_key={self.record_key}, rng={rng})"


class _Dropped:
    """The type of `DROPPED` (one instance; pickles to the same instance)."""

    __slots__ = ()
    _instance: _Dropped | None = None

    def __new__(cls) -> _Dropped:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "DROPPED"

    def __reduce__(self) -> str:
        return "DROPPED"

    def __bool__(self) -> bool:
        return False


DROPPED = _Dropped()
"""Marks a position of a random-access dataset that holds no element.

A filter over a random-access dataset keeps its positions (so random access and
checkpoints stay O(1)) and answers `DROPPED` where the predicate said no; iterating
the dataset skips these positions. Test with `element is DROPPED`.

Example:
    >>> DROPPED, bool(DROPPED)
    (DROPPED, False)
"""
