"""`BinPackIter`: the open rows ("bins") that first-fit and best-fit packing share.

Both keep the same rows, emit them by the same rules and save the same state; they
differ only in which open row takes an element (`BinPackIter._choose`).
"""

from __future__ import annotations

import abc
import copy
import dataclasses
from collections.abc import Mapping
from typing import Any, Self

import numpy.typing as npt

from chute_core import CheckpointableIterator, InvalidStateError, IteratorState
from chute_core.internal import state_dict, state_int, state_int_lists, state_parent
from chute_samplers import IterNode
from chute_samplers.internal import MAX_SPAN_BITS, named_count, named_origins

from ._packing import (
    PackedRow,
    PaddingCounts,
    build_row,
    check_length,
    output_keys,
    read_sequences,
)

__all__ = ["BinPackIter"]

_NAMES = ("span", "order", "reads")
"""The keys that name the positions of the elements read (see `named_origins`)."""

Array = npt.NDArray[Any]


@dataclasses.dataclass
class _Bin:
    """An open row: the elements placed in it so far."""

    anchor: IteratorState  # The parent state before the element that opened the bin.
    origin: tuple[int, ...] | None  # The origin of that element.
    indices: list[int]  # The elements' numbers in the stream (see `_count`).
    pieces: list[list[Array]]  # pieces[k]: the arrays of key k, in order.
    free: list[int]  # free[k]: room left for key k.


class BinPackIter(PaddingCounts, IterNode[PackedRow]):
    """Packs dicts of 1-D arrays into rows, keeping up to `num_packing_bins` rows open.

    The bookkeeping shared by `FirstFitPackIter` and `BestFitPackIter`, which differ
    only in which open row takes an element (`_choose`). Rows are kept in the order
    they were opened. An element that fits no open row opens a new one; if
    `num_packing_bins` rows are open already, the oldest row is emitted first. A row is
    emitted as soon as one of its keys is full or it holds `max_sequences_per_bin`
    elements; at the end the open rows are emitted, oldest first. Each element is one
    segment of its row (for every key, so segment ids match across keys); an element
    without tokens in any key is skipped; an element longer than the row is truncated.

    State: `{"parent": <parent state before the oldest element still in an open row>,
    "read": <elements read since>, "bins": [[offsets of the elements of each open row,
    from that element], ...]}`, and the positions of those `read` elements (`span`, as
    a window shuffle writes it, when they have one-int origins, and `order` when they
    were not read in ascending order, after a window shuffle; `reads` over an
    interleave: what resharding needs to skip the ones already emitted). No tokens:
    restoring re-reads those `read` elements (lazily, at the next `next()`) and puts
    them back in their rows; elements already emitted are skipped. The state holds
    about one int per element in open rows. It costs one `parent.get_state()` call per
    element read. Not thread-safe.

    `tokens_emitted`, `slots_emitted` and `padding_fraction` count the rows returned
    (see `PaddingCounts`).
    """

    def __init__(
        self,
        parent: CheckpointableIterator[Any],
        length: int | Mapping[str, int],
        num_packing_bins: int,
        *,
        max_sequences_per_bin: int | None = None,
    ) -> None:
        owner = type(self).__name__
        self._parent = parent
        self._num_bins = check_length(owner, "num_packing_bins", num_packing_bins)
        self._max_sequences: int | None = None
        if max_sequences_per_bin is not None:
            self._max_sequences = check_length(
                owner, "max_sequences_per_bin", max_sequences_per_bin
            )
        self._keys: list[str] | None = None
        if isinstance(length, Mapping):
            if not length:
                raise ValueError(f"{owner}: length must name at least one key.")
            for key, value in length.items():
                check_length(owner, f"length[{key!r}]", value)
            self._length: int | dict[str, int] = dict(length)
            output_keys(self, list(length))
            self._set_keys(list(length), [length[key] for key in length])
        else:
            self._length = check_length(owner, "length", length)
        self._reset()

    def _set_keys(self, keys: list[str], caps: list[int]) -> None:
        self._keys = keys
        self._caps = caps
        self._row_slots = sum(caps)

    def _reset(self) -> None:
        self._bins: list[_Bin] = []
        self._count = 0  # Elements read so far (numbers the elements, from any base).
        self._exhausted = False
        self._check_full = False
        # A restored position whose replay is pending: (parent state, read, bins, and
        # the `span` and `order` that name the positions of the elements read).
        self._restore: tuple[IteratorState, int, list[list[int]], dict[str, Any]] | None = None
        self._origin: tuple[int, ...] | None = None  # Of the row last returned.
        # The origins of the elements read from element number `_seen_base` on.
        self._seen: list[tuple[int, ...] | None] = []
        self._seen_base = 0

    @property
    def origin(self) -> tuple[int, ...] | None:
        """The origin of the first element of the row last returned."""
        return self._origin

    def __repr__(self) -> str:
        most = self._max_sequences
        more = "" if most is None else f", max_sequences_per_bin={most}"
        return (
            f"{type(self).__name__}(length={self._length!r}, "
            f"num_packing_bins={self._num_bins}{more})"
        )

    def __iter__(self) -> Self:
        """Returns the iterator itself."""
        return self

    def __next__(self) -> PackedRow:
        """Returns the next packed row; raises `StopIteration` after the last one."""
        if self._restore is not None:
            self._replay()
        while True:
            if self._check_full:  # After opening a row or a restore: emit full rows first.
                self._check_full = False
                for slot, open_bin in enumerate(self._bins):
                    if self._full(open_bin):
                        self._check_full = True
                        return self._emit(slot)
            if self._exhausted:
                if self._bins:
                    return self._emit(0)
                raise StopIteration
            if len(self._seen) > 2 * len(self._bins) + 64:  # Every element read is placed.
                self._forget()
            anchor = self._parent.get_state()
            try:
                element = next(self._parent)
            except StopIteration:
                self._exhausted = True
                continue
            origin = getattr(self._parent, "origin", None)
            arrays, need = self._prepare(element, anchor)
            self._seen.append(origin)
            if not any(need):  # No tokens in any key: nothing to pack.
                continue
            slot = self._choose(need)
            if slot >= 0:
                self._place(slot, arrays, need)
                if self._full(self._bins[slot]):
                    return self._emit(slot)
                continue
            full = len(self._bins) == self._num_bins
            evicted = self._emit(self._evict()) if full else None
            self._open(anchor, origin, arrays, need)
            if evicted is not None:
                return evicted

    @abc.abstractmethod
    def _choose(self, need: list[int]) -> int:
        """The open row (an index in `_bins`, oldest first) that takes `need`, or -1."""

    def _evict(self) -> int:
        """The open row to emit when an element fits none and no more may open: the oldest."""
        return 0

    def _full(self, open_bin: _Bin) -> bool:
        """Whether the row is done: a key without room, or the most elements allowed."""
        return 0 in open_bin.free or len(open_bin.indices) == self._max_sequences

    def _prepare(self, element: Any, anchor: IteratorState) -> tuple[list[Array], list[int]]:
        """The element's arrays (truncated) and lengths; rewinds the parent on error."""
        try:
            if self._keys is None:
                if not isinstance(element, Mapping):
                    read_sequences(self, element, [])  # Raises the PackingError.
                keys = list(element)
                output_keys(self, keys)
                assert isinstance(self._length, int)
                self._set_keys(keys, [self._length] * len(keys))
            assert self._keys is not None
            arrays = read_sequences(self, element, self._keys)
        except BaseException:
            self._parent.set_state(anchor)  # The element stays unread: state consistent.
            raise
        need = []
        for k, (array, cap) in enumerate(zip(arrays, self._caps, strict=True)):
            size = len(array)
            if size > cap:
                arrays[k], size = array[:cap], cap
            need.append(size)
        self._count += 1
        return arrays, need

    def _place(self, slot: int, arrays: list[Array], need: list[int]) -> None:
        target = self._bins[slot]
        target.indices.append(self._count - 1)
        for pieces, array in zip(target.pieces, arrays, strict=True):
            pieces.append(array)
        target.free = [free - size for free, size in zip(target.free, need, strict=True)]

    def _open(
        self,
        anchor: IteratorState,
        origin: tuple[int, ...] | None,
        arrays: list[Array],
        need: list[int],
    ) -> None:
        free = [cap - size for cap, size in zip(self._caps, need, strict=True)]
        pieces = [[a] for a in arrays]
        self._bins.append(_Bin(anchor, origin, [self._count - 1], pieces, free))
        self._check_full = True

    def _forget(self) -> None:
        """Drops the origins of the elements before the oldest one in an open row.

        Called between elements (each read is in a row, emitted or without tokens).
        """
        base = self._bins[0].indices[0] if self._bins else self._count
        del self._seen[: base - self._seen_base]
        self._seen_base = base

    def _emit(self, slot: int) -> PackedRow:
        done = self._bins.pop(slot)
        self._origin = done.origin
        self._count_row(self._row_slots - sum(done.free), self._row_slots)
        assert self._keys is not None
        return build_row(self, self._keys, done.pieces, self._caps)

    def get_state(self) -> IteratorState:
        """Returns the position (see the class documentation); no tokens in it."""
        if self._restore is not None:
            parent, read, bins, named = self._restore
            state: IteratorState = {
                "parent": parent,
                "read": read,
                "bins": [list(b) for b in bins],
            }
        elif not self._bins:
            return {"parent": self._parent.get_state(), "read": 0, "bins": []}
        else:
            base = self._bins[0].indices[0]
            state = {
                "parent": self._bins[0].anchor,
                "read": self._count - base,
                "bins": [[i - base for i in b.indices] for b in self._bins],
            }
            named = named_origins(self._seen[base - self._seen_base :])
        state.update({key: copy.copy(value) for key, value in named.items()})
        return state

    def set_state(self, state: IteratorState, /) -> None:
        """Moves to the position `state` (from `get_state`) names.

        The parent is moved at once; its elements are re-read at the next `next()`.

        Raises:
            InvalidStateError: `state` is not a state of this packer (at most
                `num_packing_bins` rows of at most `max_sequences_per_bin` elements),
                or (at the next `next()`) does not match the parent's data.
        """
        checked = state_dict(self, state, ("parent", "read", "bins"), _NAMES)
        read = state_int(self, checked, "read")
        named: dict[str, Any] = {k: checked[k] for k in _NAMES if k in checked}
        # Bounded before any position is made: `read` comes from the state.
        if named and named_count(named, repr(self), min(read, MAX_SPAN_BITS)) != read:
            raise InvalidStateError(
                f"{self!r}: state[{sorted(named)}] names other than the {read} elements read "
                "since the state's position; the state is damaged."
            )
        bins = state_int_lists(self, checked, "bins")
        flat = [i for b in bins for i in b]
        most = self._max_sequences
        if (
            len(bins) > self._num_bins
            or any(not b or b != sorted(set(b)) for b in bins)
            or (most is not None and any(len(b) > most for b in bins))
            or len(set(flat)) != len(flat)
            or any(i >= read for i in flat)
            or [b[0] for b in bins] != sorted(b[0] for b in bins)
            or (bins and bins[0][0] != 0)
        ):
            raise InvalidStateError(
                f"{self!r}: state['bins'] = {bins} is not {len(bins)} rows of <= "
                f"{self._num_bins} opened in order, holding distinct elements < read = {read}"
                + ("." if most is None else f", at most {most} each.")
            )
        parent = state_parent(self, checked)
        self._parent.set_state(parent)
        self._reset()
        if read:
            self._restore = (parent, read, bins, named)

    def _replay(self) -> None:
        """Re-reads the elements of the pending restore and puts them back in their rows.

        On any error the iterator goes back to the restored position, so `get_state`
        still returns it and `next()` retries.
        """
        assert self._restore is not None
        restore = self._restore
        parent, read, bins, named = restore
        self._restore = None
        try:
            self._replay_elements(read, bins)
            if named and named_origins(self._seen) != named:
                raise InvalidStateError(
                    f"{self!r}: the state's elements are at the positions {named!r:.80}, but "
                    f"reading them again gave {named_origins(self._seen)!r:.80}; the state "
                    "belongs to another pipeline."
                )
        except BaseException:
            self._parent.set_state(parent)
            self._reset()
            self._restore = restore
            raise
        self._check_full = True

    def _replay_elements(self, read: int, bins: list[list[int]]) -> None:
        slots = {i: slot for slot, b in enumerate(bins) for i in b}
        for offset in range(read):
            anchor = self._parent.get_state()
            try:
                element = next(self._parent)
            except StopIteration:
                raise InvalidStateError(
                    f"{self!r}: the state re-reads {read} elements, but the parent ends "
                    f"after {offset}. Was it saved with other data?"
                ) from None
            origin = getattr(self._parent, "origin", None)
            arrays, need = self._prepare(element, anchor)
            self._seen.append(origin)
            slot = slots.get(offset)
            if slot is not None and not any(need):
                raise InvalidStateError(
                    f"{self!r}: the state puts element {offset} in row {slot}, but it has no "
                    f"tokens. Was it saved with other data?"
                )
            if slot is None:
                continue
            if slot == len(self._bins):
                self._open(anchor, origin, arrays, need)
            elif all(f >= n for f, n in zip(self._bins[slot].free, need, strict=True)):
                self._place(slot, arrays, need)
            else:
                raise InvalidStateError(
                    f"{self!r}: the state puts element {offset} in row {slot}, which has no "
                    f"room for it. Was it saved with other data or another length?"
                )
