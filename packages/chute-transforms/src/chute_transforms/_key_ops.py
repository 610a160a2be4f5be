"""`map_with_key`: a transform that is given the record's key in the source.

`fn(key, element)`, where `key` is the index the source was read at for this element
(`chute_samplers.record_keys` follows shuffles, repeats, slices and shards down to it):
a transform can then agree with another loader that reads the same record, whatever
order this pipeline reads it in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from chute_core import DROPPED, CheckpointableIterator, StageTraits, declare_op
from chute_samplers import EpochArray, PositionArray, fetch, record_keys

from ._adapters import as_map_with_index_fn
from ._iter_ops import _StreamOp
from ._map_ops import _ElementOp
from ._record_rng import OriginRecords

__all__ = ["MAP_WITH_KEY", "MapWithKeyIter", "MapWithKeyMap"]

U = TypeVar("U")


class MapWithKeyMap(_ElementOp[U]):
    """`fn(key, element)` for each element of a random-access dataset; `key` the record's.

    Example:
        >>> from chute_samplers import ShuffleMap
        >>> node = MapWithKeyMap(ShuffleMap(["a", "b", "c"], seed=1), lambda k, x: f"{k}{x}")
        >>> sorted(node)
        ['0a', '1b', '2c']
    """

    _op = "map_with_key"

    def __init__(self, parent: Any, fn: Callable[[int, Any], U] | Any) -> None:
        super().__init__(parent, fn)
        self._fn = as_map_with_index_fn(fn)

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[U]:
        elements = fetch(self._parent, positions, epochs)
        keys, _ = record_keys(self._parent, positions, epochs)
        out: list[U] = []
        try:
            for key, element in zip(keys.tolist(), elements, strict=True):
                out.append(DROPPED if element is DROPPED else self._fn(key, element))
        except Exception as error:
            self._fail(error, positions, len(out))
            raise
        return out


class MapWithKeyIter(_StreamOp[U]):
    """`fn(key, element)` for each element of a stream; `key` the record's in the source.

    The stream must read a random-access dataset in order, with element-wise stages
    between (each element's origin a position of that dataset); otherwise the first
    element raises `InvalidArgumentError`.

    Example:
        >>> from chute_samplers import SequentialIter, ShuffleMap
        >>> it = MapWithKeyIter(SequentialIter(ShuffleMap(["a", "b", "c"], 1)), lambda k, x: k)
        >>> sorted(it)
        [0, 1, 2]
    """

    _op = "map_with_key"

    def __init__(
        self, parent: CheckpointableIterator[Any], fn: Callable[[int, Any], U] | Any
    ) -> None:
        super().__init__(parent, fn)
        self._fn = as_map_with_index_fn(fn)
        self._records = OriginRecords(parent, f"map_with_key({self._fn_shown})")

    def __next__(self) -> U:
        while True:
            element = next(self._parent)
            if self._ledger is not None and self._replayed():
                continue
            key = self._key()
            try:
                result: U = self._fn(key, element)
            except Exception as error:
                if not self._skip(error):
                    raise
                continue
            self._index += 1
            return result

    def _key(self) -> int:
        return self._records.record(self._input_origin())[0]


MAP_WITH_KEY = declare_op(
    "map_with_key",
    StageTraits(elementwise=True, keeps_positions=True),
    map_node=MapWithKeyMap,
    iter_node=MapWithKeyIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""
