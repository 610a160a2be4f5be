"""`ConcatSplitIter`: concatenating sequences and cutting them into rows of one length."""

from __future__ import annotations

import dataclasses
import itertools
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Self

import numpy.typing as npt

from chute_core import CheckpointableIterator, InvalidStateError, IteratorState
from chute_core.internal import check_int, state_dict, state_int, state_parent
from chute_samplers import IterNode

from ._element_keys import Key, key_json, skip_entries, state_key
from ._errors import PackingError
from ._packing import (
    PackedRow,
    PaddingCounts,
    build_row,
    check_length,
    output_keys,
    read_sequences,
)
from ._state import position_counts

__all__ = ["ConcatSplitIter"]


@dataclasses.dataclass
class _Piece:
    """An element whose tokens are not all emitted yet."""

    anchor: IteratorState  # The parent state before this element.
    origin: tuple[int, ...] | None  # The element's origin in the parent.
    arrays: list[npt.NDArray[Any]]  # One 1-D array per key, all of length `size`.
    size: int
    offset: int = 0  # Tokens already emitted (or dropped: see `dropped`).
    dropped: int = 0  # Tokens another process emitted (a resharded state's `drop`).

    @property
    def position(self) -> Key | None:
        """The element's position: its origin, one int or two (see `_element_keys`)."""
        origin = self.origin
        if origin is None or len(origin) > 2:
            return None
        return origin[0] if len(origin) == 1 else (origin[0], origin[1])


class ConcatSplitIter(PaddingCounts, IterNode[PackedRow]):
    """Concatenates all sequences and cuts the stream into rows of exactly `length`.

    No token is dropped or padded except in the last row, which is padded with 0
    (segment id 0), or dropped with `drop_remainder`. With `bos_id`, the first token of
    every segment of a row (a whole sequence, or the part of one that continues from
    the row before) is replaced by `bos_id`, in the keys `bos_keys` (default: every
    key): Grain's `BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS`, which drops that token
    unless it was a BOS already. A sequence may span rows: each
    row is self-contained, its segments are numbered from 1 and positions restart at 0
    in every row (a continued sequence starts at position 0 in the next row).
    Elements are dicts of 1-D arrays; all keys are packed, and within one element
    every key must have the same length (e.g. `tokens` and `targets`). Output rows:
    `k`, `k_segment_ids`, `k_positions` per key `k` (see `FirstFitPackIter`).

    State: `{"parent": <parent state before the oldest element with tokens not yet
    emitted>, "skip": <its tokens already emitted>, "read": <elements read since>}`,
    with that element's position (`at`) when `skip` > 0; a state that resharding wrote
    may add `drop`: `[position, tokens]` of elements whose first tokens another process
    emitted (see `_pack_states`). Restoring re-reads those `read` elements (lazily, at
    the next `next()`; less than one row of tokens plus one element). It costs one
    `parent.get_state()` call per element read. Not thread-safe.

    The `origin` of a row is the origin of the first element with tokens in it (which
    may have begun in the row before). `padding_fraction` (with `tokens_emitted` and
    `slots_emitted`) says how much of the rows returned so far is padding.

    Args:
        parent: dicts of 1-D arrays (lists are converted with `np.asarray`).
        length: the row length.
        drop_remainder: drop the last, partial row instead of padding it.
        bos_id: the token written over the first token of every segment (None: none).
        bos_keys: the keys that get `bos_id` (None: all of them).

    Example:
        >>> import numpy as np
        >>> from chute_samplers import SequentialIter
        >>> docs = [{"t": np.array([1, 2, 3])}, {"t": np.array([4, 5])}, {"t": np.array([6])}]
        >>> rows = list(ConcatSplitIter(SequentialIter(docs), length=4))
        >>> [row["t"].tolist() for row in rows]
        [[1, 2, 3, 4], [5, 6, 0, 0]]
        >>> rows[1]["t_segment_ids"].tolist(), rows[1]["t_positions"].tolist()
        ([1, 2, 0, 0], [0, 0, 0, 0])
        >>> it = ConcatSplitIter(SequentialIter(docs), length=4)
        >>> [it.origin for _ in it]  # Row 1 starts inside element 1 (item 1 of the list).
        [(0,), (1,)]
        >>> [row["t"].tolist() for row in ConcatSplitIter(SequentialIter(docs), 4, bos_id=9)]
        [[9, 2, 3, 9], [9, 9, 0, 0]]
    """

    def __init__(
        self,
        parent: CheckpointableIterator[Any],
        length: int,
        *,
        drop_remainder: bool = False,
        bos_id: int | None = None,
        bos_keys: Sequence[str] | None = None,
    ) -> None:
        if not isinstance(drop_remainder, bool):
            raise TypeError(
                f"ConcatSplitIter: drop_remainder must be a bool, got {drop_remainder!r}."
            )
        self._parent = parent
        self._length = check_length("ConcatSplitIter", "length", length)
        self._drop_remainder = drop_remainder
        self._bos = (
            None if bos_id is None else check_int(bos_id, "bos_id", "ConcatSplitIter", minimum=0)
        )
        if bos_keys is not None and (
            isinstance(bos_keys, str) or not all(isinstance(key, str) for key in bos_keys)
        ):
            raise TypeError(
                f"ConcatSplitIter: bos_keys must be a sequence of keys, got {bos_keys!r}."
            )
        if bos_keys is not None and bos_id is None:
            raise ValueError("ConcatSplitIter: bos_keys needs a bos_id to write there.")
        self._bos_keys = None if bos_keys is None else tuple(bos_keys)
        self._keys: list[str] | None = None
        self._reset()

    def _reset(self) -> None:
        self._pieces: deque[_Piece] = deque()
        self._pending = 0  # Tokens held, not yet emitted.
        self._exhausted = False
        # (parent, skip, read, at, drops) of a restore whose replay is pending.
        self._restore: tuple[IteratorState, int, int, Any, dict[Key, int]] | None = None
        self._drops: dict[Key, int] = {}  # Position -> tokens another process emitted.
        self._origin: tuple[int, ...] | None = None  # Of the row last returned.

    @property
    def origin(self) -> tuple[int, ...] | None:
        """The origin of the first element with tokens in the row last returned."""
        return self._origin

    def __repr__(self) -> str:
        bos = "" if self._bos is None else f", bos_id={self._bos}"
        if self._bos_keys is not None:
            bos += f", bos_keys={list(self._bos_keys)}"
        return f"ConcatSplitIter(length={self._length}, drop_remainder={self._drop_remainder}{bos})"

    def __iter__(self) -> Self:
        """Returns the iterator itself."""
        return self

    def __next__(self) -> PackedRow:
        """Returns the next row; raises `StopIteration` after the last one."""
        if self._restore is not None:
            self._replay()
        length = self._length
        while self._pending < length and not self._exhausted:
            if not self._read():
                self._exhausted = True
        if self._pending == 0 or (self._pending < length and self._drop_remainder):
            self._pieces.clear()
            self._pending = 0
            raise StopIteration
        take = min(length, self._pending)
        assert self._keys is not None
        segments: list[list[npt.NDArray[Any]]] = [[] for _ in self._keys]
        left = take
        pieces = self._pieces
        origin = next(p.origin for p in pieces if p.offset < p.size)
        while left:
            piece = pieces[0]
            count = min(piece.size - piece.offset, left)
            if count:
                end = piece.offset + count
                for key_segments, array in zip(segments, piece.arrays, strict=True):
                    key_segments.append(array[piece.offset : end])
                piece.offset = end
                left -= count
            if piece.offset == piece.size:
                pieces.popleft()
        while pieces and pieces[0].offset == pieces[0].size:  # Empty elements.
            pieces.popleft()
        self._pending -= take
        self._origin = origin
        self._count_row(take * len(self._keys), length * len(self._keys))
        row = build_row(self, self._keys, segments, [length] * len(self._keys))
        if self._bos is not None:
            self._mark_starts(row)
        return row

    def _mark_starts(self, row: PackedRow) -> None:
        """Writes `bos_id` over the first token of every segment of the BOS keys."""
        assert self._keys is not None
        keys = self._keys if self._bos_keys is None else self._bos_keys
        for key in keys:
            if key not in row:
                raise PackingError(
                    f"{self!r}: bos_keys names {key!r}, which the elements do not have "
                    f"(their keys: {self._keys})."
                )
            starts = (row[f"{key}_positions"] == 0) & (row[f"{key}_segment_ids"] > 0)
            row[key][starts] = self._bos

    def _read(self) -> bool:
        """Reads one element into `_pieces`; False at the end of the parent."""
        anchor = self._parent.get_state()
        try:
            element = next(self._parent)
        except StopIteration:
            return False
        origin = getattr(self._parent, "origin", None)
        try:
            if self._keys is None:
                keys = list(element) if isinstance(element, Mapping) else []
                output_keys(self, keys)
                arrays = read_sequences(self, element, keys)
                self._keys = keys
            else:
                arrays = read_sequences(self, element, self._keys)
            sizes = {len(a) for a in arrays}
            if len(sizes) != 1:
                raise PackingError(
                    f"{self!r}: concat-then-split needs every key of an element to have the "
                    f"same length, got {dict(zip(self._keys, map(len, arrays), strict=True))}."
                )
        except BaseException:
            self._parent.set_state(anchor)  # The element stays unread: state consistent.
            raise
        size = sizes.pop()
        piece = _Piece(anchor, origin, arrays, size)
        if self._drops:  # Only in a resharded state: what another process emitted.
            self._drop_emitted(piece)
        self._pieces.append(piece)
        self._pending += size - piece.offset
        return True

    def _drop_emitted(self, piece: _Piece) -> None:
        """Marks the tokens of `piece` its `drop` entry names as emitted (used up)."""
        if piece.position is None and all(isinstance(key, tuple) for key in self._drops):
            return  # Entries name elements of an interleave's numbered streams; not this.
        if piece.position is None:
            raise InvalidStateError(
                f"{self!r}: the state lists tokens to drop by position, but the element has "
                f"no one-int origin ({piece.origin}); the state belongs to another pipeline."
            )
        tokens = self._drops.pop(piece.position, 0)
        if not tokens:
            return
        if tokens >= piece.size:
            raise InvalidStateError(
                f"{self!r}: the state says {tokens} tokens of position "
                f"{key_json(piece.position)} were emitted elsewhere, but it has {piece.size}; "
                "the state belongs to another pipeline."
            )
        piece.offset = piece.dropped = tokens

    def get_state(self) -> IteratorState:
        """Returns the position (see the class documentation); no tokens in it."""
        drops = self._drops
        if self._restore is not None:
            parent, skip, read, at, drops = self._restore
            state: IteratorState = {"parent": parent, "skip": skip, "read": read}
            if at is not None:
                state["at"] = key_json(at)
        elif not self._pieces:
            state = {"parent": self._parent.get_state(), "skip": 0, "read": 0}
        else:
            first = self._pieces[0]
            state = {"parent": first.anchor, "skip": first.offset, "read": len(self._pieces)}
            if first.offset and first.position is not None:  # What resharding needs.
                state["at"] = key_json(first.position)
            held = [p for p in itertools.islice(self._pieces, 1, None) if p.dropped]
            if held:  # Restored, they are read again and drop as much again.
                drops = {**drops, **{p.position: p.dropped for p in held}}  # type: ignore[misc]
        if drops:
            state["drop"] = skip_entries(drops)
        return state

    def set_state(self, state: IteratorState, /) -> None:
        """Moves to the position `state` (from `get_state`) names.

        The parent is moved at once; its elements are re-read at the next `next()`.

        Raises:
            InvalidStateError: `state` is not a state of a `ConcatSplitIter`, or (at
                the next `next()`) does not match the parent's data.
        """
        checked = state_dict(self, state, ("parent", "skip", "read"), ("at", "drop"))
        skip, read = state_int(self, checked, "skip"), state_int(self, checked, "read")
        if skip and not read:
            raise InvalidStateError(f"{self!r}: state skips {skip} tokens of no element.")
        at = state_key(self, checked, "at")
        drops = position_counts(self, checked.get("drop", []), "drop", "tokens", pairs=True)
        parent = state_parent(self, checked)
        self._parent.set_state(parent)
        self._reset()
        if read:
            self._restore = (parent, skip, read, at, drops)
        else:
            self._drops = drops

    def _replay(self) -> None:
        """Re-reads the elements of the pending restore; on error, stays restorable."""
        assert self._restore is not None
        restore = self._restore
        parent, skip, read, at, drops = restore
        self._restore = None
        self._drops = dict(drops)
        try:
            for offset in range(read):
                if not self._read():
                    raise InvalidStateError(
                        f"{self!r}: the state re-reads {read} elements, but the parent ends "
                        f"after {offset}. Was it saved with other data?"
                    )
            first = self._pieces[0]
            if skip and skip >= first.size:
                raise InvalidStateError(
                    f"{self!r}: the state skips {skip} tokens of an element of "
                    f"{first.size}. Was it saved with other data?"
                )
            if at is not None and at != first.position:
                raise InvalidStateError(
                    f"{self!r}: state['at'] = {key_json(at)} names the element the skipped "
                    f"tokens are of, but the element there is at {first.position}; the state "
                    "belongs to another pipeline."
                )
        except BaseException:
            self._parent.set_state(parent)
            self._reset()
            self._restore = restore
            raise
        self._pending -= skip - first.offset  # Less any tokens its `drop` entry dropped.
        first.offset = skip
