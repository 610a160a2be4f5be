"""`WindowShuffleIter`: shuffles a stream within consecutive windows, restorable by position."""

from __future__ import annotations

import sys
from typing import Any, TypeVar

from chute_core import (
    CheckpointableIterator,
    InvalidStateError,
    IteratorState,
    StageTraits,
    declare_op,
)
from chute_core.internal import check_int, check_seed, state_dict, state_int

from ._iter_base import IterNode
from ._mix_iter import check_iterator
from ._permutation import Permutation
from ._window_states import reads_pairs, span_positions, window_reads, window_span

__all__ = ["WINDOW_SHUFFLE", "WindowShuffleIter"]

_UNSPANNED: list[Any] = []
"""`WindowShuffleIter._span` of a window read whose positions no state needed yet."""

T = TypeVar("T")


class WindowShuffleIter(IterNode[T]):
    """Reads `window_size` elements of `parent`, yields them permuted, and repeats.

    Window `w` is permuted by `Permutation(len(window), seed, epoch=w)` (the last window
    may be shorter), so the output is a pure function of the parent's stream and the
    seed. The state does **not** hold the window's elements: it is the parent's state at
    the start of the current window, the window's number and the offset in it (inside a
    window also its positions, for resharding: see `_window_states`). Restoring
    re-reads the window from the parent, so it costs up to `window_size` parent elements
    (their reading and any work the parent does on them) and `window_size` elements of
    memory, as the window itself does. An element keeps the `origin` it had in the
    parent (the window stores the origins alongside the elements).

    Args:
        parent: a checkpointable iterator.
        window_size: elements per window (>= 1).
        seed: an int in `[0, 2**64)`.

    Example:
        >>> from chute_samplers import SequentialIter
        >>> it = WindowShuffleIter(SequentialIter(range(10)), window_size=4, seed=0)
        >>> out = list(it)
        >>> sorted(out[:4]), sorted(out[4:8]), sorted(out[8:])
        ([0, 1, 2, 3], [4, 5, 6, 7], [8, 9])
        >>> it.origin == (out[-1],)  # The position the last element had in the parent.
        True
    """

    def __init__(self, parent: CheckpointableIterator[T], window_size: int, seed: int) -> None:
        check_iterator(parent, "WindowShuffleIter", "parent")
        self._parent = parent
        self._window_size = check_int(window_size, "window_size", "WindowShuffleIter", minimum=1)
        self._seed = check_seed(seed, "WindowShuffleIter")
        self._window_start: IteratorState | None = None  # None: at the parent's position.
        self._window_index = 0
        self._offset = 0
        self._window: list[T] | None = None
        self._origins: list[tuple[int, ...] | None] = []  # Of the window's elements.
        self._order: list[int] = []
        self._origin: tuple[int, ...] | None = None  # Of the element last returned.
        # The window's positions (`_window_states`): from the state restored until the
        # window is read again, then worked out when a state first needs them
        # (`_UNSPANNED` until then); None: its elements have no one-int origins.
        self._span: list[Any] | None = None
        # Over an interleave (two-int origins): the window's elements as read (see
        # `_window_states`), written once per window as `_span` is.
        self._reads: list[Any] | None = None

    @property
    def origin(self) -> tuple[int, ...] | None:
        """The origin the element last returned had in the parent."""
        return self._origin

    def _load(self) -> None:
        if self._window_start is None:
            self._window_start = self._parent.get_state()
        else:
            self._parent.set_state(self._window_start)
        parent = self._parent
        window: list[T] = []
        origins: list[tuple[int, ...] | None] = []
        while len(window) < self._window_size:
            try:
                window.append(next(parent))
            except StopIteration:
                break
            origins.append(getattr(parent, "origin", None))
        if self._offset > len(window):
            raise InvalidStateError(
                f"WindowShuffleIter: the state's offset {self._offset} is past the end of its "
                f"window ({len(window)} elements); the state belongs to another pipeline."
            )
        if self._span is not None and window_span(origins) != self._span:
            raise InvalidStateError(
                f"WindowShuffleIter: the state's window holds the positions {self._span!r:.80}, "
                f"but reading it again gave {window_span(origins)!r:.80}; the state belongs to "
                "another pipeline."
            )
        if self._reads is not None and window_reads(origins) != self._reads:
            raise InvalidStateError(
                f"WindowShuffleIter: the state's window holds the elements {self._reads!r:.80}, "
                f"but reading it again gave {window_reads(origins)!r:.80}; the state belongs to "
                "another pipeline."
            )
        self._window, self._origins, self._span = window, origins, _UNSPANNED
        self._reads = _UNSPANNED
        perm = Permutation(len(window), self._seed, self._window_index)
        self._order = perm.take(range(len(window))).tolist()

    def __next__(self) -> T:
        if self._window is None:
            self._load()
        assert self._window is not None
        if self._offset == len(self._window):
            if len(self._window) < self._window_size:
                raise StopIteration  # The parent ended inside this window.
            self._window_start, self._window, self._span = None, None, None
            self._reads = None
            self._window_index += 1
            self._offset = 0
            return next(self)
        index = self._order[self._offset]
        self._offset += 1
        self._origin = self._origins[index]
        return self._window[index]

    def get_state(self) -> IteratorState:
        full = self._window is not None and self._offset == len(self._window)
        if self._window_start is None or (full and len(self._window or ()) == self._window_size):
            # Between windows: the next window starts at the parent's position.
            index = self._window_index + (1 if self._window_start is not None else 0)
            return {"window_start": self._parent.get_state(), "window": index, "offset": 0}
        state: IteratorState = {
            "window_start": self._window_start,
            "window": self._window_index,
            "offset": self._offset,
        }
        if self._offset:  # What resharding needs (see above), once per window.
            if self._span is _UNSPANNED:
                self._span = window_span(self._origins)
            if self._span is not None:
                state["span"] = list(self._span)
            else:  # Over an interleave: the window's elements as read.
                if self._reads is _UNSPANNED:
                    self._reads = window_reads(self._origins)
                if self._reads is not None:
                    state["reads"] = list(self._reads)
        return state

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(self, state, ("window_start", "window", "offset"), ("span", "reads"))
        # No stream reaches window sys.maxsize // window_size: its elements are counted.
        most = sys.maxsize // self._window_size
        window_index = state_int(self, checked, "window", maximum=most)
        offset = state_int(self, checked, "offset", maximum=self._window_size)
        start = checked["window_start"]
        if not isinstance(start, dict):
            raise InvalidStateError(
                f"{self!r}: state['window_start'] must be the parent's state (a dict), got "
                f"{start!r}."
            )
        span, reads = checked.get("span"), checked.get("reads")
        if span is not None:
            # Checked now: a damaged state moves nothing.
            span_positions(span, repr(self), self._window_size)
        if reads is not None and len(reads_pairs(reads, repr(self), self._window_size)) < offset:
            raise InvalidStateError(
                f"{self!r}: state['reads'] names fewer elements than the {offset} yielded."
            )
        self._parent.set_state(start)
        self._window_start, self._window_index, self._offset = start, window_index, offset
        self._window, self._origins, self._origin = None, [], None
        self._span = list(span) if isinstance(span, list) else None
        self._reads = list(reads) if isinstance(reads, list) else None

    def __repr__(self) -> str:
        return (
            f"WindowShuffleIter({self._parent!r}, window_size={self._window_size}, "
            f"seed={self._seed})"
        )


WINDOW_SHUFFLE = declare_op(
    "window_shuffle",
    StageTraits(random=True, holds=True),
    iter_node=WindowShuffleIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""
