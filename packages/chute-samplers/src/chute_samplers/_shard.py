"""`ShardMap`: one strided shard of a random-access dataset."""

from __future__ import annotations

from typing import TypeVar

from chute_core import RandomAccessDataSource, StageTraits, declare_op
from chute_core.internal import check_bool, check_dataset, check_int

from ._node import EpochArray, PositionArray, PositionMap, node_epoch_length
from ._shard_options import ShardOptions

__all__ = ["SHARD", "ShardMap"]

T = TypeVar("T")


class ShardMap(PositionMap[T]):
    """Shard `shard_index` of `shard_count`: the parent's positions `index, index + count, ...`.

    Shards are disjoint and together cover the parent; with `drop_remainder=True` each
    has `len(parent) // shard_count` elements. Unlike a slice, a shard is a partition of
    work, not a fixed subset: it passes epochs on, so sharding a repeated shuffle gives
    each shard a new, globally shuffled part of every epoch, disjoint from the other
    shards' parts. Apply shards after the global shuffle.

    Args:
        parent: a node, a source, or any sequence.
        shard_index: this shard, `0 <= shard_index < shard_count`.
        shard_count: the number of shards (>= 1).
        drop_remainder: drop the last `len(parent) % shard_count` elements, so all shards
            have the same length.

    Example:
        >>> [list(ShardMap(range(7), i, 3)) for i in range(3)]
        [[0, 3, 6], [1, 4], [2, 5]]
        >>> list(ShardMap(range(7), 0, 3, drop_remainder=True))
        [0, 3]
    """

    def __init__(
        self,
        parent: RandomAccessDataSource[T],
        shard_index: int,
        shard_count: int,
        drop_remainder: bool = False,
    ) -> None:
        check_dataset(parent, "ShardMap")
        count = check_int(shard_count, "shard_count", "ShardMap", minimum=1)
        index = check_int(shard_index, "shard_index", "ShardMap")
        if index >= count:
            raise ValueError(
                f"ShardMap: shard_index must be < shard_count, got shard_index={index} with "
                f"shard_count={count}."
            )
        self._parent = parent
        self._options = ShardOptions(
            index, count, check_bool(drop_remainder, "drop_remainder", "ShardMap")
        )
        self._length = self._options.shard_length(len(parent))
        inner = node_epoch_length(parent)
        if 0 < inner < len(parent) and inner % count == 0:
            self._epoch_length = inner // count
        else:
            self._epoch_length = self._length

    @classmethod
    def from_options(cls, parent: RandomAccessDataSource[T], options: ShardOptions) -> ShardMap[T]:
        """Builds the shard that `options` (a `ShardOptions`) names."""
        if not isinstance(options, ShardOptions):
            raise TypeError(f"ShardMap: expected ShardOptions, got {options!r}.")
        return cls(parent, options.shard_index, options.shard_count, options.drop_remainder)

    @property
    def parent(self) -> RandomAccessDataSource[T]:
        """The sharded dataset."""
        return self._parent

    @property
    def shard_options(self) -> ShardOptions:
        """The shard, as `ShardOptions`."""
        return self._options

    def __len__(self) -> int:
        return self._length

    @property
    def epoch_length(self) -> int:
        """The parent's epochs divided by `shard_count` when they split evenly."""
        return self._epoch_length

    def parent_positions(
        self, positions: PositionArray, epochs: EpochArray
    ) -> tuple[RandomAccessDataSource[T], PositionArray, EpochArray]:
        count, index = self._options.shard_count, self._options.shard_index
        return self._parent, positions * count + index, epochs

    def __repr__(self) -> str:
        o = self._options
        return (
            f"ShardMap({self._parent!r}, shard_index={o.shard_index}, "
            f"shard_count={o.shard_count}, drop_remainder={o.drop_remainder})"
        )


SHARD = declare_op("shard", StageTraits(shard=("shard_index", "shard_count")), map_node=ShardMap)
"""The op's declaration (see `chute_core.declare_op`)."""
