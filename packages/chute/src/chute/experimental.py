"""Grain's `grain.experimental` names, for the guides' examples with `import chute`.

Each is a thin spelling of a chute method: `ThreadPrefetchIterDataset(ds, n)` is
`ds.prefetch(n)`, `WindowShuffleIterDataset(ds, window_size, seed)` is
`ds.window_shuffle(window_size, seed)`, `InterleaveIterDataset(datasets, cycle_length)`
is `IterDataset.interleave(datasets, cycle_length)`, and `ParquetIterDataset(path)` is
a stream of a Parquet file's rows.

Example:
    >>> import chute
    >>> ds = chute.MapDataset.range(4).to_iter_dataset()
    >>> list(chute.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=2))
    [0, 1, 2, 3]
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

from chute_execution import PerformanceConfig as PerformanceConfig
from chute_execution import pick_performance_config as pick_performance_config

from ._iter_dataset import IterDataset
from ._map_dataset import MapDataset

__all__ = [
    "InterleaveIterDataset",
    "ParquetIterDataset",
    "PerformanceConfig",
    "ThreadPrefetchIterDataset",
    "WindowShuffleIterDataset",
    "device_put",
    "pick_performance_config",
]


def ThreadPrefetchIterDataset(
    parent: IterDataset[Any], prefetch_buffer_size: int
) -> IterDataset[Any]:
    """`parent.prefetch(prefetch_buffer_size)`."""
    return parent.prefetch(prefetch_buffer_size)


def WindowShuffleIterDataset(
    parent: IterDataset[Any], window_size: int, seed: int
) -> IterDataset[Any]:
    """`parent.window_shuffle(window_size, seed)`."""
    return parent.window_shuffle(window_size, seed)


def InterleaveIterDataset(
    datasets: Sequence[Any] | MapDataset[Any], cycle_length: int
) -> IterDataset[Any]:
    """`IterDataset.interleave(datasets, cycle_length)`."""
    return IterDataset.interleave(list(datasets), cycle_length)


def ParquetIterDataset(path: str | os.PathLike[str]) -> IterDataset[Any]:
    """The rows of a Parquet file (or files, or a glob) as a checkpointable stream."""
    from chute_sources import ParquetStream  # pyarrow loads on first use.

    return IterDataset.source(functools.partial(ParquetStream, path))


def device_put(ds: Any, device: Any, cpu_buffer_size: int = 2, device_buffer_size: int = 2) -> Any:
    """`chute.device.device_put(ds, device, cpu_buffer_size, device_buffer_size)`."""
    from .device import device_put as put  # jax loads only here.

    return put(ds, device, cpu_buffer_size, device_buffer_size)
