"""The layout of a stream op's state around its parent's: `{"parent": ..., ...}`.

Every op over one parent iterator keeps the parent's state under `"parent"`, plus its
own counters (`"index"`: elements it has handed out, for error notes). A flat map adds
`"offset"`, `"at"` and `"skip"` (see `_flat_map_iter`): resharded, its element goes
back to be read, and the outputs delivered of it are skipped by whichever process reads
it. `SkipErrorsIter` adds `"errors"`: its failure count and the elements it skipped, by
their position in its shard. `PARENT_STATES` tells resharding how to reach the parent's
state and how to rebuild the op's around a moved one. Resharded, the skipped elements
are consumed (no new process reads them again), so the list is emptied, and the
processes share the failure count (`failures`, `with_failures`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Literal, overload

from chute_core import InvalidStateError

from ._element_keys import Key, element_key, key_from_json, key_json

__all__ = [
    "MAX_SKIPS",
    "PARENT_STATES",
    "ParentStates",
    "parent_position",
    "position_counts",
    "take_skip",
]

MAX_SKIPS = 1_000_000
"""The most entries a `skip` or `drop` list may hold (a bound on untrusted input: one per
process of the reshards whose elements are still ahead)."""

_PARENT = "parent"
_INDEX = "index"
_ERRORS = "errors"
_OFFSET, _AT, _SKIP = "offset", "at", "skip"  # A flat map's (see `_flat_map_iter`).
_KEYS = {_PARENT, _INDEX, _ERRORS, _OFFSET, _AT, _SKIP}


class ParentStates:
    """`chute_core.WrapperLayout` of the ops in this layer (and workers' batches).

    Example:
        >>> PARENT_STATES.inner({"parent": {"position": 4}, "index": 4})
        {'position': 4}
        >>> PARENT_STATES.rebuild({"parent": {}, "index": 4}, {"position": 2}, (1, 2))
        {'parent': {'position': 2}, 'index': 2}
    """

    def inner(self, state: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The parent's state; None if `state` wraps none."""
        if _PARENT not in state:
            return None
        if not set(state) <= _KEYS:
            raise ValueError(f"unexpected keys in the state {dict(state)!r:.200}.")
        parent: Mapping[str, Any] = state[_PARENT]
        return parent

    def rebuild(
        self, state: Mapping[str, Any], inner: dict[str, Any], scale: tuple[int, int]
    ) -> dict[str, Any]:
        """`state` around `inner`, its element count scaled like the positions."""
        rebuilt: dict[str, Any] = {_PARENT: inner}
        if _INDEX in state:  # Counts elements for error notes; scaled like the positions.
            rebuilt[_INDEX] = int(state[_INDEX]) * scale[0] // scale[1]
        if _ERRORS in state:  # The skipped elements are behind every new process.
            rebuilt[_ERRORS] = {"failures": self.failures(state), "skipped": []}
        if _OFFSET in state:  # A flat map: its element goes back to be read (see `skips`).
            rebuilt[_OFFSET] = 0
        return rebuilt

    def is_split(self, state: Mapping[str, Any]) -> bool:
        """Whether `state` is a flat map's (it counts outputs of its current element)."""
        return _PARENT in state and _OFFSET in state

    def delivered(self, state: Mapping[str, Any]) -> dict[Key, int]:
        """A flat map state's outputs delivered ahead of its parent, by element position.

        The element it stopped inside (`at`, its outputs yielded and those skipped
        before), and the `skip` entries it has not reached: {position: outputs}, a
        position being `(input, position)` over an interleave (see `_element_keys`).

        Raises:
            ValueError: a damaged entry, or outputs yielded inside an element whose
                position the state does not name.

        Example:
            >>> PARENT_STATES.delivered(
            ...     {"parent": {}, "index": 2, "offset": 1, "at": 7, "skip": [[7, 2], [9, 1]]})
            {7: 3, 9: 1}
            >>> PARENT_STATES.delivered({"parent": {}, "offset": 2, "at": [1, 4]})
            {(1, 4): 2}
        """
        entries: dict[Key, int] = {}
        for entry in state.get(_SKIP, []):
            if not (isinstance(entry, list) and len(entry) == 2):
                raise ValueError(f"a skip entry is [position, outputs], got {entry!r:.80}.")
            position, outputs = key_from_json(entry[0]), entry[1]
            if position is None or type(outputs) is not int or outputs < 1:
                raise ValueError(
                    f"a skip entry is [position, outputs] (position an int >= 0 or [input, "
                    f"position], outputs an int >= 1), got {entry!r:.80}."
                )
            entries[position] = outputs
        offset = state.get(_OFFSET, 0)
        if type(offset) is not int or offset < 0:
            raise ValueError(f"a flat map's offset is an int >= 0, got {offset!r:.80}.")
        if offset:
            at = key_from_json(state.get(_AT))
            if at is None:
                raise ValueError(
                    f"the flat map stopped inside an element ({offset} outputs yielded) "
                    "whose position its state does not name ('at'): it was saved by a chute "
                    "too old to reshard it, or the element has no position (over an "
                    "interleave, a stream that does not number its records, which every "
                    "stream must); save again at an element boundary."
                )
            entries[at] = entries.get(at, 0) + offset
        return entries

    def with_skips(self, state: dict[str, Any], entries: list[list[Any]]) -> dict[str, Any]:
        """A rebuilt flat map state that drops `entries` ([position, outputs]) on the way."""
        state.pop(_AT, None)
        if entries:
            state[_SKIP] = entries
        else:
            state.pop(_SKIP, None)
        return state

    def failures(self, state: Mapping[str, Any]) -> int:
        """The failures an error budget's state counts (0 for other ops' states).

        Raises:
            ValueError: a count that is no non-negative int.

        Example:
            >>> PARENT_STATES.failures({"parent": {}, "errors": {"failures": 3, "skipped": []}})
            3
        """
        errors = state.get(_ERRORS)
        if errors is None:
            return 0
        count = errors.get("failures") if isinstance(errors, Mapping) else None
        if type(count) is not int or count < 0:
            raise ValueError(f"the error budget's state {errors!r:.200} has no failure count.")
        return count

    def with_failures(self, state: dict[str, Any], failures: int) -> dict[str, Any]:
        """`state` (an error budget's, rebuilt) counting `failures` instead."""
        if _ERRORS in state:
            state[_ERRORS] = {"failures": failures, "skipped": []}
        return state


PARENT_STATES = ParentStates()


@overload
def position_counts(
    owner: object, value: object, key: str, unit: str, pairs: Literal[False] = False
) -> dict[int, int]: ...
@overload
def position_counts(
    owner: object, value: object, key: str, unit: str, pairs: Literal[True]
) -> dict[Key, int]: ...
def position_counts(
    owner: object, value: object, key: str, unit: str, pairs: bool = False
) -> dict[int, int] | dict[Key, int]:
    """A state's `[[position, count], ...]` list as {position: count}, checked.

    At most `MAX_SKIPS` pairs, each position (an int >= 0, or with `pairs` also
    `[input, position]`, over an interleave: see `_element_keys`) once, each count an
    int >= 1.

    Raises:
        InvalidStateError: anything else (the message names `key` and `unit`).

    Example:
        >>> position_counts("it", [[4, 2], [9, 1]], "skip", "outputs")
        {4: 2, 9: 1}
        >>> position_counts("it", [[[3, 4], 2]], "skip", "outputs", pairs=True)
        {(3, 4): 2}
    """
    entries: dict[Key, int] = {}
    if isinstance(value, list) and len(value) <= MAX_SKIPS:
        for entry in value:
            if not (isinstance(entry, list) and len(entry) == 2):
                break
            position, count = key_from_json(entry[0]), entry[1]
            if (
                position is None
                or (isinstance(position, tuple) and not pairs)
                or type(count) is not int
                or not 1 <= count <= sys.maxsize
                or position in entries
            ):
                break
            entries[position] = count
        else:
            return entries
    kinds = "an int >= 0 or [input, position]" if pairs else "an int >= 0"
    raise InvalidStateError(
        f"{owner!r}: state[{key!r}] must list at most {MAX_SKIPS:,} [position, {unit}] pairs "
        f"(position {kinds}, each once; {unit} an int >= 1), got {value!r:.200}."
    )


def parent_position(parent: object) -> int | None:
    """The parent's one-int origin of the element it last gave (None without one).

    Example:
        >>> class Parent:
        ...     origin = (7,)
        >>> parent_position(Parent()), parent_position(object())
        (7, None)
    """
    origin: tuple[int, ...] | None = getattr(parent, "origin", None)
    return origin[0] if origin is not None and len(origin) == 1 else None


def take_skip(owner: object, skips: dict[Any, int], parent: object, most: int, unit: str) -> int:
    """Pops the `skip` entry of the element `parent` just gave: its outputs delivered elsewhere.

    A resharded state of a stage that splits elements (a flat map, unbatch, rebatch)
    lists, by the element's position (or input and position, over an interleave), how
    many of its first outputs another process delivered; each entry is used up once its
    element is read.

    Raises:
        InvalidStateError: the parent's element has no such origin, or the entry counts
            more than `most` outputs (`unit` names them); the entry is kept.

    Example:
        >>> class Parent:
        ...     origin = (4,)
        >>> skips = {4: 2, 9: 1}
        >>> take_skip("it", skips, Parent(), 3, "outputs"), skips
        (2, {9: 1})
    """
    position = element_key(parent)
    if position is None and all(isinstance(key, tuple) for key in skips):
        return 0  # Entries name elements of an interleave's numbered streams; not this.
    if position is None:
        raise InvalidStateError(
            f"{owner!r}: the state lists {unit} to skip by position, but the parent's element "
            f"has no position as origin ({getattr(parent, 'origin', None)}); the state belongs "
            "to another pipeline."
        )
    # Not pruned by position: a window shuffle before yields positions out of order.
    dropped = skips.pop(position, 0)
    if dropped > most:
        skips[position] = dropped
        raise InvalidStateError(
            f"{owner!r}: the state says {dropped} {unit} of position {key_json(position)} were "
            f"delivered elsewhere, but it has {most}; the state belongs to another pipeline."
        )
    return dropped
