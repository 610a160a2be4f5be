"""Element ops over streams (checkpointable iterators): map, random map, filter.

Each wraps a parent iterator. The state holds the parent's state and a count: the
index of the next element in this op's input (for `map_with_index`, whose results
depend on it, for error notes and for `random_map` over a parent without origins); the
flat map (`_flat_map_iter`) shares their base. An exception from the user's function
keeps its type and gains a note naming the op and the element's index in the stream.
Under an error budget (an active `chute_sources.ErrorLedger` when the op is built), a
failing element is skipped instead and charged to the budget.

Origins (`IterNode.origin`): map, map with index, random map and filter pass their
parent's on (read lazily: a chain of properties, nothing stored per element).
`random_map` keys its randomness by the origin, so its draws do not depend on how many
elements a filter upstream dropped, nor on how the stream is cut into chunks for workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from chute_core import (
    CheckpointableIterator,
    IteratorState,
    StageTraits,
    declare_op,
)
from chute_core.internal import active_ledger, state_dict, state_int, state_parent
from chute_samplers import IterNode, record_rng
from chute_samplers.internal import origin_key

from ._adapters import (
    as_filter_fn,
    as_map_fn,
    as_map_with_index_fn,
)
from ._filter_thresholds import FilterCounter, FilterThresholds
from ._map_ops import FilterMap, MapMap, MapWithIndexMap, RandomMapMap, fn_name
from ._record_rng import OriginRecords, random_map_parts, record_key_rngs
from ._stage_errors import annotate

__all__ = [
    "MAP",
    "MAP_WITH_INDEX",
    "RANDOM_MAP",
    "FILTER",
    "FilterIter",
    "MapIter",
    "MapWithIndexIter",
    "RandomMapIter",
]

T = TypeVar("T")
U = TypeVar("U")


class _StreamOp(IterNode[U]):
    _op = "op"

    def __init__(self, parent: CheckpointableIterator[Any], fn: object) -> None:
        self._parent = parent
        self._fn_shown = fn_name(fn)
        self._index = 0
        self._ledger = active_ledger()
        self._stage = 0 if self._ledger is None else self._ledger.register()
        self._skipped = 0  # Elements skipped, for streams without origins.

    @property
    def parent(self) -> CheckpointableIterator[Any]:
        """The iterator this op reads from."""
        return self._parent

    @property
    def max_fan_out(self) -> int | None:
        """The most outputs one input element gives (1; a flat map: None if undeclared).

        Example:
            >>> from chute_samplers import SequentialIter
            >>> MapIter(SequentialIter([1]), abs).max_fan_out
            1
        """
        return 1

    @property
    def origin(self) -> tuple[int, ...] | None:
        """The parent's origin of the element last returned (None if it has none)."""
        origin: tuple[int, ...] | None = getattr(self._parent, "origin", None)
        return origin

    def _fail(self, error: BaseException) -> None:
        # The origin names the element the same way with any number of workers (a
        # worker's stream starts at its chunk); the index counts this stream's elements.
        origin = self._input_origin()
        if origin:
            where = f"position {origin[0]}"
            if len(origin) > 1:
                where += f" (origin {origin})"
        else:
            where = f"index {self._index} of the stream"
        annotate(error, f"{self._op}({self._fn_shown})", where)

    def _skip(self, error: BaseException) -> bool:
        """Annotates `error`; True if the budget skips the element (else re-raise it).

        Raises:
            ErrorBudgetExceededError: the budget does not allow one more failure.
        """
        self._fail(error)
        ledger = self._ledger
        if ledger is None:
            return False
        origin = self._input_origin()
        seen = origin[0] + 1 if origin else self._index + self._skipped + 1
        ledger.charge(self._stage, origin, f"{self._op}({self._fn_shown})", error, seen)
        self._skipped += 1
        return True

    def _replayed(self) -> bool:
        """Whether the element just read was skipped before a restore (skip it unrun)."""
        ledger = self._ledger
        return (
            ledger is not None
            and bool(ledger.replay)
            and ledger.replays(self._stage, self._input_origin())
        )

    def _input_origin(self) -> tuple[int, ...] | None:
        """The origin of the element this op read last (its parent's)."""
        origin: tuple[int, ...] | None = getattr(self._parent, "origin", None)
        return origin

    def get_state(self) -> IteratorState:
        return {"parent": self._parent.get_state(), "index": self._index}

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(self, state, ("parent", "index"))
        index = state_int(self, checked, "index")
        self._parent.set_state(state_parent(self, checked))
        self._index = index

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._parent!r}, {self._fn_shown})"


class MapIter(_StreamOp[U]):
    """`fn(element)` for each element of a stream.

    Example:
        >>> from chute_samplers import SequentialIter
        >>> list(MapIter(SequentialIter([1, 2]), lambda x: -x))
        [-1, -2]
    """

    _op = "map"

    def __init__(self, parent: CheckpointableIterator[Any], fn: Callable[[Any], U] | Any) -> None:
        super().__init__(parent, fn)
        self._fn = as_map_fn(fn)

    def __next__(self) -> U:
        while True:
            element = next(self._parent)
            if self._ledger is not None and self._replayed():
                continue
            try:
                result: U = self._fn(element)
            except Exception as error:
                if not self._skip(error):
                    raise
                continue
            self._index += 1
            return result


class MapWithIndexIter(_StreamOp[U]):
    """`fn(index, element)`, the index counting the stream's elements from 0.

    Example:
        >>> from chute_samplers import SequentialIter
        >>> list(MapWithIndexIter(SequentialIter(["a", "b"]), lambda i, x: x * (i + 1)))
        ['a', 'bb']
    """

    _op = "map_with_index"

    def __init__(
        self, parent: CheckpointableIterator[Any], fn: Callable[[int, Any], U] | Any
    ) -> None:
        super().__init__(parent, fn)
        self._fn = as_map_with_index_fn(fn)

    def __next__(self) -> U:
        while True:
            element = next(self._parent)
            if self._ledger is not None and self._replayed():
                continue
            try:
                result: U = self._fn(self._index, element)
            except Exception as error:
                if not self._skip(error):
                    raise
                continue
            self._index += 1
            return result


class RandomMapIter(_StreamOp[U]):
    """`fn(element, rng)`, the generator a pure function of (seed, the element's origin).

    The generator is `record_rng(seed, key, "random_map")`, keyed by where the element
    came from (`IterNode.origin`), not by how many elements came before it: the draws do
    not change when a filter upstream drops other elements, nor with how the stream is
    cut into chunks or worker processes. The key is `origin[0]` for a one-int origin
    (a base position: `RandomMapIter(SequentialIter(ds), fn, seed)` draws exactly what
    `RandomMapMap(ds, fn, seed)` draws at the same positions when iterated), and for a
    longer origin (after a flat map, a mix, ...) `chute_samplers._hashing.origin_key`:
    a 128-bit hash of it with the top bit set, so never a position below 2**63.

    With `key="record"`, the generator is keyed by the record instead: the origin's
    position in the dataset the stream reads (`chute_samplers.reader_dataset`) is
    followed down to the source (`chute_samplers.record_keys`), and the draws are
    those of `RandomMapMap(..., key="record")` for that record. That needs a one-int
    origin over a dataset read in order: after a flat map, a mix, a repeat of the
    stream or a custom iterator it raises `InvalidArgumentError`.

    Fallback: if the parent gives no origin (None, e.g. a custom iterator without
    `origin`), the key is the element's index in this op's input, counted from 0, as
    before origins existed. Then the draws depend on everything upstream that changes
    that count (a filter's drops) and on how the stream is split: a worker processing
    a chunk would number its elements from the chunk's start.

    Example:
        >>> from chute_samplers import SequentialIter
        >>> draw = lambda x, rng: round(x + rng.random(), 3)
        >>> list(RandomMapIter(SequentialIter([0, 0]), draw, seed=7)) == list(
        ...     RandomMapIter(SequentialIter([0, 0]), draw, seed=7))
        True
        >>> from chute_transforms import FilterIter, RandomMapMap
        >>> kept = RandomMapIter(FilterIter(SequentialIter(range(4)), lambda x: x != 1),
        ...                      draw, seed=7)
        >>> list(kept) == [RandomMapMap(range(4), draw, seed=7)[p] for p in (0, 2, 3)]
        True
    """

    _op = "random_map"

    def __init__(
        self,
        parent: CheckpointableIterator[Any],
        fn: Callable[[Any, np.random.Generator], U] | Any,
        seed: int,
        key: str = "position",
    ) -> None:
        super().__init__(parent, fn)
        self._fn, self._seed, self._by_record = random_map_parts(fn, seed, key, "RandomMapIter")
        self._records = OriginRecords(parent, f"random_map({self._fn_shown}, key='record')")

    def __next__(self) -> U:
        parent = self._parent
        while True:
            element = next(parent)
            if self._ledger is not None and self._replayed():
                continue
            origin: tuple[int, ...] | None = getattr(parent, "origin", None)
            if self._by_record:
                rng = self._record_rng(origin)
            elif origin is None:
                rng = record_rng(self._seed, self._index + self._skipped, "random_map")
            elif len(origin) == 1:
                rng = record_rng(self._seed, origin[0], "random_map")
            else:
                rng = record_rng(self._seed, origin_key(origin), "random_map")
            try:
                result: U = self._fn(element, rng)
            except Exception as error:
                if not self._skip(error):
                    raise
                continue
            self._index += 1
            return result

    def _record_rng(self, origin: tuple[int, ...] | None) -> np.random.Generator:
        """The generator of the record the origin `(p,)` read (see the class docs)."""
        key, passes = self._records.record(origin)
        return record_key_rngs(self._seed, np.array([key]), np.array([passes], np.uint64))[0]

    def __repr__(self) -> str:
        return f"RandomMapIter({self._parent!r}, {self._fn_shown}, seed={self._seed})"


class FilterIter(_StreamOp[T]):
    """Yields the elements for which `predicate(element)` is truthy.

    Example:
        >>> from chute_samplers import SequentialIter
        >>> list(FilterIter(SequentialIter(range(7)), lambda x: x % 3 == 0))
        [0, 3, 6]
    """

    _op = "filter"

    def __init__(
        self,
        parent: CheckpointableIterator[T],
        predicate: Callable[[T], Any] | Any,
        thresholds: FilterThresholds | None = None,
    ) -> None:
        super().__init__(parent, predicate)
        self._predicate = as_filter_fn(predicate)
        self._counter = FilterCounter(thresholds, f"filter({self._fn_shown})")

    def __next__(self) -> T:
        keep, counter = self._predicate, self._counter
        while True:
            element: T = next(self._parent)
            if self._ledger is not None and self._replayed():
                continue
            try:
                kept = keep(element)
            except Exception as error:
                if not self._skip(error):
                    raise
                continue
            self._index += 1
            counter.count(1, 0 if kept else 1)
            if kept:
                return element


MAP = declare_op(
    "map",
    StageTraits(elementwise=True, keeps_positions=True),
    map_node=MapMap,
    iter_node=MapIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""


MAP_WITH_INDEX = declare_op(
    "map_with_index",
    # One output per input position: after a shard it reshards like `map`. The index it
    # passes is the host's own number for the element (its shard's position before the
    # stream, its stream's count after), which a new process count gives anew: a pure
    # function of the saved states and the count, as `random_map(key="position")`'s draws.
    StageTraits(keeps_positions=True, numbered="always"),
    map_node=MapWithIndexMap,
    iter_node=MapWithIndexIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""


RANDOM_MAP = declare_op(
    "random_map",
    # One output per input position: after a shard it reshards like `map`. Its draws
    # follow the element's origin (key="position": the reader's position, which another
    # process count numbers differently) or its record (key="record": the same draws on
    # any process count).
    StageTraits(elementwise=True, keeps_positions=True, random=True, numbered="key"),
    map_node=RandomMapMap,
    iter_node=RandomMapIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""


FILTER = declare_op(
    "filter",
    StageTraits(elementwise=True, keeps_positions=True, drops=True),
    map_node=FilterMap,
    iter_node=FilterIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""
