"""Grain's legacy samplers, indexed as Grain indexes them.

A Grain sampler maps a *global* index to a record: Grain's `DataLoader` on shard `s` of
`c` reads indices `s, s + c, s + 2c, ...`. So `SequentialSampler(n)[i]` is record `i`
whatever the shard (the loader strides over it), and `IndexSampler`'s index `i` is
record `(i // c)` of the shard's contiguous part of the records (Grain's even split),
each epoch of that part permuted when shuffling. `RecordMetadata.index` is the global
index and `rng` is Grain's generator for it (`Philox(key=seed + index)`).

chute's own `chute.IndexSampler` is indexed by the shard's positions instead (what
`chute.DataLoader` reads); `chute.grain`'s `DataLoader` reads these samplers Grain's
way through `LoaderShard`.
"""

from __future__ import annotations

import abc
import operator
import sys
from typing import Any, SupportsIndex

import numpy as np
import numpy.typing as npt

from chute_core import InvalidArgumentError, IteratorState, RecordMetadata
from chute_core.internal import state_position
from chute_samplers import IterNode, NoSharding, Permutation, ShardOptions

__all__ = ["IndexSampler", "SamplerIterator", "SequentialSampler", "even_split"]


def even_split(length: int, options: ShardOptions) -> tuple[int, int]:
    """The contiguous `[start, stop)` of `length` records that shard `options` reads.

    As Grain splits: parts of `length // count`; without `drop_remainder`, the first
    `length % count` parts one longer.

    Example:
        >>> even_split(10, ShardOptions(1, 3, drop_remainder=False))
        (4, 7)
        >>> even_split(10, ShardOptions(2, 3, drop_remainder=True))
        (6, 9)
    """
    size, extra = divmod(length, options.shard_count)
    index = options.shard_index
    if options.drop_remainder:
        return size * index, size * (index + 1)
    return size * index + min(index, extra), size * (index + 1) + min(index + 1, extra)


def _options(shard_options: Any, owner: str) -> ShardOptions:
    if shard_options is None:
        return NoSharding()
    if not isinstance(shard_options, ShardOptions):
        raise TypeError(
            f"{owner}: shard_options must be a ShardOptions (or NoSharding()), got "
            f"{type(shard_options).__name__} {shard_options!r}."
        )
    return shard_options


def _records(num_records: Any, owner: str) -> int:
    if isinstance(num_records, bool) or not isinstance(num_records, int) or num_records <= 0:
        raise InvalidArgumentError(
            f"{owner}: num_records must be an int > 0, got {num_records!r} (as in Grain)."
        )
    return num_records


class _GrainSampler(abc.ABC):
    """What both samplers share: bounds, metadata, Grain's generators."""

    _length: int
    _seed: int | None
    _shard_options: ShardOptions

    @property
    def shard_options(self) -> ShardOptions:
        """The shard options the sampler was made with (a `DataLoader` default)."""
        return self._shard_options

    @property
    def seed(self) -> int | None:
        """The seed of the records' generators (and of the shuffle)."""
        return self._seed

    def __len__(self) -> int:
        return self._length

    @abc.abstractmethod
    def keys(self, indices: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The record keys at global `indices` (in range), vectorised."""

    def __iter__(self) -> SamplerIterator:
        """The metadata of indices 0, 1, ..., as a checkpointable iterator."""
        return SamplerIterator(self)

    def __getitem__(self, index: SupportsIndex) -> RecordMetadata:
        value = operator.index(index)
        if not 0 <= value < self._length:
            raise IndexError(
                f"{self!r}: index {value} is out of range [0, {self._length}) (Grain's "
                "samplers take no negative index)."
            )
        key = int(self.keys(np.array([value], np.int64))[0])
        rng = None
        if self._seed is not None:
            rng = np.random.Generator(np.random.Philox(key=self._seed + value))
        return RecordMetadata(index=value, record_key=key, rng=rng)


class SequentialSampler(_GrainSampler):
    """Records in order: index `i` is record `i` (Grain's; the loader strides over shards).

    With `drop_remainder`, the records past the last multiple of the shard count are
    left out. `seed` gives each record Grain's generator.

    Example:
        >>> sampler = SequentialSampler(5, ShardOptions(1, 2, drop_remainder=True))
        >>> len(sampler), [m.record_key for m in sampler]
        (4, [0, 1, 2, 3])
    """

    def __init__(
        self,
        num_records: int,
        shard_options: ShardOptions | None = None,
        seed: int | None = None,
    ) -> None:
        owner = "SequentialSampler"
        self._num_records = _records(num_records, owner)
        self._shard_options = options = _options(shard_options, owner)
        self._seed = seed
        count = options.shard_count
        self._length = (num_records // count) * count if options.drop_remainder else num_records

    @property
    def num_records(self) -> int:
        """The number of records."""
        return self._num_records

    num_epochs = 1
    shuffle = False

    def keys(self, indices: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return indices

    def __repr__(self) -> str:
        return (
            f"SequentialSampler(num_records={self._num_records}, "
            f"shard_options={self._shard_options!r})"
        )


class IndexSampler(_GrainSampler):
    """Grain's `IndexSampler`: epochs, a global shuffle, contiguous shards.

    Index `i` is record `part[(i // c) % L]` of epoch `(i // c) // L`, where `part` is
    the shard's contiguous records (`even_split`, `L` of them; all records without
    sharding) and `c` the shard count, permuted each epoch when shuffling (chute's
    permutation: the order differs from Grain's). `num_epochs=None` repeats forever.

    Example:
        >>> sampler = IndexSampler(6, ShardOptions(1, 2, drop_remainder=False), num_epochs=1)
        >>> [m.record_key for m in sampler][1::2]  # What shard 1's loader reads.
        [3, 4, 5]
    """

    def __init__(
        self,
        num_records: int,
        shard_options: ShardOptions | None = None,
        shuffle: bool = False,
        num_epochs: int | None = None,
        seed: int | None = None,
    ) -> None:
        owner = "IndexSampler"
        self._num_records = n = _records(num_records, owner)
        if num_epochs is not None and (
            isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or num_epochs <= 0
        ):
            raise InvalidArgumentError(
                f"{owner}: num_epochs must be an int > 0 or None (endless), got {num_epochs!r}."
            )
        if shuffle and seed is None:
            raise InvalidArgumentError(f"{owner}: shuffle=True needs a seed.")
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise TypeError(f"{owner}: seed must be an int, got {type(seed).__name__}.")
            if seed < 0 or seed.bit_length() > 32:
                raise InvalidArgumentError(
                    f"{owner}: seed must be an int in [0, 2**32), got {seed} (as in Grain)."
                )
        self._shard_options = options = _options(shard_options, owner)
        self._shuffle, self._num_epochs, self._seed = bool(shuffle), num_epochs, seed
        self._start, stop = even_split(n, options)
        self._part = stop - self._start
        if num_epochs is None:
            self._length = sys.maxsize
        else:
            self._length = n * num_epochs
            if options.drop_remainder and options.shard_count > 1:
                self._length = min(self._length, self._part * options.shard_count * num_epochs)

    @property
    def num_records(self) -> int:
        """The number of records in the source."""
        return self._num_records

    @property
    def num_epochs(self) -> int | None:
        """The number of epochs (None: endless)."""
        return self._num_epochs

    @property
    def shuffle(self) -> bool:
        """Whether each epoch is permuted."""
        return self._shuffle

    def keys(self, indices: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        if self._part == 0:
            raise IndexError(f"{self!r}: this shard holds no records.")
        epochs, within = np.divmod(indices // self._shard_options.shard_count, self._part)
        if self._shuffle:
            assert self._seed is not None
            for epoch in np.unique(epochs).tolist():
                mask = epochs == epoch
                within[mask] = Permutation(self._part, self._seed, epoch).take(within[mask])
        return within + self._start

    def __repr__(self) -> str:
        return (
            f"IndexSampler(num_records={self._num_records}, "
            f"shard_options={self._shard_options!r}, shuffle={self._shuffle}, "
            f"num_epochs={self._num_epochs}, seed={self._seed})"
        )


class SamplerIterator(IterNode[RecordMetadata]):
    """A sampler's metadata in index order; the state is the next index.

    Example:
        >>> it = iter(SequentialSampler(4))
        >>> _ = next(it); it.get_state()
        {'position': 1}
        >>> [m.record_key for m in it]
        [1, 2, 3]
    """

    def __init__(self, sampler: _GrainSampler) -> None:
        self._sampler, self._position = sampler, 0

    def __next__(self) -> RecordMetadata:
        if self._position >= len(self._sampler):
            raise StopIteration
        metadata = self._sampler[self._position]
        self._position += 1
        return metadata

    def get_state(self) -> IteratorState:
        return {"position": self._position}

    def set_state(self, state: IteratorState, /) -> None:
        self._position = state_position(state, "SamplerIterator", len(self._sampler))

    def __repr__(self) -> str:
        return f"SamplerIterator({self._sampler!r}, position={self._position})"
