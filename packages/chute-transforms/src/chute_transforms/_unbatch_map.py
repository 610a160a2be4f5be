"""`UnbatchMap`: random access to the rows of a random-access dataset of batches."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import numpy.typing as npt

from chute_core import DROPPED, RandomAccessDataSource
from chute_core.internal import check_dataset
from chute_samplers import EpochArray, MapNode, PositionArray, fetch

from ._batch_slices import batch_rows
from ._batch_tree import unbatch_elements
from ._map_structure_ops import BatchMap

__all__ = ["UnbatchMap"]

_COUNT_CHUNK = 256  # Batches read per call while counting rows.


class UnbatchMap(MapNode[Any]):
    """Position `i` is row `i` of the concatenated batches of `parent`.

    Random access needs every batch's row count. Over a `BatchMap` of unfiltered
    elements (without `pad` or `batch_fn`) they are arithmetic, known at once.
    Otherwise the first `len()` or read counts them by reading **every batch once**
    (in epoch 0; chunks of 256 batches), which costs a full pass over the parent, and
    keeps one int64 per batch in memory. A batch that reads as dropped has no rows.

    Rows come from `unbatch_elements` (array leaves are row views of the batch).
    Padded batches (`pad=True`, `(batch, mask)` pairs) are refused: unbatch the stream.

    Args:
        parent: a node, source or sequence whose elements are batches.

    Example:
        >>> import numpy as np
        >>> node = UnbatchMap(BatchMap(range(5), 2))
        >>> len(node), int(node[4]), [int(x) for x in node[1:3]]
        (5, 4, [1, 2])
        >>> ragged = UnbatchMap([np.arange(3), np.arange(10, 11)])
        >>> len(ragged), int(ragged[3])
        (4, 10)
    """

    def __init__(self, parent: RandomAccessDataSource[Any]) -> None:
        check_dataset(parent, "UnbatchMap")
        if isinstance(parent, BatchMap) and parent.padded:
            raise ValueError(
                "UnbatchMap: the batches are padded ((batch, mask) pairs), so their rows "
                "are not all elements; unbatch the stream instead (to_iter_dataset().unbatch())."
            )
        self._parent = parent
        self._starts: npt.NDArray[np.int64] | None = None
        known = parent.batch_lengths() if isinstance(parent, BatchMap) else None
        if known is not None:
            self._starts = _starts(known)
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def parent(self) -> RandomAccessDataSource[Any]:
        """The dataset of batches."""
        return self._parent

    def _row_starts(self) -> npt.NDArray[np.int64]:
        """The position of each batch's first row, then the total (counted once)."""
        if self._starts is None:
            with self._lock:
                if self._starts is None:
                    self._starts = _starts(self._count_rows())
        return self._starts

    def _count_rows(self) -> npt.NDArray[np.int64]:
        total = len(self._parent)
        lengths = np.zeros(total, np.int64)
        for first in range(0, total, _COUNT_CHUNK):
            positions = np.arange(first, min(first + _COUNT_CHUNK, total), dtype=np.int64)
            batches = fetch(self._parent, positions, np.zeros(len(positions), np.uint64))
            for offset, batch in enumerate(batches):
                lengths[first + offset] = 0 if batch is DROPPED else batch_rows(batch)
        return lengths

    def __len__(self) -> int:
        return int(self._row_starts()[-1])

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[Any]:
        starts = self._row_starts()
        owners = np.searchsorted(starts, positions, side="right") - 1
        rows = positions - starts[owners]
        wanted = sorted(set(zip(owners.tolist(), epochs.tolist(), strict=True)))
        numbers = np.array([b for b, _ in wanted], np.int64)
        batch_epochs = np.array([e for _, e in wanted], np.uint64)
        batches = fetch(self._parent, numbers, batch_epochs)
        split = {key: unbatch_elements(batch) for key, batch in zip(wanted, batches, strict=True)}
        return [
            split[(owner, epoch)][row]
            for owner, epoch, row in zip(
                owners.tolist(), epochs.tolist(), rows.tolist(), strict=True
            )
        ]

    def __repr__(self) -> str:
        return f"UnbatchMap({self._parent!r})"


def _starts(lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    return np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths, dtype=np.int64)])
