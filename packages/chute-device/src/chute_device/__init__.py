"""chute's device layer: batches onto accelerators, many JAX processes as one loader.

The only layer below the meta-package that imports jax. `device_put` keeps host
batches and device transfers ahead of the training step; `host_rows` and `row_split`
say which rows of a global batch this process must load for a sharding;
`ShardByJaxProcess` and `shard_options_for_mesh` give each process its share of a
dataset; `put_batch` assembles per-process rows into global `jax.Array`s.

Example:
    >>> import jax, numpy as np
    >>> import chute_device
    >>> from chute_samplers import SequentialIter
    >>> it = chute_device.device_put(SequentialIter([np.arange(4)]), jax.devices()[0])
    >>> next(it).tolist()
    [0, 1, 2, 3]
"""

from ._api import DevicePutIterable, device_put
from ._device_put import DevicePutIter, LockstepError
from ._global_batch import put_batch
from ._sharding import RowSplit, ShardByJaxProcess, host_rows, row_split, shard_options_for_mesh

__all__ = [
    "DevicePutIter",
    "DevicePutIterable",
    "LockstepError",
    "RowSplit",
    "ShardByJaxProcess",
    "device_put",
    "host_rows",
    "put_batch",
    "row_split",
    "shard_options_for_mesh",
]
