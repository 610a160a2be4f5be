"""`ShardOptions` and `NoSharding`: which part of each epoch one process reads."""

from __future__ import annotations

import dataclasses

from chute_core.internal import check_bool, check_int

__all__ = ["NoSharding", "ShardOptions"]


@dataclasses.dataclass(frozen=True)
class ShardOptions:
    """Splits every epoch into `shard_count` disjoint shards; this process reads one.

    chute shards *after* the global shuffle, by stride: shard `i` reads the epoch's
    positions `i, i + shard_count, i + 2 * shard_count, ...`. So the shards of an epoch
    are disjoint and together are the whole epoch, each shard sees a different, globally
    shuffled subset every epoch, and the processes' streams interleave into the one
    stream a single process would read (what makes restoring on a different number of
    hosts possible).

    Attributes:
        shard_index: this process's shard, `0 <= shard_index < shard_count`.
        shard_count: the number of shards (processes), at least 1.
        drop_remainder: if True, every shard reads `num_records // shard_count` records
            per epoch (the last `num_records % shard_count` positions of each shuffled
            epoch are skipped, a different set each epoch); if False, the first
            `num_records % shard_count` shards read one record more.

    Example:
        >>> ShardOptions(shard_index=1, shard_count=4, drop_remainder=True)
        ShardOptions(shard_index=1, shard_count=4, drop_remainder=True)
        >>> ShardOptions(shard_index=4, shard_count=4)
        Traceback (most recent call last):
        ...
        ValueError: ShardOptions: shard_index must be < shard_count, got shard_index=4 ...
    """

    shard_index: int
    shard_count: int
    drop_remainder: bool = False

    def __post_init__(self) -> None:
        owner = type(self).__name__
        check_int(self.shard_index, "shard_index", owner)
        check_int(self.shard_count, "shard_count", owner, minimum=1)
        check_bool(self.drop_remainder, "drop_remainder", owner)
        if self.shard_index >= self.shard_count:
            raise ValueError(
                f"{owner}: shard_index must be < shard_count, got "
                f"shard_index={self.shard_index} with shard_count={self.shard_count}."
            )

    def shard_length(self, num_records: int) -> int:
        """Returns how many of `num_records` positions per epoch this shard reads.

        Example:
            >>> [ShardOptions(i, 3).shard_length(10) for i in range(3)]
            [4, 3, 3]
        """
        num_records = check_int(num_records, "num_records", type(self).__name__)
        if self.drop_remainder:
            return num_records // self.shard_count
        return len(range(self.shard_index, num_records, self.shard_count))


@dataclasses.dataclass(frozen=True)
class NoSharding(ShardOptions):
    """One shard: this process reads every record.

    Example:
        >>> NoSharding()
        NoSharding()
        >>> NoSharding().shard_length(5)
        5
    """

    shard_index: int = dataclasses.field(default=0, init=False)
    shard_count: int = dataclasses.field(default=1, init=False)
    drop_remainder: bool = dataclasses.field(default=False, init=False)

    def __repr__(self) -> str:
        return "NoSharding()"
