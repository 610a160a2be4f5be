"""`chute.device`: batches on accelerators and many JAX processes as one loader.

The names of `chute_device`, with `device_put` also taking chute datasets (it then
returns an `IterDataset`, like `ds.to_device(...)`). Importing this module imports jax;
`import chute` alone does not.

Example:
    >>> import chute, jax
    >>> ds = chute.MapDataset.range(4).batch(2)
    >>> [b.tolist() for b in chute.device.device_put(ds, jax.devices()[0])]
    [[0, 1], [2, 3]]
"""

from __future__ import annotations

from typing import Any

import chute_device
from chute_device import DevicePutIter as DevicePutIter
from chute_device import LockstepError as LockstepError
from chute_device import RowSplit as RowSplit
from chute_device import ShardByJaxProcess as ShardByJaxProcess
from chute_device import host_rows as host_rows
from chute_device import put_batch as put_batch
from chute_device import row_split as row_split
from chute_device import shard_options_for_mesh as shard_options_for_mesh

from ._iter_dataset import IterDataset
from ._map_dataset import MapDataset

__all__ = [
    "DevicePutIter",
    "LockstepError",
    "RowSplit",
    "ShardByJaxProcess",
    "device_put",
    "host_rows",
    "put_batch",
    "row_split",
    "shard_options_for_mesh",
]


def device_put(
    ds: Any,
    device: Any,
    cpu_buffer_size: int = 2,
    device_buffer_size: int = 2,
    *,
    lockstep: bool | None = None,
) -> Any:
    """Batches of `ds` on `device`, prepared on the host and transferred ahead of use.

    A `MapDataset` or `IterDataset` gives an `IterDataset` (`ds.to_device(...)`);
    a checkpointable iterator gives a `chute_device.DevicePutIter`.

    Example:
        >>> import chute, jax
        >>> ds = chute.MapDataset.range(2).batch(2).to_iter_dataset()
        >>> type(device_put(ds, jax.devices()[0])).__name__
        'IterDataset'
    """
    options: dict[str, Any] = {
        "cpu_buffer_size": cpu_buffer_size,
        "device_buffer_size": device_buffer_size,
        "lockstep": lockstep,
    }
    if isinstance(ds, MapDataset | IterDataset):
        return ds.to_device(device, **options)
    return chute_device.device_put(ds, device, **options)
