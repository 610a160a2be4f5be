"""Grain's operations on `MapDataset`: `limit`, `cache`, `unbatch`, `zip`, `concatenate`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from chute_samplers import SliceMap
from chute_sources import RandomAccessDataSource

from ._args import check_int
from ._pipeline import Stage, stage

if TYPE_CHECKING:
    from ._map_dataset import MapDataset

__all__ = ["GrainMapMixin"]

T = TypeVar("T")


class GrainMapMixin(Generic[T]):
    """The random-access operations a Grain user reaches for, each one node."""

    __slots__ = ()
    _node: RandomAccessDataSource[T]

    def _then(self, node: RandomAccessDataSource[Any], item: Stage) -> MapDataset[Any]:
        raise NotImplementedError  # MapDataset's.

    def limit(self, count: int) -> MapDataset[T]:
        """The first `count` positions (all of them if there are fewer): `ds[:count]`.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(10).limit(3)
            >>> list(ds), len(chute.MapDataset.range(2).limit(3))
            ([0, 1, 2], 2)
        """
        count = check_int(count, "count", "MapDataset.limit")
        return self._then(SliceMap(self._node, slice(0, count)), stage("limit", count=count))
