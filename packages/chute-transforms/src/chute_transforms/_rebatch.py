"""`RebatchIter`: batches of a stream cut again into batches of another size."""

from __future__ import annotations

import sys
from typing import Any

from chute_core import (
    CheckpointableIterator,
    InvalidStateError,
    IteratorState,
    StageTraits,
    declare_op,
)
from chute_core.internal import check_bool, check_int, state_dict, state_int, state_parent
from chute_samplers import IterNode

from ._batch_slices import batch_rows, concat_batches, slice_batch
from ._element_keys import Key, element_key, key_json, skip_entries, state_key
from ._errors import BatchError
from ._state import position_counts, take_skip

__all__ = ["REBATCH", "RebatchIter"]


class RebatchIter(IterNode[Any]):
    """Re-cuts a stream of batches (pytrees with a leading batch dimension) to `batch_size`.

    Rows are taken in order as slices of the input batches (NumPy views) and joined
    with `concat_batches` only when an output spans several inputs, so elements are
    never unbatched one by one. The last output is short unless `drop_remainder`.

    State: `{"parent": <parent state before the input batch being cut>, "offset": k}`,
    `k` its rows already handed out; a restore re-reads that one batch. Between input
    batches `k` is 0 and nothing is re-read. Inside an input batch the state also names
    its position (`at`, the parent's one-int origin), and a state that resharding wrote
    may list rows of input batches that another process handed out (`skip`:
    `[position, rows]` pairs), which are left out when those batches are read; so a
    rebatch of the stream after `.shard(i, n)` continues on another process count with
    every row once, as a flat map does. The `origin` of an output is its first input
    batch's origin plus `(row,)`, the row it starts at.

    Args:
        parent: a stream of batches, each with at least one row.
        batch_size: rows per output batch, >= 1.
        drop_remainder: leave out a last short batch.

    Raises:
        BatchError: an input batch has no batched leaf or no rows.

    Example:
        >>> import numpy as np
        >>> from chute_samplers import SequentialIter
        >>> it = RebatchIter(SequentialIter([np.arange(3), np.arange(3, 5)]), 2)
        >>> next(it).tolist(), next(it).tolist(), it.get_state()
        ([0, 1], [2, 3], {'parent': {'position': 1}, 'offset': 1, 'at': 1})
        >>> [b.tolist() for b in it]
        [[4]]
        >>> it.set_state({"parent": {"position": 0}, "offset": 0, "skip": [[1, 1]]})
        >>> [b.tolist() for b in it]  # Row 0 of the batch at position 1 went elsewhere.
        [[0, 1], [2, 4]]
    """

    def __init__(
        self, parent: CheckpointableIterator[Any], batch_size: int, drop_remainder: bool = False
    ) -> None:
        self._parent = parent
        self._batch_size = check_int(batch_size, "batch_size", "RebatchIter", minimum=1)
        self._drop_remainder = check_bool(drop_remainder, "drop_remainder", "RebatchIter")
        self._start: IteratorState = {}  # The parent state before the current batch.
        self._batch: Any = None
        self._rows = 0
        self._offset = 0
        self._pending = 0  # Rows to skip in the next batch read (after set_state).
        self._pending_at: Key | None = None  # The `at` a restored state names, if any.
        self._skips: dict[Key, int] = {}  # Position -> rows another process handed out.
        self._origin: tuple[int, ...] | None = None

    @property
    def origin(self) -> tuple[int, ...] | None:
        """The first input batch's origin plus the row the output starts at."""
        return self._origin

    def _read(self) -> bool:
        """Reads the next input batch; False at the end of the parent."""
        self._start = self._parent.get_state()
        try:
            batch = next(self._parent)
        except StopIteration:
            if self._pending:
                raise InvalidStateError(
                    f"{self!r}: the state skips {self._pending} rows of a batch, but the parent "
                    "has no batch there. Was it saved with other data?"
                ) from None
            return False
        rows = batch_rows(batch)
        if rows == 0:
            raise BatchError(
                f"{self!r}: an input batch has no rows (or no array or list-of-str leaf); "
                "rebatch needs batches with a leading batch dimension."
            )
        skipped = max(self._pending, self._skipped_rows() if self._skips else 0)
        if skipped >= rows:
            raise InvalidStateError(
                f"{self!r}: the state skips {skipped} rows of a batch of {rows}. Was it "
                "saved with other data?"
            )
        if self._pending_at is not None and self._position() != self._pending_at:
            raise InvalidStateError(
                f"{self!r}: state['at'] = {self._pending_at} names the batch being cut, but "
                f"the batch there is at {self._position()}; the state belongs to another "
                "pipeline."
            )
        self._batch, self._rows, self._offset = batch, rows, skipped
        self._pending, self._pending_at = 0, None
        return True

    def _position(self) -> Key | None:
        """The parent's origin of the batch last read (see `_element_keys`)."""
        return element_key(self._parent)

    def _skipped_rows(self) -> int:
        """The rows of the batch just read that its `skip` entry says went elsewhere."""
        return take_skip(self, self._skips, self._parent, sys.maxsize, "rows")

    def __next__(self) -> Any:
        pieces: list[Any] = []
        needed = self._batch_size
        origin = None
        while needed:
            exhausted = self._batch is None or self._offset >= self._rows
            if exhausted and not self._read():
                break
            if not pieces:
                inner = getattr(self._parent, "origin", None)
                origin = None if inner is None else (*inner, self._offset)
            take = min(needed, self._rows - self._offset)
            whole = take == self._rows
            pieces.append(
                self._batch
                if whole
                else slice_batch(self._batch, self._offset, self._offset + take)
            )
            self._offset += take
            needed -= take
        if not pieces or (needed and self._drop_remainder):
            raise StopIteration
        self._origin = origin
        return pieces[0] if len(pieces) == 1 else concat_batches(pieces)

    def get_state(self) -> IteratorState:
        state: IteratorState
        if self._batch is None and self._pending:
            state = {"parent": self._parent.get_state(), "offset": self._pending}
            if self._pending_at is not None:
                state["at"] = key_json(self._pending_at)
        elif self._batch is None or self._offset >= self._rows:
            state = {"parent": self._parent.get_state(), "offset": 0}
        else:
            state = {"parent": self._start, "offset": self._offset}
            at = self._position()
            if at is not None:  # Whose rows these are, for resharding.
                state["at"] = key_json(at)
        if self._skips:
            state["skip"] = skip_entries(self._skips)
        return state

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(self, state, ("parent", "offset"), ("at", "skip"))
        offset = state_int(self, checked, "offset")
        at = state_key(self, checked, "at")
        skips = position_counts(self, checked.get("skip", []), "skip", "rows", pairs=True)
        self._parent.set_state(state_parent(self, checked))
        self._batch, self._rows, self._offset, self._pending = None, 0, 0, offset
        self._pending_at, self._skips = (at if offset else None), skips
        self._origin = None

    def __repr__(self) -> str:
        return f"RebatchIter(batch_size={self._batch_size}, drop_remainder={self._drop_remainder})"


REBATCH = declare_op(
    "rebatch",
    # It splits each input batch into rows, as a flat map does (its state names the batch
    # being cut and the rows handed out), and each output gathers rows: the stages after
    # it see batches, not positions.
    StageTraits(splits=True, merges=True),
    iter_node=RebatchIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""
