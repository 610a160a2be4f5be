"""`FlatMapIter`: each element of a stream becomes zero or more outputs.

The state is the parent's state before the current element, the outputs of it already
yielded (`offset`) and, inside an element, its position (`at`: the parent's origin
`(p,)`, or `[input, p]` over an interleave, when it has one); in a state that
resharding wrote, also `skip`: for elements this process will read whose first outputs
another process already delivered, their position (as `at`) and how many outputs to
drop. So a flat map after `.shard(i, n)` (or over an interleave of the shard's files)
continues on another process count with every output once: the element a process
stopped inside goes to whichever new process reads its position, which drops the
outputs delivered before.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from chute_core import (
    CheckpointableIterator,
    InvalidStateError,
    IteratorState,
    StageTraits,
    declare_op,
)
from chute_core.internal import state_int, state_parent

from ._adapters import as_flat_map_fn
from ._element_keys import Key, element_key, key_json, skip_entries
from ._iter_ops import _StreamOp
from ._map_structure_ops import FlatMapMap
from ._origins import child_origin
from ._state import position_counts, take_skip

__all__ = ["FLAT_MAP", "FlatMapIter"]

U = TypeVar("U")

_LOOK = object()
"""`FlatMapIter._at` before the current element's position was looked up."""

_KEYS = ("parent", "index", "offset")
_OPTIONAL = ("at", "skip")


class FlatMapIter(_StreamOp[U]):
    """Yields every element of `fn(element)` for each element of a stream.

    State: the parent's state before the current element and how many of its outputs
    were yielded; restoring re-computes that one element (its outputs are not stored).
    The `origin` of an output is the element's origin in the parent plus `(k,)`, `k` the
    output's number among the element's outputs. A resharded state may add `skip` (see
    the module docs).

    Example:
        >>> from chute_samplers import SequentialIter
        >>> it = FlatMapIter(SequentialIter(["ab", "", "c"]), list)
        >>> [(output, it.origin) for output in it]
        [('a', (0, 0)), ('b', (0, 1)), ('c', (2, 0))]
        >>> it.set_state({"parent": {"position": 0}, "index": 0, "offset": 0,
        ...               "skip": [[0, 1]]})  # Output 0 of position 0 went elsewhere.
        >>> list(it)
        ['b', 'c']
    """

    _op = "flat_map"

    def __init__(
        self, parent: CheckpointableIterator[Any], fn: Callable[[Any], Iterable[U]] | Any
    ) -> None:
        super().__init__(parent, fn)
        self._fn, self._max_fan_out = as_flat_map_fn(fn)
        self._start = parent.get_state()
        self._outputs: list[U] = []
        self._offset = 0
        self._skips: dict[Key, int] = {}  # Position -> outputs delivered by another process.
        self._dropped = 0  # Outputs of the current element dropped by its skip entry.
        # The current element's position (its parent's origin), looked up when a state
        # needs it (`_LOOK`), not for every element read.
        self._at: Key | object | None = None

    @property
    def origin(self) -> tuple[int, ...] | None:
        """The current element's origin in the parent plus the output's number."""
        return child_origin(self._parent, self._offset + self._dropped)

    def __next__(self) -> U:
        while self._offset >= len(self._outputs):
            start = self._parent.get_state()
            element = next(self._parent)
            if self._ledger is not None and self._replayed():
                self._outputs, self._offset = [], 0
                continue
            try:
                outputs = list(self._fn(element))
                if self._max_fan_out is not None and len(outputs) > self._max_fan_out:
                    raise ValueError(
                        f"the element became {len(outputs)} elements, more than the "
                        f"transform's max_fan_out={self._max_fan_out}."
                    )
            except Exception as error:
                if self._skip(error):
                    self._outputs, self._offset = [], 0
                    continue
                self._parent.set_state(start)
                raise
            if self._skips:  # Only in a resharded state: drop what another process gave.
                dropped = self._skipped_outputs(len(outputs))
                outputs = outputs[dropped:]
            else:
                dropped = 0
            self._start, self._outputs, self._offset = start, outputs, 0
            self._dropped, self._at = dropped, _LOOK
            self._index += 1
        self._offset += 1
        return self._outputs[self._offset - 1]

    def _skipped_outputs(self, count: int) -> int:
        """How many outputs of the element just read to drop (its `skip` entry's)."""
        # Used up once applied (`get_state` adds it back inside the element).
        return take_skip(self, self._skips, self._parent, count, "outputs")

    def get_state(self) -> IteratorState:
        state: IteratorState
        if self._offset >= len(self._outputs):  # Between elements: no replay needed.
            state = {"parent": self._parent.get_state(), "index": self._index, "offset": 0}
            skips = self._skips
        else:
            state = {"parent": self._start, "index": self._index - 1, "offset": self._offset}
            at = self._current_position()
            if at is not None:  # Whose outputs these are.
                state["at"] = key_json(at)
            skips = self._skips
            if self._dropped and at is not None:  # Restored, the element drops them again.
                skips = {**skips, at: self._dropped}
        if skips:
            state["skip"] = skip_entries(skips)
        return state

    def _current_position(self) -> Key | None:
        """The current element's position, looked up once (the parent has not moved)."""
        if self._at is _LOOK:
            self._at = self._position()
        return self._at  # type: ignore[return-value]

    def _position(self) -> Key | None:
        """The parent's origin of the element just read (see `_element_keys`)."""
        return element_key(self._parent)

    @property
    def max_fan_out(self) -> int | None:
        """The transform's declared most outputs of one element (None: not declared)."""
        return self._max_fan_out

    def set_state(self, state: IteratorState, /) -> None:
        """Moves to the output `state` names, re-computing its element if inside one.

        Raises:
            InvalidStateError: the state is malformed, its offset is past the outputs
                of its element (or the declared `max_fan_out`), or there is no element
                there; the iterator stays where it was.
        """
        self._current_position()  # Kept if the state is refused (the parent moves back).
        checked = _checked(self, state)
        index = state_int(self, checked, "index")
        fan_out = self._max_fan_out
        most = sys.maxsize if fan_out is None else fan_out - 1
        offset = state_int(self, checked, "offset", maximum=most)
        parent = state_parent(self, checked)
        skips = position_counts(self, checked.get("skip", []), "skip", "outputs", pairs=True)
        if not offset:
            self._parent.set_state(parent)
            self._index, self._outputs, self._offset = index, [], 0
            self._skips, self._dropped, self._at = skips, 0, None
            return
        previous = self._parent.get_state()
        kept = self._skips
        self._parent.set_state(parent)
        try:
            start = self._parent.get_state()
            try:
                element = next(self._parent)
            except StopIteration:
                raise InvalidStateError(
                    f"{self!r}: state['offset'] = {offset} is inside an element, but the "
                    "parent has no element there; the state belongs to another pipeline."
                ) from None
            outputs = list(self._fn(element))
            at = self._position()
            if "at" in checked and checked["at"] != (None if at is None else key_json(at)):
                raise InvalidStateError(
                    f"{self!r}: state['at'] = {checked['at']!r} names the element the outputs "
                    f"are of, but the element there is at {at}; the state belongs to another "
                    "pipeline."
                )
            self._skips = skips
            dropped = self._skipped_outputs(len(outputs)) if skips else 0
            outputs = outputs[dropped:]
            if offset >= len(outputs):
                raise InvalidStateError(
                    f"{self!r}: state['offset'] = {offset} is out of range [0, "
                    f"{len(outputs) - 1}]: the element there has {len(outputs)} outputs "
                    f"(after {dropped} delivered elsewhere); the state belongs to another "
                    "pipeline."
                )
        except BaseException:
            self._parent.set_state(previous)  # A refused state moves nothing.
            self._skips = kept
            raise
        self._start, self._outputs, self._offset, self._index = start, outputs, offset, index + 1
        self._dropped, self._at = dropped, at


def _checked(owner: object, state: object) -> IteratorState:
    """`state` if it is a dict with the flat map's keys (and optionally `skip`)."""
    if not isinstance(state, dict):
        raise InvalidStateError(
            f"{owner!r}: a state is a dict with keys {list(_KEYS)} (from get_state()), got "
            f"{type(state).__name__} {state!r:.200}."
        )
    missing = [key for key in _KEYS if key not in state]
    unknown = sorted(str(key) for key in state if key not in (*_KEYS, *_OPTIONAL))
    if missing or unknown:
        raise InvalidStateError(
            f"{owner!r}: a state has the keys {list(_KEYS)} and optionally {list(_OPTIONAL)}; "
            f"missing {missing}, unknown {unknown}. Was it saved by another iterator?"
        )
    return state


FLAT_MAP = declare_op(
    "flat_map",
    # As a stream op it splits; `MapDataset.flat_map` (FlatMapMap) lays outputs out in
    # slots of max_fan_out positions, which resharding refuses before the stream begins.
    StageTraits(elementwise=True, drops=True, splits=True),
    map_node=FlatMapMap,
    iter_node=FlatMapIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""
