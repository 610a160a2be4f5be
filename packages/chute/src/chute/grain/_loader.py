"""Grain's `DataLoader`: its `shard_options`, and Grain's samplers read Grain's way.

Grain's loader on shard `s` of `c` reads the sampler's global indices `s, s + c, ...`:
`len(sampler) // c` of them, one more on the first `len(sampler) % c` shards unless
`drop_remainder` (Grain's newest behaviour: the remainder is no longer dropped). The
shard comes from `shard_options`, else from the sampler's. `LoaderShard` presents
that to chute's `DataLoader` as the positions it reads; a `chute.IndexSampler` (already
indexed by the shard's positions) is read as it is.
"""

from __future__ import annotations

import operator
import sys
from typing import Any, SupportsIndex

import numpy as np
import numpy.typing as npt

from chute_core import InvalidArgumentError, RecordMetadata
from chute_samplers import IndexSampler as ChuteIndexSampler
from chute_samplers import NoSharding, ShardOptions

from .._data_loader import DataLoader as ChuteDataLoader

__all__ = ["DataLoader", "LoaderShard"]


def _length(sampler: Any) -> int:
    """`len(sampler)`, or where its indices end (Grain's search, for one without len)."""
    if hasattr(sampler, "__len__"):
        return len(sampler)
    low, high = 0, sys.maxsize
    while low < high:
        middle = (low + high) // 2
        try:
            sampler[middle]
        except IndexError:
            high = middle
        else:
            low = middle + 1
    return low


class LoaderShard(ChuteIndexSampler):
    """The positions one loader shard reads of a Grain-indexed sampler.

    Position `k` is the sampler's global index `k * c + s`.

    Example:
        >>> from chute.grain._samplers import SequentialSampler
        >>> shard = LoaderShard(SequentialSampler(5), ShardOptions(1, 2, drop_remainder=False), 5)
        >>> shard.positions, [m.record_key for m in shard]
        (2, [1, 3])
    """

    def __init__(self, sampler: Any, options: ShardOptions, num_records: int) -> None:
        super().__init__(num_records, num_epochs=1)
        self._grain, self._options = sampler, options
        total = _length(sampler)
        self._unbounded = total >= sys.maxsize
        count, index = options.shard_count, options.shard_index
        self._positions = total // count
        if not options.drop_remainder and index < total % count:
            self._positions += 1

    @property
    def num_records(self) -> int:
        return int(getattr(self._grain, "num_records", super().num_records))

    @property
    def num_epochs(self) -> int | None:
        return getattr(self._grain, "num_epochs", 1)

    @property
    def shard_options(self) -> ShardOptions:
        return self._options

    @property
    def shuffle(self) -> bool:
        return bool(getattr(self._grain, "shuffle", False))

    @property
    def seed(self) -> int | None:
        return getattr(self._grain, "seed", None)

    @property
    def endless(self) -> bool:
        return self._unbounded

    @property
    def positions(self) -> int:
        return self._positions

    def __len__(self) -> int:
        return self._positions

    def __repr__(self) -> str:
        return f"LoaderShard({self._grain!r}, {self._options!r})"

    def locate(
        self, positions: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        indices = np.asarray(positions, np.int64).reshape(-1) * self._options.shard_count
        indices += self._options.shard_index
        keys = getattr(self._grain, "keys", None)
        if keys is not None:
            return indices, keys(indices)
        found = [int(self._grain[int(i)].record_key) for i in indices.tolist()]
        return indices, np.array(found, np.int64)

    def record_keys(self, positions: npt.ArrayLike) -> npt.NDArray[np.int64]:
        array = np.asarray(positions, np.int64)
        if array.size and (int(array.min()) < 0 or int(array.max()) >= self._positions):
            raise IndexError(f"{self!r}: a position is out of range [0, {self._positions}).")
        return self.locate(array)[1].reshape(array.shape)

    def metadata(self, start: int, stop: int) -> list[RecordMetadata]:
        return [self[p] for p in range(max(start, 0), min(stop, self._positions))]

    def __getitem__(self, position: SupportsIndex) -> RecordMetadata:
        value = operator.index(position)
        if not 0 <= value < self._positions:
            raise IndexError(f"{self!r}: position {value} is out of range.")
        metadata: RecordMetadata = self._grain[
            value * self._options.shard_count + self._options.shard_index
        ]
        return metadata


class DataLoader(ChuteDataLoader):
    """Grain's `DataLoader`: chute's, with `shard_options` and Grain's samplers.

    `sampler` is one of `chute.grain`'s samplers (or any object Grain's loader takes:
    `__getitem__` giving `RecordMetadata`), read at the global indices of this shard
    (`shard_options`, else the sampler's); or a `chute.IndexSampler`, read as
    `chute.DataLoader` reads it. `enable_profiling` is accepted and does nothing
    (`ds.iter(stats=True)` and `chute.metrics` measure chute's pipelines).

    Example:
        >>> import chute.grain as grain
        >>> loader = grain.DataLoader(
        ...     data_source=list(range(10)),
        ...     sampler=grain.samplers.SequentialSampler(10),
        ...     shard_options=grain.sharding.ShardOptions(1, 3, drop_remainder=False),
        ... )
        >>> list(loader)
        [1, 4, 7]
    """

    def __init__(
        self,
        *,
        data_source: Any,
        sampler: Any,
        shard_options: ShardOptions | None = None,
        enable_profiling: bool = False,
        **options: Any,
    ) -> None:
        if shard_options is not None and not isinstance(shard_options, ShardOptions):
            raise TypeError(
                "DataLoader: shard_options must be a ShardOptions (or None), got "
                f"{type(shard_options).__name__} {shard_options!r}."
            )
        if isinstance(sampler, ChuteIndexSampler):
            if shard_options is not None and shard_options != sampler.shard_options:
                raise InvalidArgumentError(
                    f"DataLoader: chute's IndexSampler reads its own shard "
                    f"({sampler.shard_options!r}); leave out shard_options={shard_options!r} "
                    "or give the sampler those shard options."
                )
        elif not hasattr(sampler, "__getitem__"):
            raise TypeError(
                f"DataLoader: sampler must give RecordMetadata by index, got {sampler!r}."
            )
        else:
            chosen = shard_options or getattr(sampler, "shard_options", None) or NoSharding()
            sampler = LoaderShard(sampler, chosen, len(data_source))
        super().__init__(data_source=data_source, sampler=sampler, **options)
