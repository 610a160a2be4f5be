"""`chute.grain.transforms`: Grain 0.2.18's `grain.transforms` names, on chute's classes.

Example:
    >>> import chute.grain as grain
    >>> class Double(grain.transforms.Map):
    ...     def map(self, element):
    ...         return 2 * element
    >>> list(grain.MapDataset.range(3).apply([Double(), grain.transforms.Batch(2)]))[0].tolist()
    [0, 2]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

from chute_transforms import BatchTransform as Batch
from chute_transforms import FilterTransform as Filter
from chute_transforms import FlatMapTransform as FlatMap
from chute_transforms import MapTransform as Map
from chute_transforms import MapWithIndexTransform as MapWithIndex
from chute_transforms import RandomMapTransform as RandomMap

from ._legacy import DatasetSelectionMap

__all__ = [
    "Batch",
    "DatasetSelectionMap",
    "Filter",
    "FlatMap",
    "Map",
    "MapWithIndex",
    "RandomMap",
    "Transformation",
    "Transformations",
]

Transformation = Union[  # noqa: UP007
    Batch,
    Map[Any, Any],
    RandomMap[Any, Any],
    Filter[Any],
    FlatMap[Any, Any],
    MapWithIndex[Any, Any],
]
"""Any one transform."""
Transformations = Sequence[Transformation]
"""A list of transforms (`apply`, `DataLoader(operations=...)`)."""
