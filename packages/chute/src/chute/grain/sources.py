"""`chute.grain.sources`: Grain 0.2.18's `grain.sources` names, on chute's sources.

Example:
    >>> import chute.grain as grain
    >>> source = grain.sources.RangeDataSource(0, 4, 2)
    >>> len(source), source[1]
    (2, 2)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chute_core import RandomAccessDataSource
from chute_sources import RangeSource as RangeDataSource
from chute_sources import SharedMemorySource as SharedMemoryDataSource

from ._lazy import lazy_names

if TYPE_CHECKING:
    from chute_sources import ArrayRecordSource as ArrayRecordDataSource

__getattr__ = lazy_names(
    __name__, {"ArrayRecordDataSource": ("chute_sources", "ArrayRecordSource")}
)

__all__ = [
    "ArrayRecordDataSource",
    "RandomAccessDataSource",
    "RangeDataSource",
    "SharedMemoryDataSource",
]
