"""`chute.grain.python` (`from chute.grain import python as pygrain`): Grain's `grain.python`.

Grain 0.2.18's `grain.python` module gathers the DataLoader API (sources, samplers,
operations, options, checkpoint handlers) and the dataset API under one name; this
module gives the same names on chute's classes.

Example:
    >>> from chute.grain import python as pygrain
    >>> loader = pygrain.DataLoader(
    ...     data_source=pygrain.RangeDataSource(0, 6, 1),
    ...     sampler=pygrain.SequentialSampler(6),
    ...     operations=[pygrain.MapOperation(lambda x: x * 10), pygrain.BatchOperation(3)])
    >>> [b.tolist() for b in loader]
    [[0, 10, 20], [30, 40, 50]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chute_core import RandomAccessDataSource, RecordMetadata
from chute_execution import ReadOptions
from chute_samplers import IterNode, NoSharding, ShardOptions
from chute_transforms import BatchTransform as Batch
from chute_transforms import (
    FilterTransform,
    MapTransform,
    MapWithIndexTransform,
    RandomMapTransform,
)

from .._subclassing import DatasetIterator
from . import experimental
from ._config import config
from ._datasets import IterDataset, MapDataset
from ._lazy import lazy_names
from ._legacy import (
    BatchOperation,
    DatasetSelectionMap,
    FilterOperation,
    MapOperation,
    RandomMapOperation,
    Record,
    load,
)
from ._loader import DataLoader
from ._samplers import IndexSampler, SequentialSampler
from .constants import DATASET_INDEX, EPOCH, INDEX, META_FEATURES, RECORD, RECORD_KEY, SEED
from .multiprocessing import MultiprocessingOptions
from .samplers import Sampler
from .sources import RangeDataSource, SharedMemoryDataSource
from .transforms import Transformation, Transformations

if TYPE_CHECKING:
    from chute_checkpoint import CheckpointHandler as PyGrainCheckpointHandler
    from chute_checkpoint import CheckpointRestore as PyGrainCheckpointRestore
    from chute_checkpoint import CheckpointSave as PyGrainCheckpointSave
    from chute_device import ShardByJaxProcess
    from chute_sources import ArrayRecordSource as ArrayRecordDataSource

__getattr__ = lazy_names(
    __name__,
    {
        "ArrayRecordDataSource": ("chute_sources", "ArrayRecordSource"),
        "PyGrainCheckpointHandler": ("chute_checkpoint", "CheckpointHandler"),
        "PyGrainCheckpointRestore": ("chute_checkpoint", "CheckpointRestore"),
        "PyGrainCheckpointSave": ("chute_checkpoint", "CheckpointSave"),
        "ShardByJaxProcess": ("chute_device", "ShardByJaxProcess"),
    },
)

InMemoryDataSource = SharedMemoryDataSource
"""Grain's other name for `SharedMemoryDataSource`."""
PyGrainDatasetIterator = IterNode
"""The base class of a `DataLoader`'s iterators (all chute iterators are `IterNode`s)."""

__all__ = [
    "ArrayRecordDataSource",
    "Batch",
    "BatchOperation",
    "DATASET_INDEX",
    "DataLoader",
    "DatasetIterator",
    "DatasetSelectionMap",
    "EPOCH",
    "FilterOperation",
    "FilterTransform",
    "INDEX",
    "InMemoryDataSource",
    "IndexSampler",
    "IterDataset",
    "META_FEATURES",
    "MapDataset",
    "MapOperation",
    "MapTransform",
    "MapWithIndexTransform",
    "MultiprocessingOptions",
    "NoSharding",
    "PyGrainCheckpointHandler",
    "PyGrainCheckpointRestore",
    "PyGrainCheckpointSave",
    "PyGrainDatasetIterator",
    "RECORD",
    "RECORD_KEY",
    "RandomAccessDataSource",
    "RandomMapOperation",
    "RandomMapTransform",
    "RangeDataSource",
    "ReadOptions",
    "Record",
    "RecordMetadata",
    "SEED",
    "Sampler",
    "SequentialSampler",
    "ShardByJaxProcess",
    "ShardOptions",
    "Transformation",
    "Transformations",
    "config",
    "experimental",
    "load",
]
