"""`IndexSampler`: positions to `RecordMetadata` over epochs, shuffled and sharded.

Position `p` of shard `i` (of `c`) with `L` positions per epoch and shard is epoch
`e = p // L`, epoch position `j = (p % L) * c + i`, record key `perm_e[j]` (or `j` when
not shuffling) and global index `e * num_records + j`; the record's generator is
`record_rng(seed, global index)`. Everything is a pure function of the position, so
`sampler[p]` is O(1) and an iterator's state is just its next position.
"""

from __future__ import annotations

import operator
import sys
from typing import SupportsIndex

import numpy as np
import numpy.typing as npt

from chute_core import IteratorState, RecordIndexError, RecordMetadata
from chute_core.internal import check_bool, check_int, check_seed, distinct, state_position

from ._iter_base import IterNode
from ._permutation import MAX_SIZE, Permutation
from ._rng import record_rng, record_rngs
from ._shard_options import NoSharding, ShardOptions

__all__ = ["IndexSampler", "IndexSamplerIterator"]

RNG_OP = "chute.IndexSampler"
"""The `op` of `record_rng` for the generators an `IndexSampler` hands out."""

_CHUNK = 256


class IndexSampler:
    """Which record to read at each position: epochs, global shuffle, sharding.

    Iterating yields `RecordMetadata(index, record_key, rng)`: `index` is the global
    position (unique across shards and epochs), `record_key` the key to read from the
    source, and `rng` a `numpy.random.Generator` that depends only on (seed, index)
    (None without a seed). Each epoch is a different permutation of all
    `num_records` keys; each shard reads a strided part of it (see `ShardOptions`).

    Args:
        num_records: the number of records in the source (>= 0).
        num_epochs: the number of passes, or None for an endless stream.
        shard_options: which shard this process reads; default `NoSharding()`.
        shuffle: whether to permute the records in each epoch (needs a seed).
        seed: an int in `[0, 2**64)`, or None (no shuffle, no per-record generators).

    Example:
        >>> sampler = IndexSampler(
        ...     num_records=5,
        ...     num_epochs=2,
        ...     shard_options=ShardOptions(shard_index=0, shard_count=1, drop_remainder=True),
        ...     shuffle=True,
        ...     seed=0,
        ... )
        >>> for record_metadata in sampler:
        ...     print(record_metadata)
        RecordMetadata(index=0, record_key=0, rng=Generator(Philox))
        RecordMetadata(index=1, record_key=2, rng=Generator(Philox))
        RecordMetadata(index=2, record_key=3, rng=Generator(Philox))
        RecordMetadata(index=3, record_key=1, rng=Generator(Philox))
        RecordMetadata(index=4, record_key=4, rng=Generator(Philox))
        RecordMetadata(index=5, record_key=0, rng=Generator(Philox))
        RecordMetadata(index=6, record_key=1, rng=Generator(Philox))
        RecordMetadata(index=7, record_key=4, rng=Generator(Philox))
        RecordMetadata(index=8, record_key=3, rng=Generator(Philox))
        RecordMetadata(index=9, record_key=2, rng=Generator(Philox))
        >>> len(sampler), sampler[7].record_key
        (10, 4)
    """

    def __init__(
        self,
        num_records: int,
        num_epochs: int | None = 1,
        shard_options: ShardOptions | None = None,
        shuffle: bool = False,
        seed: int | None = None,
    ) -> None:
        owner = "IndexSampler"
        self._num_records = check_int(num_records, "num_records", owner, maximum=MAX_SIZE - 1)
        self._num_epochs = (
            None if num_epochs is None else check_int(num_epochs, "num_epochs", owner)
        )
        if shard_options is None:
            shard_options = NoSharding()
        if not isinstance(shard_options, ShardOptions):
            raise TypeError(
                f"{owner}: shard_options must be a ShardOptions (or NoSharding()), got "
                f"{type(shard_options).__name__} {shard_options!r}."
            )
        self._shard_options = shard_options
        self._shuffle = check_bool(shuffle, "shuffle", owner)
        self._seed = None if seed is None else check_seed(seed, owner)
        if self._shuffle and self._seed is None:
            raise ValueError(f"{owner}: shuffle=True needs a seed (an int in [0, 2**64)).")
        self._epoch_length = shard_options.shard_length(self._num_records)
        self._permutations: dict[int, Permutation] = {}

    @property
    def num_records(self) -> int:
        """The number of records in the source."""
        return self._num_records

    @property
    def num_epochs(self) -> int | None:
        """The number of epochs (None: endless)."""
        return self._num_epochs

    @property
    def shard_options(self) -> ShardOptions:
        """The shard this sampler reads."""
        return self._shard_options

    @property
    def shuffle(self) -> bool:
        """Whether each epoch is permuted."""
        return self._shuffle

    @property
    def seed(self) -> int | None:
        """The seed (None: no shuffle and no per-record generators)."""
        return self._seed

    @property
    def epoch_length(self) -> int:
        """Positions per epoch in this shard."""
        return self._epoch_length

    @property
    def endless(self) -> bool:
        """True when the stream never ends (`num_epochs=None` and a non-empty shard)."""
        return self._num_epochs is None and self._epoch_length > 0

    def __len__(self) -> int:
        if self.endless:
            raise TypeError(f"{self!r} is endless (num_epochs=None) and has no len().")
        return self._epoch_length * (self._num_epochs or 0)

    def __repr__(self) -> str:
        return (
            f"IndexSampler(num_records={self._num_records}, "
            f"shard_options={self._shard_options!r}, shuffle={self._shuffle}, "
            f"num_epochs={self._num_epochs}, seed={self._seed})"
        )

    @property
    def positions(self) -> int:
        """The positions this shard reads; endless: as many epochs as `sys.maxsize` allows.

        Unlike `len()`, it is defined for an endless sampler: as many whole epochs as
        keep global indices below `sys.maxsize` (a stream that outlives any run).

        Example:
            >>> IndexSampler(4, num_epochs=2).positions
            8
            >>> IndexSampler(4, num_epochs=None).positions > 10**18
            True
        """
        if not self.endless:
            return len(self)
        return (sys.maxsize // self._num_records) * self._epoch_length

    def _stop(self) -> int:
        return self.positions

    def _check_position(self, position: SupportsIndex) -> int:
        value = operator.index(position)
        stop = self._stop()
        if value < 0 and not self.endless:
            value += stop
        if not 0 <= value < stop:
            raise RecordIndexError(
                f"{self!r}: position {operator.index(position)} is out of range "
                f"[0, {'endless' if self.endless else stop})."
            )
        return value

    def _permutation(self, epoch: int) -> Permutation:
        perm = self._permutations.get(epoch)
        if perm is None:
            assert self._seed is not None
            if len(self._permutations) >= 8:
                self._permutations.clear()
            perm = self._permutations[epoch] = Permutation(self._num_records, self._seed, epoch)
        return perm

    def _locate(
        self, positions: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Returns (global indices, record keys) of in-range positions."""
        epochs, within = np.divmod(positions, self._epoch_length)
        opts = self._shard_options
        in_epoch = within * opts.shard_count + opts.shard_index
        global_index = epochs * self._num_records + in_epoch
        if not self._shuffle:
            return global_index, in_epoch
        keys = np.empty_like(in_epoch)
        for epoch in distinct(epochs).tolist():
            mask = epochs == epoch
            keys[mask] = self._permutation(epoch).take(in_epoch[mask])
        return global_index, keys

    def locate(
        self, positions: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Returns (global indices, record keys) of in-range positions, vectorised.

        The global index is `RecordMetadata.index`: unique across shards, and what the
        record's generator is derived from.

        Example:
            >>> indices, keys = IndexSampler(4, num_epochs=2).locate(np.array([1, 6]))
            >>> indices.tolist(), keys.tolist()
            ([1, 6], [1, 2])
        """
        return self._locate(np.asarray(positions, dtype=np.int64).reshape(-1))

    def record_keys(self, positions: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Returns the record keys at many positions at once (vectorised).

        Example:
            >>> IndexSampler(4, num_epochs=2).record_keys([0, 5, 7]).tolist()
            [0, 1, 3]
        """
        array = np.asarray(positions, dtype=np.int64)
        stop = self._stop()
        if array.size and not self.endless:
            array = np.where(array < 0, array + stop, array)  # Negative: from the end.
        if array.size and (int(array.min()) < 0 or int(array.max()) >= stop):
            bad = array[(array < 0) | (array >= stop)][0]
            raise RecordIndexError(
                f"{self!r}: position {int(bad) - (0 if self.endless or bad >= 0 else stop)} "
                f"is out of range [0, {'endless' if self.endless else stop})."
            )
        return self._locate(array.reshape(-1))[1].reshape(array.shape)

    def __getitem__(self, position: SupportsIndex) -> RecordMetadata:
        """Returns the metadata at `position` (negative counts from the end if finite)."""
        value = self._check_position(position)
        global_index, keys = self._locate(np.array([value], dtype=np.int64))
        index = int(global_index[0])
        rng = None if self._seed is None else record_rng(self._seed, index, RNG_OP)
        return RecordMetadata(index=index, record_key=int(keys[0]), rng=rng)

    def metadata(self, start: int, stop: int) -> list[RecordMetadata]:
        """Returns the metadata of positions `start <= p < stop` (clipped to the end)."""
        start = check_int(start, "start", "IndexSampler.metadata")
        stop = min(check_int(stop, "stop", "IndexSampler.metadata"), self._stop())
        if start >= stop:
            return []
        global_index, keys = self._locate(np.arange(start, stop, dtype=np.int64))
        indices: list[int] = global_index.tolist()
        if self._seed is None:
            return [RecordMetadata(i, k) for i, k in zip(indices, keys.tolist(), strict=True)]
        rngs = record_rngs(self._seed, global_index, RNG_OP)
        return [
            RecordMetadata(i, k, r) for i, k, r in zip(indices, keys.tolist(), rngs, strict=True)
        ]

    def __iter__(self) -> IndexSamplerIterator:
        return IndexSamplerIterator(self)


class IndexSamplerIterator(IterNode[RecordMetadata]):
    """Iterates an `IndexSampler`; the state is the next position.

    Metadata are computed in vectorised chunks; the state never includes the chunk. The
    `origin` of an element is `(index,)`, its global index (`RecordMetadata.index`,
    unique across shards and epochs).

    Example:
        >>> it = iter(IndexSampler(5, num_epochs=1, shuffle=True, seed=3))
        >>> first = next(it)
        >>> state = it.get_state(); state
        {'position': 1}
        >>> rest = [m.record_key for m in it]
        >>> it.set_state(state)
        >>> [m.record_key for m in it] == rest
        True
        >>> it.origin
        (4,)
    """

    def __init__(self, sampler: IndexSampler, position: int = 0) -> None:
        if not isinstance(sampler, IndexSampler):
            raise TypeError(f"IndexSamplerIterator: expected an IndexSampler, got {sampler!r}.")
        self._sampler = sampler
        self._position = check_int(position, "position", "IndexSamplerIterator")
        self._buffer: list[RecordMetadata] = []
        self._offset = 0
        self._last: RecordMetadata | None = None  # The element last returned.

    @property
    def origin(self) -> tuple[int, ...] | None:
        """`(index,)`: the global index of the element last returned."""
        last = self._last
        return None if last is None else (last.index,)

    def __next__(self) -> RecordMetadata:
        if self._offset == len(self._buffer):
            self._buffer = self._sampler.metadata(self._position, self._position + _CHUNK)
            self._offset = 0
            if not self._buffer:
                raise StopIteration
        element = self._buffer[self._offset]
        self._offset += 1
        self._position += 1
        self._last = element
        return element

    def get_state(self) -> IteratorState:
        return {"position": self._position}

    def set_state(self, state: IteratorState, /) -> None:
        maximum = sys.maxsize if self._sampler.endless else len(self._sampler)
        self._position = state_position(state, "IndexSamplerIterator", maximum)
        self._buffer, self._offset, self._last = [], 0, None

    def __repr__(self) -> str:
        return f"IndexSamplerIterator({self._sampler!r}, position={self._position})"
