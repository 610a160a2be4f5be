"""Ops over random-access datasets that change how positions map: flat map and batch."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from chute_core import DROPPED, RandomAccessDataSource
from chute_core.internal import check_int
from chute_samplers import EpochArray, PositionArray, fetch
from chute_samplers.internal import consecutive

from ._adapters import as_flat_map_fn
from ._batch import BatchFn, batch_elements
from ._batch_slices import slice_batch
from ._batch_tree import make_batch, pad_batch
from ._errors import BatchError
from ._map_ops import _ElementOp
from ._transforms import check_batch_options

__all__ = ["BatchMap", "FlatMapMap"]


class FlatMapMap(_ElementOp[Any]):
    """Splits each element into up to `max_fan_out` elements, keeping random access.

    Position `p` is output `p % max_fan_out` of parent element `p // max_fan_out`;
    slots an element does not fill read as `chute_sources.DROPPED` (iteration skips
    them). An element that yields more than `max_fan_out` outputs raises `ValueError`.

    Args:
        parent: a node, a source or any sequence.
        fn: a `FlatMapTransform` or a callable returning an iterable.
        max_fan_out: the most outputs of one element; defaults to the transform's.

    Example:
        >>> ds = FlatMapMap(["ab", "c"], lambda s: list(s), max_fan_out=2)
        >>> len(ds), list(ds)
        (4, ['a', 'b', 'c'])
    """

    _op = "flat_map"

    def __init__(
        self,
        parent: RandomAccessDataSource[Any],
        fn: Callable[[Any], Iterable[Any]] | Any,
        max_fan_out: int | None = None,
    ) -> None:
        super().__init__(parent, fn)
        self._may_drop = True
        self._fn, declared = as_flat_map_fn(fn)
        fan_out = max_fan_out if max_fan_out is not None else declared
        if fan_out is None:
            raise TypeError(
                f"flat_map({self._fn_shown}) over a random-access dataset needs max_fan_out "
                "(the most elements one element may become) to keep positions O(1); pass "
                "max_fan_out=... or use a FlatMapTransform that declares it."
            )
        self._fan_out = check_int(fan_out, "max_fan_out", "flat_map", minimum=1)

    def __len__(self) -> int:
        return len(self._parent) * self._fan_out

    @property
    def epoch_length(self) -> int:
        return super().epoch_length * self._fan_out

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[Any]:
        fan_out = self._fan_out
        parents, slots = np.divmod(positions, fan_out)
        unique, inverse = np.unique(parents, return_inverse=True)
        first = np.zeros(unique.size, np.int64)
        first[inverse[::-1]] = np.arange(inverse.size)[::-1]  # An epoch per parent element.
        elements = fetch(self._parent, unique, epochs[first])
        outputs: list[list[Any] | None] = []
        try:
            for element in elements:
                if element is DROPPED:
                    outputs.append(None)
                    continue
                produced = list(self._fn(element))
                if len(produced) > fan_out:
                    raise ValueError(
                        f"the element became {len(produced)} elements, more than "
                        f"max_fan_out={fan_out}; raise max_fan_out."
                    )
                outputs.append(produced)
        except Exception as error:
            bad = int(unique[len(outputs)]) * fan_out
            self._fail(error, np.array([bad]), 0)
            raise
        out: list[Any] = []
        for which, slot in zip(inverse.tolist(), slots.tolist(), strict=True):
            produced = outputs[which]
            out.append(produced[slot] if produced is not None and slot < len(produced) else DROPPED)
        return out

    def __repr__(self) -> str:
        return f"FlatMapMap({self._parent!r}, {self._fn_shown}, max_fan_out={self._fan_out})"


class BatchMap(_ElementOp[Any]):
    """Batch `b` holds positions `[b * batch_size, (b + 1) * batch_size)` of the parent.

    Dropped positions (from a filter) are left out, so such a batch holds fewer
    elements; a batch whose positions were all dropped reads as `DROPPED`. To batch
    a filtered dataset into full batches, iterate it first (`to_iter_dataset`) and
    batch the stream. The last batch is short unless `drop_remainder` (then it is
    left out) or `pad` (then every batch is a `(batch, mask)` pair).

    With `rows=(start, stop)` a batch holds only those rows of each full batch:
    positions `[b * batch_size + start, b * batch_size + stop)`. That is how one host
    of many builds just its part of every global batch; the number of batches stays
    that of the whole, so all hosts yield the same count. With `pad`, a host whose rows
    of the last batch lie past the end yields an all-padding batch (mask all False).

    Args:
        parent: a node, a source or any sequence.
        batch_size: positions per batch, >= 1.
        drop_remainder: leave out a last short batch.
        pad: pad short batches to `batch_size`, yielding `(batch, mask)` pairs.
        batch_fn: builds a batch from a list of elements, instead of `batch_elements`.
        rows: `(start, stop)` with `0 <= start < stop <= batch_size`: build only these
            rows of every batch; None builds all.

    Example:
        >>> ds = BatchMap(range(5), 2)
        >>> len(ds), ds[2], ds[0]
        (3, array([4]), array([0, 1]))
        >>> [b.tolist() for b in BatchMap(range(8), 4, rows=(2, 4))]
        [[2, 3], [6, 7]]
    """

    _op = "batch"

    def __init__(
        self,
        parent: RandomAccessDataSource[Any],
        batch_size: int,
        *,
        drop_remainder: bool = False,
        pad: bool = False,
        batch_fn: BatchFn | None = None,
        rows: tuple[int, int] | None = None,
    ) -> None:
        batch_size = check_batch_options("batch", batch_size, drop_remainder, pad, batch_fn)
        super().__init__(parent, batch_fn if batch_fn is not None else batch_elements)
        self._batch_size = batch_size
        self._drop_remainder = drop_remainder
        self._pad = pad
        self._batch_fn = batch_fn
        self._rows = _check_rows(rows, batch_size)

    def __len__(self) -> int:
        count, rest = divmod(len(self._parent), self._batch_size)
        return count + (1 if rest and not self._drop_remainder else 0)

    @property
    def epoch_length(self) -> int:
        count, rest = divmod(super().epoch_length, self._batch_size)
        return max(1, count + (1 if rest and not self._drop_remainder else 0))

    @property
    def rows(self) -> tuple[int, int]:
        """The rows of every batch this node builds, `(start, stop)`."""
        return self._rows

    @property
    def padded(self) -> bool:
        """Whether batches are `(batch, mask)` pairs (`pad=True`)."""
        return self._pad

    def batch_lengths(self) -> np.ndarray[Any, np.dtype[np.int64]] | None:
        """The rows of each batch, when known without reading them; else None.

        Known with no filter before, no `pad`, no `batch_fn` and all rows
        (`UnbatchMap` reads them).

        Example:
            >>> BatchMap(range(5), 2).batch_lengths().tolist()
            [2, 2, 1]
        """
        if self._parent_may_drop or self._pad or self._batch_fn is not None:
            return None
        if self._rows != (0, self._batch_size):
            return None
        lengths = np.full(len(self), self._batch_size, np.int64)
        if len(lengths):
            lengths[-1] = len(self._parent) - (len(lengths) - 1) * self._batch_size
        return lengths

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[Any]:
        size, total = self._batch_size, len(self._parent)
        start, stop = self._rows
        starts = positions * size + start
        ends = np.minimum(positions * size + stop, total)
        lengths = np.maximum(ends - starts, 0)
        if len(positions) and stop - start == size and consecutive(positions):
            flat = np.arange(int(starts[0]), int(ends[-1]), dtype=np.int64)  # One range.
        else:
            pieces = [np.arange(s, s + n) for s, n in zip(starts, lengths, strict=True)]
            flat = np.concatenate(pieces).astype(np.int64) if pieces else np.zeros(0, np.int64)
        elements = fetch(self._parent, flat, np.repeat(epochs, lengths)) if flat.size else []
        out: list[Any] = []
        offset = 0
        dropping = self._parent_may_drop
        for batch_number, length in enumerate(lengths.tolist()):
            chunk = elements[offset : offset + length]
            if dropping:
                chunk = [e for e in chunk if e is not DROPPED]
            offset += length
            try:
                if chunk:
                    out.append(make_batch(chunk, stop - start, self._pad, self._batch_fn))
                elif self._pad and length == 0:
                    out.append(self._all_padding(stop - start))
                else:
                    out.append(DROPPED)
            except Exception as error:
                if not isinstance(error, BatchError):
                    self._fail(error, positions, batch_number)
                raise
        return out

    def _all_padding(self, size: int) -> tuple[Any, Any]:
        """A batch of `size` padding rows, shaped like the batches of real elements."""
        template = make_batch([self._parent[0]], 1, False, self._batch_fn)
        padded, _ = pad_batch(template, size + 1)  # The template's row, then padding.
        return slice_batch(padded, 1, size + 1), np.zeros(size, np.bool_)

    def __repr__(self) -> str:
        options = f"batch_size={self._batch_size}, drop_remainder={self._drop_remainder}"
        if self._pad:
            options += ", pad=True"
        if self._batch_fn is not None:
            options += f", batch_fn={self._fn_shown}"
        if self._rows != (0, self._batch_size):
            options += f", rows={self._rows}"
        return f"BatchMap({self._parent!r}, {options})"


def _check_rows(rows: object, batch_size: int) -> tuple[int, int]:
    if rows is None:
        return (0, batch_size)
    if (
        not isinstance(rows, tuple)
        or len(rows) != 2
        or not all(isinstance(r, int) and not isinstance(r, bool) for r in rows)
    ):
        raise TypeError(f"batch: rows must be a (start, stop) tuple of ints, got {rows!r}.")
    start, stop = rows
    if not 0 <= start < stop <= batch_size:
        raise ValueError(
            f"batch: rows must satisfy 0 <= start < stop <= batch_size={batch_size}, "
            f"got rows={rows}."
        )
    return (start, stop)
