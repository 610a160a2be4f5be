"""Grain's `ElasticIterator`: a global batch cut over hosts, restorable on any host count.

Every host reads `ds[g + shard_index :: shard_count]` in batches of
`global_batch_size / shard_count`, where `g` counts the records of the global batches
already read; so hosts that took the same number of steps hold the same state
(`{"global_next_index": g}`), and that state restores on any number of hosts, with
any global batch size, as Grain's does. As in Grain, the dataset must not drop
elements (no `filter`), and batches are whole (`drop_remainder`).
"""

from __future__ import annotations

from typing import Any

from chute_core import InvalidArgumentError, IteratorState
from chute_core.internal import state_dict, state_int
from chute_samplers import IterNode, ShardOptions

from ._datasets import MapDataset

__all__ = ["ElasticIterator"]

_KEY = "global_next_index"


def _has_filter(stages: Any) -> bool:
    return any(item.op == "filter" or any(map(_has_filter, item.inputs)) for item in stages)


class _ElasticIter(IterNode[Any]):
    """One host's batches, rebuilt from `global_next_index` when the state is set."""

    def __init__(self, owner: ElasticIterator) -> None:
        self._owner, self._next = owner, 0
        self._iterator: Any = None

    def _open(self) -> Any:
        if self._iterator is None:
            self._iterator = iter(self._owner.dataset_at(self._next))
        return self._iterator

    def __next__(self) -> Any:
        batch = next(self._open())
        self._next += self._owner.global_batch_size
        return batch

    def get_state(self) -> IteratorState:
        return {_KEY: self._next}

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(self, state, (_KEY,))
        self._next = state_int(self, checked, _KEY)
        self.close()

    def close(self) -> None:
        iterator, self._iterator = self._iterator, None
        if iterator is not None:
            iterator.close()

    def __repr__(self) -> str:
        return f"_ElasticIter({_KEY}={self._next})"


class ElasticIterator:
    """Batches of `global_batch_size` records cut over hosts; restores on any host count.

    Args:
        ds: a `MapDataset`, unbatched and unsharded, without `filter`.
        global_batch_size: records per global batch, divisible by the shard count.
        shard_options: this host's shard.
        read_options: how the host reads (`to_iter_dataset`).
        multiprocessing_options: worker processes (`mp_prefetch`), or None.

    Example:
        >>> import chute.grain as grain
        >>> two = grain.sharding.ShardOptions(0, 2, drop_remainder=True)
        >>> it = ElasticIterator(grain.MapDataset.range(12), 4, two)
        >>> next(it).tolist(), it.get_state()
        ([0, 2], {'global_next_index': 4})
        >>> one = ElasticIterator(grain.MapDataset.range(12), 4, grain.sharding.NoSharding())
        >>> one.set_state(it.get_state())
        >>> [batch.tolist() for batch in one]
        [[4, 5, 6, 7], [8, 9, 10, 11]]
    """

    def __init__(
        self,
        ds: Any,
        global_batch_size: int,
        shard_options: ShardOptions,
        *,
        read_options: Any = None,
        multiprocessing_options: Any = None,
    ) -> None:
        if not isinstance(ds, MapDataset):
            raise TypeError(f"ElasticIterator: ds must be a MapDataset, got {type(ds).__name__}.")
        if _has_filter(ds._stages):
            raise InvalidArgumentError("ElasticIterator does not support `filter` (as in Grain).")
        if not isinstance(shard_options, ShardOptions):
            raise TypeError(
                f"ElasticIterator: shard_options must be a ShardOptions, got {shard_options!r}."
            )
        size = global_batch_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidArgumentError(
                f"ElasticIterator: global_batch_size must be an int >= 1, got {size!r}."
            )
        if size % shard_options.shard_count:
            raise InvalidArgumentError(
                f"ElasticIterator: global batch size {size} is not divisible by shard count "
                f"{shard_options.shard_count}."
            )
        self._ds, self.global_batch_size, self._shard = ds, size, shard_options
        self._read, self._workers = read_options, multiprocessing_options
        self._default: _ElasticIter | None = None

    def dataset_at(self, global_next_index: int) -> Any:
        """This host's batches from global record `global_next_index` on."""
        shard = self._shard
        start = global_next_index + shard.shard_index
        host = self.global_batch_size // shard.shard_count
        ds = self._ds[start :: shard.shard_count].batch(host, drop_remainder=True)
        ds = ds.to_iter_dataset(self._read)
        return ds if self._workers is None else ds.mp_prefetch(self._workers)

    def __iter__(self) -> _ElasticIter:
        if self._default is None:
            self._default = _ElasticIter(self)
        return self._default

    def __next__(self) -> Any:
        return next(iter(self))

    def get_state(self) -> IteratorState:
        """`{"global_next_index": g}`: the same on every host after the same steps."""
        return iter(self).get_state()

    def set_state(self, state: IteratorState) -> None:
        """Goes on from `state`, saved by this or any other host count."""
        iter(self).set_state(state)

    def close(self) -> None:
        """Stops the host's iterator (its worker processes, if any)."""
        if self._default is not None:
            self._default.close()
