"""Grain's DataLoader-era names: operations, samplers, records, `load`.

Grain's legacy operations (`MapOperation(fn)`, `FilterOperation(fn)`,
`RandomMapOperation(fn)`, `BatchOperation(batch_size)`) become chute transforms, which
`chute.DataLoader(operations=[...])` runs; `SequentialSampler` is an `IndexSampler` that
reads each record once, in order; `load` builds a `DataLoader` from a source and
options, as Grain's does.
"""

from __future__ import annotations

import abc
import dataclasses
import operator
from collections.abc import Callable, Sequence
from typing import Any, SupportsIndex

import numpy as np

from chute_core import RecordMetadata
from chute_execution import ReadOptions
from chute_samplers import NoSharding, ShardOptions
from chute_transforms import BatchTransform, FilterTransform, MapTransform, RandomMapTransform

from ._loader import DataLoader
from ._samplers import IndexSampler

__all__ = [
    "BatchOperation",
    "DatasetSelectionMap",
    "FilterOperation",
    "MapOperation",
    "RandomMapOperation",
    "Record",
    "load",
]


class MapOperation(MapTransform[Any, Any]):
    """`map_function(element)` for each element (Grain's legacy `MapOperation`).

    Example:
        >>> MapOperation(abs).map(-3)
        3
    """

    def __init__(self, map_function: Callable[[Any], Any]) -> None:
        self.map_function = map_function

    def map(self, element: Any) -> Any:
        return self.map_function(element)


class RandomMapOperation(RandomMapTransform[Any, Any]):
    """`random_map_function(element, rng)` (Grain's legacy `RandomMapOperation`).

    Example:
        >>> import numpy as np
        >>> RandomMapOperation(lambda x, rng: x).random_map(1, np.random.default_rng(0))
        1
    """

    def __init__(self, random_map_function: Callable[[Any, np.random.Generator], Any]) -> None:
        self.random_map_function = random_map_function

    def random_map(self, element: Any, rng: np.random.Generator) -> Any:
        return self.random_map_function(element, rng)


class FilterOperation(FilterTransform[Any]):
    """Keeps elements for which `condition_function(element)` is true (legacy name).

    Example:
        >>> FilterOperation(lambda x: x > 0).filter(2)
        True
    """

    def __init__(self, condition_function: Callable[[Any], bool]) -> None:
        self.condition_function = condition_function

    def filter(self, element: Any) -> bool:
        return bool(self.condition_function(element))


def BatchOperation(
    batch_size: int,
    drop_remainder: bool = False,
    batch_fn: Callable[[Sequence[Any]], Any] | None = None,
) -> BatchTransform:
    """Batches of `batch_size` elements (Grain's legacy `BatchOperation`).

    Example:
        >>> BatchOperation(4, drop_remainder=True)
        BatchTransform(batch_size=4, drop_remainder=True, pad=False, batch_fn=None)
    """
    return BatchTransform(batch_size, drop_remainder=drop_remainder, batch_fn=batch_fn)


@dataclasses.dataclass
class Record:
    """A record and its metadata, as Grain's legacy operations saw them.

    Example:
        >>> Record(RecordMetadata(index=0, record_key=2), "text").data
        'text'
    """

    metadata: RecordMetadata
    data: Any


class DatasetSelectionMap(abc.ABC):
    """Which dataset, and which of its elements, each position of a mixture holds.

    Implement `__len__` and `__getitem__(index) -> (dataset_index, index_in_dataset)`.
    `select(datasets)` builds the mixture as a `MapDataset`.

    Example:
        >>> import chute
        >>> class Alternate(DatasetSelectionMap):
        ...     def __len__(self):
        ...         return 4
        ...
        ...     def __getitem__(self, index):
        ...         return index % 2, index // 2
        >>> a, b = chute.MapDataset.source(["a0", "a1"]), chute.MapDataset.source(["b0", "b1"])
        >>> list(Alternate().select([a, b]))
        ['a0', 'b0', 'a1', 'b1']
    """

    @abc.abstractmethod
    def __len__(self) -> int:
        """The number of positions of the mixture."""

    @abc.abstractmethod
    def __getitem__(self, index: int) -> tuple[int, int]:
        """`(dataset_index, index_in_dataset)` of position `index`."""

    def select(self, datasets: Sequence[Any]) -> Any:
        """The mixture of `datasets` this map describes, as a `grain.MapDataset`."""
        from ._datasets import MapDataset

        return MapDataset.source(_Selected(tuple(datasets), self))


class _Selected:
    """Random access to `datasets` through a `DatasetSelectionMap` (picklable)."""

    def __init__(self, datasets: tuple[Any, ...], selection: DatasetSelectionMap) -> None:
        self.datasets, self.selection = datasets, selection

    def __len__(self) -> int:
        return len(self.selection)

    def __getitem__(self, index: SupportsIndex) -> Any:
        which, position = self.selection[operator.index(index)]
        return self.datasets[which][position]


def load(
    source: Any,
    *,
    num_epochs: int | None = None,
    shuffle: bool = False,
    seed: int | None = None,
    shard_options: ShardOptions | None = None,
    transformations: Sequence[Any] = (),
    batch_size: int | None = None,
    drop_remainder: bool = False,
    worker_count: int | None = 0,
    read_options: ReadOptions | None = None,
) -> DataLoader:
    """A `DataLoader` over `source` with a sampler and transforms built from the options.

    Grain's `grain.load`: `num_epochs=None` repeats forever; `batch_size` appends a
    batch after `transformations`.

    Example:
        >>> import chute
        >>> loader = load(chute.RangeSource(5), num_epochs=1, batch_size=2)
        >>> [b.tolist() for b in loader]
        [[0, 1], [2, 3], [4]]
    """
    sampler = IndexSampler(
        len(source),
        shard_options=NoSharding() if shard_options is None else shard_options,
        shuffle=shuffle,
        num_epochs=num_epochs,
        seed=seed,
    )
    operations = list(transformations)
    if batch_size is not None:
        operations.append(BatchTransform(batch_size, drop_remainder=drop_remainder))
    return DataLoader(
        data_source=source,
        sampler=sampler,
        operations=operations,
        worker_count=0 if worker_count is None else worker_count,
        read_options=read_options,
    )
