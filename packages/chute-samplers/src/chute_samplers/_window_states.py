"""A window shuffle's state as resharding reads it: where its window began, what it gave.

`WindowShuffleIter`'s state is its parent's state at the start of the current window
(`window_start`), the window's number (`window`) and how many of its elements it
yielded (`offset`). Inside a window it also names the window's positions (`span`: the
parent's one-int origins of its elements, in the order they were read):

- `[first, count]`: the positions `first, first + 1, ..., first + count - 1`;
- `[first, count, mask]`: `count` positions from `first` on, those whose bit is set in
  `mask` (base64 of the bits over `first, first + 1, ...`, little-endian bit order),
  when a filter before the shuffle left gaps.

When the elements come from an interleave of streams, their origins are two ints (the
stream's input and the element's position in it) and no `span` is written; the state
names instead the window's elements as they were read (`reads`: `[[[input, span], ...],
order]`, a `span` of positions per input, ascending inputs, and `order`, base64 of one
index into those inputs per element in the order read). Like `span`, it is written
once per window. Resharding takes the first `offset` of the window's permutation and
hands what they name to the interleave's new owners to skip
(`chute_samplers.internal.OPEN_STREAMS`).

Resharded, the process's position is its parent's at the window's start, so the window
goes back to be read; the elements it already yielded, the first `offset` of the
window's permutation (`WINDOW_STATES.taken`), are skipped by whichever new process
reads their positions (a `Frontier`'s `taken`). A state so holds two ints and at most a
window's bits beyond what it held before.

Example:
    >>> window_span([(4,), (5,), (6,)]), window_span([(4,), (6,)])
    ([4, 3], [4, 2, 'BQ=='])
    >>> span_positions([4, 2, "BQ=="], "state").tolist()
    [4, 6]
"""

from __future__ import annotations

import base64
import binascii
import itertools
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from chute_core import InvalidStateError

from ._permutation import Permutation

__all__ = [
    "MAX_SPAN_BITS",
    "WINDOW_STATES",
    "WindowStates",
    "positions_span",
    "reads_pairs",
    "span_positions",
    "spans_pairs",
    "window_reads",
    "window_span",
]

MAX_SPAN_BITS = 1 << 24
"""The most positions a `span`'s bitmask may cover (a bound on untrusted input)."""

_START, _WINDOW, _OFFSET, _SPAN = "window_start", "window", "offset", "span"
_READS = "reads"
_KEYS = {_START, _WINDOW, _OFFSET, _SPAN, _READS}


def window_span(origins: Sequence[tuple[int, ...] | None]) -> list[Any] | None:
    """The `span` of a window whose elements had `origins` (None: not all one-int)."""
    positions: list[int] = []
    for origin in origins:
        if origin is None or len(origin) != 1:
            return None
        positions.append(origin[0])
    return positions_span(positions)


def window_reads(origins: Sequence[tuple[int, ...] | None]) -> list[Any] | None:
    """The `reads` of a window whose elements had two-int `origins`, in the order read.

    None: other origins, or an input's positions not ascending. Once per window, in
    numpy (a window holds thousands of elements).

    Example:
        >>> window_reads([(3, 0), (1, 4), (3, 1)])
        [[[1, [4, 1]], [3, [0, 2]]], 'AQAB']
    """
    try:  # None, or an origin of another kind, fails here.
        if not origins or set(map(len, origins)) != {2}:  # type: ignore[arg-type]
            return None
        flat = np.fromiter(itertools.chain.from_iterable(origins), np.int64)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    numbers, positions = flat[0::2], flat[1::2]
    inputs = np.array(sorted(set(numbers.tolist())), np.int64)  # Few: faster than a sort.
    spans: list[Any] = []
    for number in inputs.tolist():
        own = positions[numbers == number]
        if len(own) > 1 and np.any(own[1:] <= own[:-1]):
            return None  # Not a stream read in order.
        spans.append([number, _array_span(own)])
    order = np.searchsorted(inputs, numbers).astype(np.uint8 if len(inputs) <= 256 else np.uint16)
    return [spans, base64.b64encode(order.tobytes()).decode()]


def _array_span(positions: np.ndarray) -> list[Any]:
    """`positions_span` of ascending positions given as an array."""
    first, count = int(positions[0]), len(positions)
    if int(positions[-1]) - first + 1 == count:
        return [first, count]
    bits = np.zeros(int(positions[-1]) - first + 1, dtype=bool)
    bits[positions - first] = True
    return [first, count, base64.b64encode(np.packbits(bits, bitorder="little").tobytes()).decode()]


def reads_pairs(reads: object, owner: str, limit: int = MAX_SPAN_BITS) -> list[tuple[int, int]]:
    """What `window_reads` wrote: `(input, position)` per element, in the order read.

    Raises:
        InvalidStateError: damaged (the message says how), or naming more than `limit`.

    Example:
        >>> reads_pairs([[[1, [4, 1]], [3, [0, 2]]], "AQAB"], "state")
        [(3, 0), (1, 4), (3, 1)]
    """
    if isinstance(reads, list) and len(reads) == 2 and isinstance(reads[1], str):
        by_input = spans_pairs(reads[0], owner, limit)
        inputs = list(by_input)
        total = sum(len(p) for p in by_input.values())
        try:
            room = len(reads[1]) <= _b64_room(limit)
            raw = base64.b64decode(reads[1], validate=True) if room else b""
        except (binascii.Error, ValueError):
            raw = b""
        dtype = np.uint8 if len(inputs) <= 256 else np.uint16
        if total and len(raw) == total * np.dtype(dtype).itemsize:
            order = np.frombuffer(raw, dtype)
            counts = np.bincount(order, minlength=len(inputs))
            if len(counts) == len(inputs) and all(
                counts[at] == len(by_input[number]) for at, number in enumerate(inputs)
            ):
                taken = dict.fromkeys(inputs, 0)
                pairs: list[tuple[int, int]] = []
                for at in order.tolist():
                    number = inputs[at]
                    pairs.append((number, int(by_input[number][taken[number]])))
                    taken[number] += 1
                return pairs
    raise InvalidStateError(
        f"{owner}: state['reads'] is [[[input, span], ...], order] (the window's elements "
        "by input, and base64 of one index into those inputs per element, as many as they "
        f"name), got {reads!r:.200}."
    )


def _b64_room(count: int) -> int:
    """The most base64 characters an `order` of `count` elements takes (two bytes each)."""
    return (count * 2 + 2) // 3 * 4


def spans_pairs(spans: object, owner: str, limit: int = MAX_SPAN_BITS) -> dict[int, np.ndarray]:
    """`[[input, span], ...]` (as `window_reads` writes): each input's positions.

    Raises `InvalidStateError` if damaged.

    `limit`: the most positions they may name in all.

    Example:
        >>> spans_pairs([[1, [4, 1]], [3, [0, 2]]], "state")
        {1: array([4]), 3: array([0, 1])}
    """
    found: dict[int, np.ndarray] = {}
    if isinstance(spans, list):
        left = limit
        for entry in spans:
            if not (isinstance(entry, list) and len(entry) == 2 and type(entry[0]) is int):
                break
            if entry[0] < 0 or entry[0] in found:
                break
            positions = span_positions(entry[1], owner, left)
            left -= len(positions)
            found[entry[0]] = positions
        else:
            return found
    raise InvalidStateError(
        f"{owner}: the positions by input are [[input, span], ...] (each input an int >= 0 "
        f"once, each span as `span_positions` reads), got {spans!r:.200}."
    )


def positions_span(positions: Sequence[int]) -> list[Any] | None:
    """Ascending `positions` written as a `span` (None: not ascending).

    Example:
        >>> positions_span([3, 4, 5]), positions_span([3, 9]), positions_span([4, 3, 5])
        ([3, 3], [3, 2, 'QQ=='], None)
    """
    if not positions:
        return [0, 0]
    first, count = positions[0], len(positions)
    at = np.asarray(positions, dtype=np.int64) - first
    if np.any(np.diff(at) <= 0):
        return None  # Not ascending: positions of no one shard read in order.
    if int(at[-1]) + 1 == count:
        return [first, count]
    bits = np.zeros(int(at[-1]) + 1, dtype=bool)
    bits[at] = True
    return [first, count, base64.b64encode(np.packbits(bits, bitorder="little").tobytes()).decode()]


def span_positions(span: object, owner: str, limit: int = MAX_SPAN_BITS) -> np.ndarray:
    """The positions a `span` names, ascending; raises `InvalidStateError` if damaged.

    `limit`: the most positions it may name (what its holder can hold), checked before
    any is made.
    """
    if (
        isinstance(span, list)
        and len(span) in (2, 3)
        and all(type(x) is int and 0 <= x <= sys.maxsize - (1 << 32) for x in span[:2])
        and span[1] <= limit
    ):
        first, count = span[0], span[1]
        if len(span) == 2:
            return np.arange(first, first + count, dtype=np.int64)
        mask = span[2] if len(span) == 3 else None
        if isinstance(mask, str) and len(mask) <= MAX_SPAN_BITS // 6:
            try:
                raw = base64.b64decode(mask, validate=True)
            except (binascii.Error, ValueError):
                raw = None
            if raw is not None:
                at = np.flatnonzero(np.unpackbits(np.frombuffer(raw, np.uint8), bitorder="little"))
                if len(at) == count:
                    positions: np.ndarray = at.astype(np.int64) + first
                    return positions
    raise InvalidStateError(
        f"{owner}: state['span'] is [first, count] or [first, count, mask] (ints >= 0, count "
        f"<= {limit:,}, mask the base64 of count set bits over at most {MAX_SPAN_BITS:,} "
        f"positions), got {span!r:.200}."
    )


class WindowStates:
    """`chute_core.WrapperLayout` of a window shuffle's state, and what its window gave.

    Example:
        >>> state = {"window_start": {"position": 8}, "window": 2, "offset": 2, "span": [8, 4]}
        >>> WINDOW_STATES.inner(state)
        {'position': 8}
        >>> WINDOW_STATES.rebuild(state, {"position": 3}, (2, 3))
        {'window_start': {'position': 3}, 'window': 2, 'offset': 0}
        >>> WINDOW_STATES.taken(state, {"window_size": 4, "seed": 0})  # Of 8, 9, 10, 11.
        [8, 10]
    """

    def inner(self, state: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The parent's state at the window's start; None if `state` is no window's."""
        if _START not in state or not set(state) <= _KEYS:
            return None
        inner: Mapping[str, Any] = state[_START]
        return inner

    def rebuild(
        self, state: Mapping[str, Any], inner: dict[str, Any], scale: tuple[int, int]
    ) -> dict[str, Any]:
        """A fresh window from `inner` on (the old window goes back to be read)."""
        del scale  # The window's number only seeds its permutation.
        return {_START: inner, _WINDOW: state[_WINDOW], _OFFSET: 0}

    def yielded(self, state: Mapping[str, Any], params: Mapping[str, Any]) -> dict[int, list[int]]:
        """Of a window over an interleave: the positions yielded, by the parent's input.

        `params` are the stage's (`window_size`, `seed`).

        Raises:
            InvalidStateError: a damaged state, or elements yielded from a window whose
                elements the state does not name.
        """
        offset, window = _counters(state)
        if not offset:
            return {}
        if _READS not in state:
            raise InvalidStateError(
                f"the window shuffle stopped inside a window ({offset} elements yielded) over "
                "an interleave, whose elements its state does not name ('reads'): they have "
                "no (input, position) origins (one of the streams does not number its "
                "records, which every stream must)."
            )
        size = _window_size(params)
        pairs = reads_pairs(state[_READS], "a window shuffle", size)
        if offset > len(pairs):
            raise InvalidStateError(
                f"the window shuffle's state names {len(pairs)} elements in its window and "
                f"yielded {offset}."
            )
        order = Permutation(len(pairs), int(params["seed"]), window).take(range(offset))
        found: dict[int, list[int]] = {}
        for at in order.tolist():
            number, position = pairs[at]
            found.setdefault(number, []).append(position)
        return {number: sorted(found[number]) for number in sorted(found)}

    def taken(self, state: Mapping[str, Any], params: Mapping[str, Any]) -> list[int]:
        """The parent's positions of the window's elements already yielded, ascending.

        `params` are the stage's (`window_size`, `seed`).

        Raises:
            InvalidStateError: a damaged state, or elements yielded from a window whose
                positions the state does not name.
        """
        offset, window = _counters(state)
        if not offset:
            return []
        if _SPAN not in state:
            raise InvalidStateError(
                f"the window shuffle stopped inside a window ({offset} elements yielded) whose "
                "positions its state does not name ('span'): it was saved by a chute too old "
                "to reshard it, or its elements have no one-int origins; save again at a "
                "window boundary."
            )
        size = _window_size(params)
        positions = span_positions(state[_SPAN], "a window shuffle", size)
        if not offset <= len(positions) <= size:
            raise InvalidStateError(
                f"the window shuffle's state has {len(positions)} positions in its window and "
                f"yielded {offset}, which its window_size {size!r} does not allow."
            )
        order = Permutation(len(positions), int(params["seed"]), window).take(range(offset))
        return sorted(positions[order].tolist())


def _counters(state: Mapping[str, Any]) -> tuple[int, int]:
    """A window state's (offset, window), checked."""
    offset, window = state.get(_OFFSET), state.get(_WINDOW)
    if type(offset) is not int or type(window) is not int or offset < 0 or window < 0:
        raise InvalidStateError(
            f"a window shuffle's window and offset are ints >= 0, got {window!r:.40} and "
            f"{offset!r:.40}."
        )
    return offset, window


def _window_size(params: Mapping[str, Any]) -> int:
    size = params.get("window_size")
    if type(size) is not int:
        raise InvalidStateError(f"a window shuffle's window_size is an int, got {size!r:.40}.")
    return size


WINDOW_STATES = WindowStates()
"""The layout of `WindowShuffleIter`'s state (see `WindowStates`)."""
