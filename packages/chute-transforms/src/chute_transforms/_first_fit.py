"""`FirstFitPackIter`: first-fit packing of variable-length sequences into fixed rows."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Self

import numpy.typing as npt

from chute_samplers import IterNode
from chute_sources import CheckpointableIterator, InvalidStateError, IteratorState
from chute_sources.internal import state_dict, state_int, state_int_lists, state_parent

from ._packing import PackedRow, build_row, check_length, output_keys, read_sequences

__all__ = ["FirstFitPackIter"]

Array = npt.NDArray[Any]


@dataclasses.dataclass
class _Bin:
    """An open row: the elements placed in it so far."""

    anchor: IteratorState  # The parent state before the element that opened the bin.
    origin: tuple[int, ...] | None  # The origin of that element.
    indices: list[int]  # The elements' numbers in the stream (see `_count`).
    pieces: list[list[Array]]  # pieces[k]: the arrays of key k, in order.
    free: list[int]  # free[k]: room left for key k.


class FirstFitPackIter(IterNode[PackedRow]):
    """Packs dicts of 1-D arrays into fixed-length rows, first fit over open rows.

    Keeps up to `num_packing_bins` open rows, in the order they were opened. Each
    element goes into the first open row with room for it under every key; a row is
    emitted as soon as one of its keys is full. An element that fits no open row opens
    a new one; if `num_packing_bins` rows are open already, the oldest row is emitted
    first (so rows come out roughly in stream order and an element waits in at most
    `num_packing_bins` rows' worth of data). At the end the open rows are emitted,
    oldest first. Each element is one segment of its row (for every key, so segment
    ids match across keys); an element without tokens in any key is skipped; an element
    longer than the row is **truncated** to the row length (its tail is dropped: use
    `ConcatSplitIter` to keep every token).

    Output rows: see `_packing` (`k`, `k_segment_ids`, `k_positions` per key `k`).

    State: `{"parent": <parent state before the oldest element still in an open row>,
    "read": <elements read since>, "bins": [[offsets of the elements of each open row,
    from that element], ...]}`. No tokens: restoring re-reads those `read` elements
    (lazily, at the next `next()`) and puts them back in their rows; elements already
    emitted are skipped. The state holds about one int per element in open rows. It
    costs one `parent.get_state()` call per element read. Not thread-safe.

    The `origin` of a row is the origin of its first element (segment 1, the element
    that opened the row).

    Args:
        parent: dicts of 1-D arrays (lists are converted with `np.asarray`).
        length: the row length; a dict gives one length per key (and names the keys
            packed: elements must have exactly those keys), an int applies to every
            key of the elements.
        num_packing_bins: how many rows are open at once (more: fuller rows).

    Example:
        >>> import numpy as np
        >>> from chute_transforms.testing import ListIterator
        >>> docs = [{"t": np.array([1, 2, 3])}, {"t": np.array([4, 5])}, {"t": np.array([6])}]
        >>> rows = list(FirstFitPackIter(ListIterator(docs), length=4, num_packing_bins=2))
        >>> [row["t"].tolist() for row in rows]
        [[1, 2, 3, 6], [4, 5, 0, 0]]
        >>> rows[0]["t_segment_ids"].tolist(), rows[0]["t_positions"].tolist()
        ([1, 1, 1, 2], [0, 1, 2, 0])
        >>> it = FirstFitPackIter(ListIterator(docs), length=4, num_packing_bins=2)
        >>> [it.origin for _ in it]  # The elements that opened the rows.
        [(0,), (1,)]
    """

    def __init__(
        self,
        parent: CheckpointableIterator[Any],
        length: int | Mapping[str, int],
        num_packing_bins: int,
    ) -> None:
        self._parent = parent
        self._num_bins = check_length("FirstFitPackIter", "num_packing_bins", num_packing_bins)
        self._keys: list[str] | None = None
        if isinstance(length, Mapping):
            if not length:
                raise ValueError("FirstFitPackIter: length must name at least one key.")
            for key, value in length.items():
                check_length("FirstFitPackIter", f"length[{key!r}]", value)
            self._length: int | dict[str, int] = dict(length)
            output_keys(self, list(length))
            self._set_keys(list(length), [length[key] for key in length])
        else:
            self._length = check_length("FirstFitPackIter", "length", length)
        self._reset()

    def _set_keys(self, keys: list[str], caps: list[int]) -> None:
        self._keys = keys
        self._caps = caps

    def _reset(self) -> None:
        self._bins: list[_Bin] = []
        self._count = 0  # Elements read so far (numbers the elements, from any base).
        self._exhausted = False
        self._check_full = False
        # A restored position whose replay is pending: (parent state, read, bins).
        self._restore: tuple[IteratorState, int, list[list[int]]] | None = None
        self._origin: tuple[int, ...] | None = None  # Of the row last returned.

    @property
    def origin(self) -> tuple[int, ...] | None:
        """The origin of the first element of the row last returned."""
        return self._origin

    def __repr__(self) -> str:
        return f"FirstFitPackIter(length={self._length!r}, num_packing_bins={self._num_bins})"

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
                    if 0 in open_bin.free:
                        self._check_full = True
                        return self._emit(slot)
            if self._exhausted:
                if self._bins:
                    return self._emit(0)
                raise StopIteration
            anchor = self._parent.get_state()
            try:
                element = next(self._parent)
            except StopIteration:
                self._exhausted = True
                continue
            origin = getattr(self._parent, "origin", None)
            arrays, need = self._prepare(element, anchor)
            if not any(need):  # No tokens in any key: nothing to pack.
                continue
            slot = self._first_fit(need)
            if slot >= 0:
                self._place(slot, arrays, need)
                if 0 in self._bins[slot].free:
                    return self._emit(slot)
                continue
            evicted = self._emit(0) if len(self._bins) == self._num_bins else None
            self._open(anchor, origin, arrays, need)
            if evicted is not None:
                return evicted

    def _first_fit(self, need: list[int]) -> int:
        """The first open row (oldest first) with room for `need`, or -1.

        A plain loop: for the usual <= 64 rows it measured faster than NumPy calls.
        """
        if len(need) == 1:
            size = need[0]
            for slot, open_bin in enumerate(self._bins):
                if open_bin.free[0] >= size:
                    return slot
            return -1
        for slot, open_bin in enumerate(self._bins):
            if all(free >= size for free, size in zip(open_bin.free, need, strict=True)):
                return slot
        return -1

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

    def _emit(self, slot: int) -> PackedRow:
        done = self._bins.pop(slot)
        self._origin = done.origin
        assert self._keys is not None
        return build_row(self, self._keys, done.pieces, self._caps)

    def get_state(self) -> IteratorState:
        """Returns the position (see the class documentation); no tokens in it."""
        if self._restore is not None:
            parent, read, bins = self._restore
            return {"parent": parent, "read": read, "bins": [list(b) for b in bins]}
        if not self._bins:
            return {"parent": self._parent.get_state(), "read": 0, "bins": []}
        base = self._bins[0].indices[0]
        return {
            "parent": self._bins[0].anchor,
            "read": self._count - base,
            "bins": [[i - base for i in b.indices] for b in self._bins],
        }

    def set_state(self, state: IteratorState, /) -> None:
        """Moves to the position `state` (from `get_state`) names.

        The parent is moved at once; its elements are re-read at the next `next()`.

        Raises:
            InvalidStateError: `state` is not a state of a `FirstFitPackIter` with at
                most `num_packing_bins` rows, or (at the next `next()`) does not match
                the parent's data.
        """
        checked = state_dict(self, state, ("parent", "read", "bins"))
        read = state_int(self, checked, "read")
        bins = state_int_lists(self, checked, "bins")
        flat = [i for b in bins for i in b]
        if (
            len(bins) > self._num_bins
            or any(not b or b != sorted(set(b)) for b in bins)
            or len(set(flat)) != len(flat)
            or any(i >= read for i in flat)
            or [b[0] for b in bins] != sorted(b[0] for b in bins)
            or (bins and bins[0][0] != 0)
        ):
            raise InvalidStateError(
                f"{self!r}: state['bins'] = {bins} is not {len(bins)} rows of <= "
                f"{self._num_bins} opened in order, holding distinct elements < read = {read}."
            )
        parent = state_parent(self, checked)
        self._parent.set_state(parent)
        self._reset()
        if read:
            self._restore = (parent, read, bins)

    def _replay(self) -> None:
        """Re-reads the elements of the pending restore and puts them back in their rows.

        On any error the iterator goes back to the restored position, so `get_state`
        still returns it and `next()` retries.
        """
        assert self._restore is not None
        restore = self._restore
        parent, read, bins = restore
        self._restore = None
        try:
            self._replay_elements(read, bins)
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
