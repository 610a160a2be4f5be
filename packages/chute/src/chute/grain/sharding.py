"""`chute.grain.sharding`: Grain 0.2.18's `grain.sharding` names.

`ShardByJaxProcess` imports jax, so it is loaded when first used.

Example:
    >>> import chute.grain as grain
    >>> grain.sharding.ShardOptions(shard_index=1, shard_count=2).shard_index
    1
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chute_samplers import NoSharding, ShardOptions

from ._lazy import lazy_names

if TYPE_CHECKING:
    from chute_device import ShardByJaxProcess

__all__ = ["NoSharding", "ShardByJaxProcess", "ShardOptions"]

__getattr__ = lazy_names(__name__, {"ShardByJaxProcess": ("chute_device", "ShardByJaxProcess")})
