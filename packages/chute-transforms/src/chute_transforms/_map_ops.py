"""Element ops over random-access datasets: map, map with index, random map, filter.

Each is a `chute_samplers.MapNode`: it answers a batch of positions by reading its
parent's batch and applying the user's function to each element, in order. Positions
that a filter dropped hold `chute_sources.DROPPED`, which these ops pass on untouched.
An exception from the user's function keeps its type and gains a note naming the op
and the element's position.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from chute_core import DROPPED, RandomAccessDataSource
from chute_samplers import (
    EpochArray,
    MapNode,
    PositionArray,
    fetch,
    node_epoch_length,
    record_keys,
    record_rng,
    record_rngs,
)

from ._adapters import (
    as_filter_fn,
    as_many_fn,
    as_map_fn,
    as_map_with_index_fn,
    many_or_none,
)
from ._filter_thresholds import FilterCounter, FilterThresholds
from ._record_rng import random_map_parts, record_key_rngs
from ._stage_errors import annotate

__all__ = [
    "FilterMap",
    "MapMap",
    "MapWithIndexMap",
    "RandomMapMap",
    "fn_name",
    "may_drop",
]

T = TypeVar("T")
U = TypeVar("U")


def fn_name(fn: object) -> str:
    """A short readable name of a user's function or transform, for reprs and errors."""
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


def may_drop(dataset: object) -> bool:
    """Whether positions of `dataset` may hold `DROPPED` (a filter or flat map upstream).

    Nodes keep their parents in `_parent` / `_parents`; plain sources never drop. A
    node of your own that answers `DROPPED` must set `_may_drop = True`.

    Example:
        >>> may_drop(range(3)), may_drop(FilterMap(range(3), bool))
        (False, True)
    """
    cached = getattr(dataset, "_may_drop", None)
    if isinstance(cached, bool):
        return cached
    if isinstance(dataset, FilterMap) or type(dataset).__name__ == "FlatMapMap":
        return True
    parents = list(getattr(dataset, "_parents", ()))
    parent = getattr(dataset, "_parent", None)
    if parent is not None:
        parents.append(parent)
    return any(may_drop(p) for p in parents)


class _ElementOp(MapNode[U]):
    """Shared plumbing: the parent, its length and epochs, and error notes."""

    _op = "op"

    def __init__(self, parent: RandomAccessDataSource[Any], fn: object) -> None:
        self._parent = parent
        self._fn_shown = fn_name(fn)
        self._parent_may_drop = may_drop(parent)
        self._may_drop = self._parent_may_drop

    @property
    def parent(self) -> RandomAccessDataSource[Any]:
        """The dataset this op reads from."""
        return self._parent

    def __len__(self) -> int:
        return len(self._parent)

    @property
    def epoch_length(self) -> int:
        return node_epoch_length(self._parent)

    def parent_positions(
        self, positions: PositionArray, epochs: EpochArray
    ) -> tuple[RandomAccessDataSource[Any], PositionArray, EpochArray]:
        """Each position reads the same position of the parent (an element op)."""
        return self._parent, positions, epochs

    def _fail(self, error: BaseException, positions: PositionArray, done: int) -> None:
        annotate(error, f"{self._op}({self._fn_shown})", f"position {int(positions[done])}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._parent!r}, {self._fn_shown})"


class MapMap(_ElementOp[U]):
    """`fn(element)` for each element of a random-access dataset.

    Args:
        parent: a node, a source or any sequence.
        fn: a `MapTransform` or a callable taking one element.

    Example:
        >>> MapMap(range(4), lambda x: x * 10).__getitems__([3, 1])
        [30, 10]
    """

    _op = "map"

    def __init__(self, parent: RandomAccessDataSource[Any], fn: Callable[[Any], U] | Any) -> None:
        super().__init__(parent, fn)
        self._fn = as_map_fn(fn)
        self._many = as_many_fn(fn)

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[U]:
        fn = self._fn
        elements = fetch(self._parent, positions, epochs)  # Read errors are not this op's.
        if self._many is not None and not self._parent_may_drop and len(elements) > 1:
            batched = many_or_none(self._many, self._fn_shown, elements)
            if batched is not None:
                return batched  # Else mapped one by one below, which raises the error.
        remaining = iter(elements)
        try:
            if self._parent_may_drop:
                return [DROPPED if e is DROPPED else fn(e) for e in remaining]
            return [fn(e) for e in remaining]  # The hot path: no element can be DROPPED.
        except Exception as error:
            # The iterator says how many elements it handed out: the last one failed.
            done = len(elements) - operator.length_hint(remaining) - 1
            self._fail(error, positions, done)
            raise


class MapWithIndexMap(_ElementOp[U]):
    """`fn(position, element)` for each element; the position is this dataset's.

    Example:
        >>> list(MapWithIndexMap(["a", "b"], lambda i, x: f"{i}:{x}"))
        ['0:a', '1:b']
    """

    _op = "map_with_index"

    def __init__(
        self, parent: RandomAccessDataSource[Any], fn: Callable[[int, Any], U] | Any
    ) -> None:
        super().__init__(parent, fn)
        self._fn = as_map_with_index_fn(fn)

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[U]:
        fn, out = self._fn, []
        elements = fetch(self._parent, positions, epochs)
        try:
            for position, element in zip(positions.tolist(), elements, strict=True):
                out.append(DROPPED if element is DROPPED else fn(position, element))
        except Exception as error:
            self._fail(error, positions, len(out))
            raise
        return out


class RandomMapMap(_ElementOp[U]):
    """`fn(element, rng)`, the generator a pure function of (seed, epoch, position).

    The same element gets the same randomness on every run and after a resume; each
    pass of an enclosing repeat gets new randomness (the epoch is part of the key).

    With `key="record"`, the generator is instead a pure function of (seed, the
    record's key in the source, its pass): `chute_samplers.record_keys` follows the
    positions down to the source, so a record draws the same wherever a shuffle puts
    it (and anew in each pass of a repeat).

    Args:
        parent: a node, a source or any sequence.
        fn: a `RandomMapTransform` or a callable taking (element, rng).
        seed: an int in `[0, 2**64)`.
        key: "position" (the default) or "record".

    Example:
        >>> noise = lambda x, rng: x + rng.random()
        >>> ds = RandomMapMap(range(3), noise, seed=0)
        >>> ds[1] == ds[1], ds[1] == RandomMapMap(range(3), noise, seed=1)[1]
        (True, False)
        >>> from chute_samplers import ShuffleMap
        >>> by_record = RandomMapMap(ShuffleMap(range(3), seed=4), noise, 0, key="record")
        >>> sorted(by_record) == sorted(RandomMapMap(range(3), noise, 0, key="record"))
        True
    """

    _op = "random_map"

    def __init__(
        self,
        parent: RandomAccessDataSource[Any],
        fn: Callable[[Any, np.random.Generator], U] | Any,
        seed: int,
        key: str = "position",
    ) -> None:
        super().__init__(parent, fn)
        self._fn, self._seed, self._by_record = random_map_parts(fn, seed, key, "RandomMapMap")

    @property
    def seed(self) -> int:
        """The seed of the op."""
        return self._seed

    def _rngs(self, positions: PositionArray, epochs: EpochArray) -> list[np.random.Generator]:
        if self._by_record:
            keys, passes = record_keys(self._parent, positions, epochs)
            return record_key_rngs(self._seed, keys, passes)
        if not epochs.any():
            return record_rngs(self._seed, positions, "random_map")
        keys = (epochs.astype(object) << 64) | positions.astype(object)
        return [record_rng(self._seed, int(key), "random_map") for key in keys]

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[U]:
        fn, out = self._fn, []
        elements = fetch(self._parent, positions, epochs)
        try:
            for element, rng in zip(elements, self._rngs(positions, epochs), strict=True):
                out.append(DROPPED if element is DROPPED else fn(element, rng))
        except Exception as error:
            self._fail(error, positions, len(out))
            raise
        return out

    def __repr__(self) -> str:
        return f"RandomMapMap({self._parent!r}, {self._fn_shown}, seed={self._seed})"


class FilterMap(_ElementOp[T]):
    """Keeps the elements for which `predicate(element)` is truthy.

    Positions stay: a dropped element reads as `chute_sources.DROPPED`, so random
    access and checkpoints remain O(1); iteration skips dropped positions. A
    `FilterWarning` is issued once if more than 90% of a window of 1000 elements seen in
    this process were dropped (a filter that drops almost everything wastes the reads);
    `thresholds` (a `FilterThresholds`, shared by the filters of a pipeline) changes
    that share, or makes the filter raise `FilterRatioError` above another.

    Example:
        >>> ds = FilterMap(range(6), lambda x: x % 3 == 0)
        >>> ds.__getitems__([0, 1, 3]), list(ds)
        ([0, DROPPED, 3], [0, 3])
    """

    _op = "filter"

    def __init__(
        self,
        parent: RandomAccessDataSource[T],
        predicate: Callable[[T], Any] | Any,
        thresholds: FilterThresholds | None = None,
    ) -> None:
        super().__init__(parent, predicate)
        self._may_drop = True
        self._predicate = as_filter_fn(predicate)
        self._counter = FilterCounter(thresholds, f"filter({self._fn_shown})")

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[T | Any]:
        keep, out = self._predicate, []
        elements = fetch(self._parent, positions, epochs)
        try:
            for element in elements:
                out.append(element if element is not DROPPED and keep(element) else DROPPED)
        except Exception as error:
            self._fail(error, positions, len(out))
            raise
        self._counter.count_out(out)
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()  # Each process counts its own windows.
        state["_counter"] = FilterCounter(self._counter.thresholds, self._counter.shown)
        return state
