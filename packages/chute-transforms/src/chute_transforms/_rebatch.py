"""`RebatchIter`: batches of a stream cut again into batches of another size."""

from __future__ import annotations

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
from ._errors import BatchError

__all__ = ["REBATCH", "RebatchIter"]


class RebatchIter(IterNode[Any]):
    """Re-cuts a stream of batches (pytrees with a leading batch dimension) to `batch_size`.

    Rows are taken in order as slices of the input batches (NumPy views) and joined
    with `concat_batches` only when an output spans several inputs, so elements are
    never unbatched one by one. The last output is short unless `drop_remainder`.

    State: `{"parent": <parent state before the input batch being cut>, "offset": k}`,
    `k` its rows already handed out; a restore re-reads that one batch. Between input
    batches `k` is 0 and nothing is re-read. The `origin` of an output is its first
    input batch's origin plus `(row,)`, the row it starts at.

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
        ([0, 1], [2, 3], {'parent': {'position': 1}, 'offset': 1})
        >>> [b.tolist() for b in it]
        [[4]]
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
        if self._pending >= rows:
            raise InvalidStateError(
                f"{self!r}: the state skips {self._pending} rows of a batch of {rows}. Was it "
                "saved with other data?"
            )
        self._batch, self._rows, self._offset = batch, rows, self._pending
        self._pending = 0
        return True

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
        if self._batch is None and self._pending:
            return {"parent": self._parent.get_state(), "offset": self._pending}
        if self._batch is None or self._offset >= self._rows:
            return {"parent": self._parent.get_state(), "offset": 0}
        return {"parent": self._start, "offset": self._offset}

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(self, state, ("parent", "offset"))
        offset = state_int(self, checked, "offset")
        self._parent.set_state(state_parent(self, checked))
        self._batch, self._rows, self._offset, self._pending = None, 0, 0, offset
        self._origin = None

    def __repr__(self) -> str:
        return f"RebatchIter(batch_size={self._batch_size}, drop_remainder={self._drop_remainder})"


REBATCH = declare_op("rebatch", StageTraits(), iter_node=RebatchIter)
"""The op's declaration (see `chute_core.declare_op`)."""
