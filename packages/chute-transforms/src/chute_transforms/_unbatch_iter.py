"""`UnbatchIter`: each batch of a checkpointable stream becomes its rows.

Its state is a flat map's (see `_flat_map_iter`): the parent's state before the current
batch, the rows of it already yielded (`offset`) and, inside a batch, the batch's
position (`at`: the parent's one-int origin); a state that resharding wrote may add
`skip`, the rows of batches this process will read that another process delivered. So
an unbatch of the stream after `.shard(i, n)` continues on another process count with
every row once: the batch a process stopped inside goes to whichever new process reads
its position, which drops the rows delivered before.
"""

from __future__ import annotations

from typing import Any, Self

from chute_core import (
    CheckpointableIterator,
    InvalidStateError,
    IteratorState,
    StageTraits,
    declare_op,
)
from chute_core.internal import state_dict, state_int, state_parent
from chute_samplers import IterNode

from ._batch_tree import unbatch_elements
from ._element_keys import Key, element_key, key_json, skip_entries, state_key
from ._errors import BatchError
from ._origins import child_origin
from ._state import position_counts, take_skip
from ._unbatch_map import UnbatchMap

__all__ = ["UNBATCH", "UnbatchIter"]

_LOOK = object()
"""`UnbatchIter._at` before the current batch's position was looked up."""


class UnbatchIter(IterNode[Any]):
    """Splits each batch of a checkpointable iterator into its elements.

    The inverse of `BatchIter` (rows come from `unbatch_elements`: array leaves are
    row views of the batch). With `masked=True` the parent yields `(batch, mask)`
    pairs (as `BatchIter(..., pad=True)` does) and padding rows are dropped.

    State: `{"parent": <parent state at the start of the current batch>, "offset": k}`,
    `k` the number of rows of that batch already yielded, and inside a batch `at`, the
    batch's position (when the parent gives a one-int origin). Restoring re-reads that
    one batch (lazily, at the next `next()`) and skips `k` rows; between batches `k` is
    0 and the parent state is the current one, so nothing is re-read. A resharded state
    may add `skip` (see the module docs). Not thread-safe.

    The `origin` of a row is the batch's origin plus `(k,)`, `k` the row's number in
    its batch (rows of a `BatchIter` batch: the origin of the batch's first element,
    then `k`).

    Args:
        parent: the batches.
        masked: the parent yields `(batch, mask)` pairs; keep the rows where the mask
            is True.

    Example:
        >>> import numpy as np
        >>> from chute_samplers import SequentialIter
        >>> it = UnbatchIter(SequentialIter([np.array([1, 2]), np.array([3])]))
        >>> int(next(it)), it.get_state(), it.origin
        (1, {'parent': {'position': 0}, 'offset': 1, 'at': 0}, (0, 0))
        >>> [(int(x), it.origin) for x in it]
        [(2, (0, 1)), (3, (1, 0))]
        >>> it.set_state({"parent": {"position": 0}, "offset": 0, "skip": [[0, 1]]})
        >>> [int(x) for x in it]  # Row 0 of the batch at position 0 went elsewhere.
        [2, 3]
    """

    def __init__(self, parent: CheckpointableIterator[Any], *, masked: bool = False) -> None:
        if not isinstance(masked, bool):
            raise TypeError(f"UnbatchIter: masked must be a bool, got {masked!r}.")
        self._parent = parent
        self._masked = masked
        self._start: IteratorState = {}  # The parent state before the current batch.
        self._rows: list[Any] = []
        self._offset = 0
        self._pending = 0  # Rows to skip in the next batch read (after set_state).
        self._pending_at: Key | None = None  # The `at` a restored state names, if any.
        self._skips: dict[Key, int] = {}  # Position -> rows delivered by another process.
        self._dropped = 0  # Rows of the current batch dropped by its skip entry.
        # The current batch's position (its parent's origin), looked up when a state
        # needs it (`_LOOK`), not for every batch read.
        self._at: Key | object | None = None

    def __repr__(self) -> str:
        return f"UnbatchIter(masked={self._masked})"

    @property
    def origin(self) -> tuple[int, ...] | None:
        """The origin of the current batch plus the row's number in it."""
        return child_origin(self._parent, self._offset + self._dropped)

    def __iter__(self) -> Self:
        """Returns the iterator itself."""
        return self

    def __next__(self) -> Any:
        """Returns the next element; raises `StopIteration` after the last batch."""
        while self._offset >= len(self._rows):
            self._start = self._parent.get_state()
            try:
                batch = next(self._parent)
            except StopIteration:
                if self._pending:
                    raise InvalidStateError(
                        f"{self!r}: the state skips {self._pending} rows of a batch, but the "
                        f"parent has no batch there. Was it saved with other data?"
                    ) from None
                raise
            rows = self._split(batch)
            dropped = self._skipped_rows(len(rows)) if self._skips else 0
            self._rows, self._dropped, self._at = rows[dropped:], dropped, _LOOK
            self._offset, self._pending = self._pending, 0
            if self._pending_at is not None:
                self._check_at(self._pending_at)
            if self._offset > len(self._rows):
                raise InvalidStateError(
                    f"{self!r}: the state skips {self._offset} rows of a batch that has "
                    f"{len(self._rows)} (after {dropped} delivered elsewhere). Was it saved "
                    "with other data?"
                )
        row = self._rows[self._offset]
        self._offset += 1
        return row

    def _split(self, batch: Any) -> list[Any]:
        if not self._masked:
            return unbatch_elements(batch)
        if not (isinstance(batch, tuple) and len(batch) == 2):
            raise BatchError(
                f"{self!r}: masked=True expects (batch, mask) pairs from the parent "
                f"(as BatchIter(..., pad=True) yields), got {type(batch).__name__}."
            )
        return unbatch_elements(batch[0], mask=batch[1])

    def _check_at(self, at: Key) -> None:
        """Raises unless the batch just re-read is at `at` (the restored state's)."""
        self._pending_at = None
        found = self._current_position()
        if found != at:
            raise InvalidStateError(
                f"{self!r}: state['at'] = {at} names the batch the rows are of, but the "
                f"batch there is at {found}; the state belongs to another pipeline."
            )

    def _skipped_rows(self, count: int) -> int:
        """How many rows of the batch just read to drop (its `skip` entry's)."""
        return take_skip(self, self._skips, self._parent, count, "rows")

    def _current_position(self) -> Key | None:
        """The current batch's position, looked up once (the parent has not moved)."""
        if self._at is _LOOK:
            self._at = element_key(self._parent)
        return self._at  # type: ignore[return-value]

    def get_state(self) -> IteratorState:
        """Returns `{"parent": ..., "offset": ...}` (see the class documentation)."""
        state: IteratorState
        skips = self._skips
        if self._pending:
            state = {"parent": self._start, "offset": self._pending}
            if self._pending_at is not None:
                state["at"] = key_json(self._pending_at)
        elif self._offset < len(self._rows):
            state = {"parent": self._start, "offset": self._offset}
            at = self._current_position()
            if at is not None:
                state["at"] = key_json(at)
                if self._dropped:  # Restored, the batch drops them again.
                    skips = {**skips, at: self._dropped}
        else:
            state = {"parent": self._parent.get_state(), "offset": 0}
        if skips:
            state["skip"] = skip_entries(skips)
        return state

    def set_state(self, state: IteratorState, /) -> None:
        """Moves to the element `state` (from `get_state`) names.

        Raises:
            InvalidStateError: `state` is not a state of an `UnbatchIter`.
        """
        checked = state_dict(self, state, ("parent", "offset"), ("at", "skip"))
        offset = state_int(self, checked, "offset")
        at = state_key(self, checked, "at")
        skips = position_counts(self, checked.get("skip", []), "skip", "rows", pairs=True)
        parent = state_parent(self, checked)
        self._parent.set_state(parent)
        self._start, self._rows, self._offset, self._pending = parent, [], 0, offset
        self._pending_at = at if offset else None
        self._skips, self._dropped, self._at = skips, 0, None


UNBATCH = declare_op(
    "unbatch",
    # As a stream op it splits each element (a batch) into rows, as a flat map does;
    # `MapDataset.unbatch` (UnbatchMap) renumbers positions, which resharding refuses
    # before the stream begins.
    StageTraits(splits=True),
    map_node=UnbatchMap,
    iter_node=UnbatchIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""
