"""The ops of a `MapDataset` that keep its element type: which positions, in what order.

`seed` (from which later random stages derive theirs), `shuffle`, `repeat`, `shard`,
`limit`, and `cache` (elements kept in memory once read). Each returns a new dataset of
the same kind (`Self`).
"""

from __future__ import annotations

from typing import Any, Self, TypeVar

from chute_samplers import CacheMap, RepeatMap, ShardMap, ShardOptions, ShuffleMap, SliceMap

from ._args import check_int, check_optional_int
from ._map_base import MapBase
from ._map_device import mesh_shard
from ._pipeline import check_pipeline_seed, stage

__all__ = ["MapOrderOps"]

T = TypeVar("T")


class MapOrderOps(MapBase[T]):
    """`seed`, `shuffle`, `repeat`, `shard`, `limit`, `cache` (see `MapDataset`)."""

    __slots__ = ()

    def seed(self, seed: int) -> Self:
        """Sets the seed from which later random stages without a `seed` derive theirs.

        Each random stage gets its own seed, derived from this one and its place in
        the pipeline.

        Example:
            >>> from chute import MapDataset
            >>> ds = MapDataset.range(5).seed(0).shuffle()
            >>> list(ds) == list(MapDataset.range(5).seed(0).shuffle())
            True
        """
        checked = check_pipeline_seed(seed)
        return self._construct(self._node, checked, (*self._stages, stage("seed", seed=checked)))

    def shuffle(self, seed: int | None = None) -> Self:
        """A global shuffle; repeated, each epoch is shuffled anew.

        Example:
            >>> from chute import MapDataset
            >>> sorted(MapDataset.range(4).shuffle(seed=1))
            [0, 1, 2, 3]
        """
        chosen = self._stage_seed(seed, "shuffle")
        return self._then(ShuffleMap(self._node, chosen), stage("shuffle", seed=chosen))

    def repeat(self, num_epochs: int | None = None) -> Self:
        """`num_epochs` passes over the dataset (None: endless, length `sys.maxsize`).

        A finite repeat longer than `sys.maxsize` raises `chute.LengthOverflowError`.

        Example:
            >>> from chute import MapDataset
            >>> list(MapDataset.range(2).repeat(3))
            [0, 1, 0, 1, 0, 1]
        """
        num_epochs = check_optional_int(num_epochs, "num_epochs", "MapDataset.repeat")
        return self._then(RepeatMap(self._node, num_epochs), stage("repeat", num_epochs=num_epochs))

    def shard(
        self,
        shard_index: Any,
        shard_count: Any = None,
        drop_remainder: bool = False,
    ) -> Self:
        """This process's share: every `shard_count`-th element from `shard_index`.

        Accepts a `ShardOptions` too, or, as Loadax spells it, `shard(mesh,
        data_axis_name)`: a `jax.sharding.Mesh` and the name of its data axis give this
        JAX process its share (`chute.device.shard_options_for_mesh`; processes that
        share a data-parallel replica read the same share). Shards are disjoint and
        together cover the data.

        Example:
            >>> from chute import MapDataset
            >>> list(MapDataset.range(7).shard(1, 3))
            [1, 4]
        """
        if isinstance(shard_index, ShardOptions):
            options = shard_index
        elif hasattr(shard_index, "axis_names") and hasattr(shard_index, "devices"):
            options = mesh_shard(shard_index, shard_count, drop_remainder)
        else:
            if shard_count is None:
                raise TypeError("shard needs shard_count (or a ShardOptions).")
            shard_index = check_int(shard_index, "shard_index", "MapDataset.shard")
            shard_count = check_int(shard_count, "shard_count", "MapDataset.shard", minimum=1)
            options = ShardOptions(shard_index, shard_count, drop_remainder)
        node = ShardMap(
            self._node, options.shard_index, options.shard_count, options.drop_remainder
        )
        item = stage(
            "shard",
            shard_index=options.shard_index,
            shard_count=options.shard_count,
            drop_remainder=options.drop_remainder,
        )
        return self._then(node, item)

    def limit(self, count: int) -> Self:
        """The first `count` positions (all of them if there are fewer): `ds[:count]`.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(10).limit(3)
            >>> list(ds), len(chute.MapDataset.range(2).limit(3))
            ([0, 1, 2], 2)
        """
        count = check_int(count, "count", "MapDataset.limit")
        return self._then(SliceMap(self._node, slice(0, count)), stage("limit", count=count))

    def cache(self) -> Self:
        """Keeps each element in memory, by position, once it has been read.

        Memory: every element read so far, up to the whole dataset, stays in memory
        for the dataset's lifetime (a dict by position); worker processes each hold
        their own copy of what they read. The stages before the cache run once per
        position: a random stage before it is drawn once (in epoch 0), not anew per
        epoch; a shuffle after it still reorders every epoch.

        Example:
            >>> import chute
            >>> calls = []
            >>> ds = chute.MapDataset.range(3).map(lambda x: calls.append(x) or x).cache()
            >>> list(ds.repeat(2)), calls
            ([0, 1, 2, 0, 1, 2], [0, 1, 2])
        """
        return self._then(CacheMap(self._node), stage("cache"))
