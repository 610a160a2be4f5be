"""`chute.grain.experimental`: Grain 0.2.18's `grain.experimental` names that chute honours.

Each dataset class of Grain's is a function here that returns the chute dataset doing
the same (`RepeatIterDataset(ds, 2)` is `ds.repeat(2)`); the differences chute keeps
on purpose are listed on the "Coming from Grain" page.

Example:
    >>> import chute.grain as grain
    >>> ds = grain.MapDataset.range(5).to_iter_dataset()
    >>> list(grain.experimental.LimitIterDataset(grain.experimental.RepeatIterDataset(ds, 2), 7))
    [0, 1, 2, 3, 4, 0, 1]
"""

from __future__ import annotations

from typing import Any

from chute_transforms import FlatMapTransform, MapWithIndexTransform

from .._element_spec import ShapeDtypeStruct
from ..experimental import (
    PerformanceConfig,
    ThreadPrefetchIterDataset,
    WindowShuffleIterDataset,
    device_put,
    pick_performance_config,
)
from ._elastic import ElasticIterator
from ._experimental_ops import (
    CacheIterDataset,
    FlatMapIterDataset,
    FlatMapMapDataset,
    InterleaveIterDataset,
    LimitIterDataset,
    ParquetIterDataset,
    RebatchIterDataset,
    RepeatIterDataset,
    ZipIterDataset,
    ZipMapDataset,
    apply_transformations,
    assert_equal_output_after_checkpoint,
    batch_and_pad,
    get_element_spec,
    multithread_prefetch,
)
from ._next_index import get_next_index, set_next_index
from ._options import DatasetOptions, ExecutionTrackingMode, WithOptionsIterDataset
from ._packing import (
    BestFitPackIterDataset,
    BOSHandling,
    ConcatThenSplitIterDataset,
    FirstFitPackIterDataset,
)
from ._random import RngPool, index_shuffle
from ._window_shuffle import WindowShuffleMapDataset

__all__ = [
    "BOSHandling",
    "BestFitPackIterDataset",
    "CacheIterDataset",
    "ConcatThenSplitIterDataset",
    "DatasetOptions",
    "ElasticIterator",
    "ExecutionTrackingMode",
    "FirstFitPackIterDataset",
    "FlatMapIterDataset",
    "FlatMapMapDataset",
    "FlatMapTransform",
    "InterleaveIterDataset",
    "LimitIterDataset",
    "MapWithIndexTransform",
    "ParquetIterDataset",
    "PerformanceConfig",
    "RebatchIterDataset",
    "RepeatIterDataset",
    "RngPool",
    "ShapeDtypeStruct",
    "TFRecordIterDataset",
    "ThreadPrefetchDatasetIterator",
    "ThreadPrefetchIterDataset",
    "WindowShuffleIterDataset",
    "WindowShuffleMapDataset",
    "WithOptionsIterDataset",
    "ZipIterDataset",
    "ZipMapDataset",
    "apply_transformations",
    "assert_equal_output_after_checkpoint",
    "batch_and_pad",
    "device_put",
    "get_element_spec",
    "get_next_index",
    "index_shuffle",
    "multithread_prefetch",
    "pick_performance_config",
    "set_next_index",
]


def ThreadPrefetchDatasetIterator(parent: Any, prefetch_buffer_size: int) -> Any:
    """An iterator that advances `parent` (an iterator) on a background thread.

    Example:
        >>> import chute
        >>> it = ThreadPrefetchDatasetIterator(iter(chute.MapDataset.range(3).to_iter_dataset()), 2)
        >>> list(it)
        [0, 1, 2]
    """
    from chute_execution import ThreadPrefetchIter

    return ThreadPrefetchIter(parent, prefetch_buffer_size)


def TFRecordIterDataset(path: str) -> Any:
    """The records of the TFRecord file `path`, in order, as `bytes` (Grain's name).

    `MapDataset.source(chute.TFRecordSource(path)).to_iter_dataset()`: every CRC is
    checked, and the state is a record position (Grain keeps a byte offset).

    Example:
        >>> import os, tempfile
        >>> from chute_sources import write_tfrecord
        >>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
        >>> write_tfrecord(path, [b"x", b"yz"])
        2
        >>> list(TFRecordIterDataset(path))
        [b'x', b'yz']
    """
    from chute_sources import TFRecordSource

    from ._datasets import MapDataset

    return MapDataset.source(TFRecordSource(path)).to_iter_dataset()
