"""Record metadata: what a sampler says about the next record to read."""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["RecordMetadata"]


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
