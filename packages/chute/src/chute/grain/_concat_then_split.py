"""Grain's concat-then-split packing, with its meta features and full-length rows.

`ConcatThenSplitIterDataset(..., meta_features=..., split_full_length_features=False)`
runs this iterator; it produces the rows Grain 0.2.18 produces:

- Rows are filled in turn. An element goes into the row whole if it fits; otherwise its
  sequence features are cut where the row ends, and the rest opens the next row.
- A meta feature is never cut: each part of an element carries it whole, into the meta
  feature's own length. An element whose meta feature no longer fits closes the row
  (padded) and opens the next one. Meta features get no `_segment_ids`/`_positions`.
- With `split_full_length_features=False`, an element with a feature exactly its
  target length (and none longer) becomes a row of its own, and waits for its turn:
  it comes after the row being filled when it was read.

The state holds no tokens: where a row is being filled, it is the parent's state
before the element carried over from the last row (and the token where that element
resumes), plus the number of rows already returned since; a restore re-reads from
there, as Grain does.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from chute_core import (
    CheckpointableIterator,
    InvalidArgumentError,
    InvalidStateError,
    IteratorState,
)
from chute_core.internal import state_dict, state_int, state_parent
from chute_samplers import IterNode

__all__ = ["GrainConcatThenSplitIter"]


@dataclasses.dataclass(frozen=True)
class _Part:
    """An element from `start` (a token offset of its sequence features) on."""

    anchor: IteratorState  # The parent's state before the element.
    features: Mapping[str, Any]
    start: int = 0
    stop: int | None = None  # None: to the end of the sequence.


def _size(value: Any) -> int:
    return 1 if np.ndim(value) == 0 else len(value)


class GrainConcatThenSplitIter(IterNode[dict[str, Any]]):
    """Concat-then-split packing as Grain does it (see the module documentation).

    Args:
        parent: dicts with exactly the keys of `lengths`.
        lengths: the row length of each key; the sequence (non-meta) keys share one.
        meta: keys carried whole with every part of their element.
        split_full: cut elements that fill a row exactly like any other (Grain's
            `split_full_length_features`); False gives them rows of their own.
        bos_id: written over the first token of every segment of the `bos_keys`.
        bos_keys: the keys that get `bos_id`.

    Example:
        >>> import chute, numpy as np
        >>> docs = [{"t": np.arange(1, 4), "id": n} for n in (7, 8)]
        >>> it = GrainConcatThenSplitIter(
        ...     iter(chute.MapDataset.source(docs).to_iter_dataset()), {"t": 4, "id": 2}, {"id"}
        ... )
        >>> [(row["t"].tolist(), row["id"].tolist()) for row in it]
        [([1, 2, 3, 1], [7, 8]), ([2, 3, 0, 0], [8, 0])]
    """

    def __init__(
        self,
        parent: CheckpointableIterator[Any],
        lengths: Mapping[str, int],
        meta: Collection[str] = (),
        *,
        split_full: bool = True,
        bos_id: int | None = None,
        bos_keys: Collection[str] = (),
    ) -> None:
        self._parent = parent
        self._lengths = dict(lengths)
        self._meta = frozenset(meta)
        self._split_full = split_full
        self._bos_id, self._bos_keys = bos_id, frozenset(bos_keys)
        self._reset()

    def _reset(self) -> None:
        self._rows: deque[dict[str, Any]] = deque()
        self._carried: _Part | None = None  # The part that opens the next row.
        self._ended = False
        self._checkpoint: IteratorState | None = None  # Where the queued rows began.
        self._returned = 0  # Rows returned since `_checkpoint`.
        self._restore: IteratorState | None = None

    def __repr__(self) -> str:
        return (
            f"GrainConcatThenSplitIter(lengths={self._lengths}, meta={sorted(self._meta)}, "
            f"split_full={self._split_full})"
        )

    def __next__(self) -> dict[str, Any]:
        if self._restore is not None:
            self._replay()
        if not self._rows:
            if self._ended:
                raise StopIteration
            self._checkpoint, self._returned = self._here(), 0
            self._fill()
            if not self._rows:
                raise StopIteration
        self._returned += 1
        return self._rows.popleft()

    def _here(self) -> IteratorState:
        """The state at a row boundary with nothing queued."""
        if self._carried is None:
            return {"parent": self._parent.get_state(), "carried": 0, "skip": 0, "returned": 0}
        return {
            "parent": self._carried.anchor,
            "carried": 1,
            "skip": self._carried.start,
            "returned": 0,
        }

    def _fill(self) -> None:
        """Fills one row, queueing it after full-length rows read meanwhile (Grain's order)."""
        row: list[_Part] = []
        used = dict.fromkeys(self._lengths, 0)
        waiting: list[dict[str, Any]] = []
        while True:
            if self._carried is not None:
                self._carried = self._add(self._carried, row, used)
                if self._carried is not None:
                    break
            anchor = self._parent.get_state()
            try:
                element = next(self._parent)
            except StopIteration:
                self._ended = True
                break
            part = _Part(anchor, self._checked(element))
            if not self._split_full and self._full(part):
                waiting.append(self._pack([part]))
                continue
            self._carried = self._add(part, row, used)
            if self._carried is not None:
                break
        if row:
            self._rows.append(self._pack(row))
        elif self._carried is not None and not waiting and not self._ended:
            key = next(k for k in self._meta if _size(self._carried.features[k]) > self._lengths[k])
            raise InvalidArgumentError(
                f"ConcatThenSplitIterDataset: meta feature {key!r} holds "
                f"{_size(self._carried.features[key])} values, more than its length "
                f"{self._lengths[key]}: it cannot be packed."
            )
        self._rows.extend(waiting)

    def _checked(self, element: Any) -> Mapping[str, Any]:
        if not isinstance(element, Mapping) or set(element) != set(self._lengths):
            shown = sorted(element) if isinstance(element, Mapping) else type(element).__name__
            raise ValueError(
                f"ConcatThenSplitIterDataset: elements must be dicts with the keys of "
                f"length_struct {sorted(self._lengths)}, got {shown}."
            )
        sizes = {_size(element[k]) for k in self._lengths if k not in self._meta}
        if len(sizes) > 1:
            raise InvalidArgumentError(
                "ConcatThenSplitIterDataset: chute cuts every sequence feature of an element "
                f"at one place, so they must have one length, got "
                f"{ {k: _size(element[k]) for k in self._lengths if k not in self._meta} }."
            )
        return element

    def _full(self, part: _Part) -> bool:
        """Grain's test: a feature exactly its target length, and none longer."""
        sizes = [(_size(part.features[k]), length) for k, length in self._lengths.items()]
        return all(n <= length for n, length in sizes) and any(n == length for n, length in sizes)

    def _tokens(self, part: _Part) -> int:
        """The sequence tokens of `part`."""
        for key in self._lengths:
            if key not in self._meta:
                whole = _size(part.features[key])
                return (whole if part.stop is None else part.stop) - part.start
        return 0

    def _add(self, part: _Part, row: list[_Part], used: dict[str, int]) -> _Part | None:
        """Puts `part` into `row` (whole or cut); returns what is left of it, or None."""
        for key in self._meta:
            if _size(part.features[key]) > self._lengths[key] - used[key]:
                return part  # A meta feature is never cut: the row closes.
        tokens = self._tokens(part)
        room = min(
            (self._lengths[k] - used[k] for k in self._lengths if k not in self._meta),
            default=tokens,
        )
        left: _Part | None = None
        if tokens > room:
            if part.start == 0 and room == 0:
                return part
            cut = part.start + room
            part, left = dataclasses.replace(part, stop=cut), dataclasses.replace(part, start=cut)
        row.append(part)
        for key in self._lengths:
            used[key] += _size(part.features[key]) if key in self._meta else min(tokens, room)
        return left

    def _pack(self, parts: list[_Part]) -> dict[str, Any]:
        packed: dict[str, Any] = {}
        for key, length in self._lengths.items():
            first = np.asarray(parts[0].features[key])
            values = np.zeros((length, *first.shape[1:]), first.dtype)
            ids = None if key in self._meta else np.zeros(length, np.int32)
            positions = None if key in self._meta else np.zeros(length, np.int32)
            end = 0
            for number, part in enumerate(parts, 1):
                value = part.features[key]
                if key not in self._meta and np.ndim(value) > 0:
                    value = value[part.start : part.stop]
                start, end = end, end + _size(value)
                values[start:end] = value
                if key in self._bos_keys and start < length:
                    values[start] = self._bos_id
                if ids is not None and positions is not None:
                    ids[start:end] = number
                    positions[start:end] = np.arange(end - start)
            packed[key] = values
            if ids is not None:
                packed[f"{key}_segment_ids"], packed[f"{key}_positions"] = ids, positions
        return packed

    def get_state(self) -> IteratorState:
        if self._restore is not None:
            return dict(self._restore)
        if self._rows and self._checkpoint is not None:
            return {**self._checkpoint, "returned": self._returned}
        return self._here()

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(self, state, ("parent", "carried", "skip", "returned"))
        carried = state_int(self, checked, "carried", maximum=1)
        skip, returned = state_int(self, checked, "skip"), state_int(self, checked, "returned")
        if skip and not carried:
            raise InvalidStateError(f"{self!r}: the state skips {skip} tokens of no element.")
        self._parent.set_state(state_parent(self, checked))
        self._reset()
        if carried or returned:
            self._restore = dict(checked)

    def _replay(self) -> None:
        """Re-reads from the restored checkpoint and drops the rows returned before."""
        restore, self._restore = self._restore, None
        assert restore is not None
        if restore["carried"]:
            anchor = self._parent.get_state()
            part = _Part(anchor, self._checked(next(self._parent)), int(restore["skip"]))  # type: ignore[arg-type]
            self._carried = part
        self._checkpoint, self._returned = {**restore, "returned": 0}, 0
        self._fill()
        returned = int(restore["returned"])  # type: ignore[arg-type]
        if returned > len(self._rows):
            raise InvalidStateError(
                f"{self!r}: the state has {returned} rows returned from a fill that makes "
                f"{len(self._rows)}. Was it saved with other data?"
            )
        for _ in range(returned):
            self._rows.popleft()
        self._returned = returned
