"""chute's device layer: batches onto accelerators, many JAX processes as one loader.

The only layer below the meta-package that imports jax, and only once one of its
names is used: `import chute_device` alone declares its op, `to_device`. `device_put` keeps host
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

from typing import TYPE_CHECKING

from chute_core.internal import lazy_attributes

from ._op import TO_DEVICE

if TYPE_CHECKING:
    from ._api import DevicePutIterable, device_put
    from ._device_put import DevicePutIter, LockstepError
    from ._global_batch import put_batch
    from ._sharding import (
        RowSplit,
        ShardByJaxProcess,
        host_rows,
        row_split,
        shard_options_for_mesh,
    )

# jax loads with the first of these names used: importing chute_device alone (which
# declares `to_device`) does not import it.
_LAZY = {
    "DevicePutIterable": "._api",
    "device_put": "._api",
    "DevicePutIter": "._device_put",
    "LockstepError": "._device_put",
    "put_batch": "._global_batch",
    "RowSplit": "._sharding",
    "ShardByJaxProcess": "._sharding",
    "host_rows": "._sharding",
    "row_split": "._sharding",
    "shard_options_for_mesh": "._sharding",
}
__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = [
    "DevicePutIter",
    "DevicePutIterable",
    "LockstepError",
    "RowSplit",
    "ShardByJaxProcess",
    "TO_DEVICE",
    "device_put",
    "host_rows",
    "put_batch",
    "row_split",
    "shard_options_for_mesh",
]
