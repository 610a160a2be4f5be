"""`chute.grain.samplers`: Grain 0.2.18's `grain.samplers` names.

Example:
    >>> import chute.grain as grain
    >>> [m.record_key for m in grain.samplers.SequentialSampler(3)]
    [0, 1, 2]
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from chute_core import RecordMetadata

from ._samplers import IndexSampler, SequentialSampler

__all__ = ["IndexSampler", "Sampler", "SequentialSampler"]


@runtime_checkable
class Sampler(Protocol):
    """What a `DataLoader` asks of a sampler: the metadata of the record at each index.

    Example:
        >>> isinstance(IndexSampler(4), Sampler)
        True
    """

    def __getitem__(self, index: int) -> RecordMetadata:
        """The record at position `index` of the stream (raises `IndexError` past its end)."""
        ...
