"""Reading consecutive positions of a dataset in one call, finding the one that failed.

Every reader of a random-access dataset in order (`SequentialIter`, and the execution
layer's threaded and chunked readers) reads spans of positions with `read_span`, so
they agree on what happens when a read fails: the elements before the failing
position are kept, and the failure either ends the span (no error budget) or, with an
`ErrorLedger`, leaves `DROPPED` at that position and is charged when the consumer
reaches it (`Span.charge`).
"""

from __future__ import annotations

from typing import Generic, TypeVar

import numpy as np

from chute_core import DROPPED, RandomAccessDataSource
from chute_core.internal import ErrorLedger

from ._node import fetch

__all__ = ["Span", "read_span", "reader_name"]

T = TypeVar("T")


def reader_name(dataset: object) -> str:
    """How a failed read names its stage: `reading ShuffleMap`."""
    return f"reading {type(dataset).__name__}"


_PREFIX = "chute: raised by "


def _note(error: BaseException, dataset: object, position: int) -> None:
    notes = getattr(error, "__notes__", [])
    if not any(note.startswith(_PREFIX) for note in notes):
        error.add_note(f"{_PREFIX}{reader_name(dataset)} on the element at position {position}")


class Span(Generic[T]):
    """Elements of positions `[start, start + len(elements))`, then maybe an error.

    Attributes:
        start: the first position.
        elements: one per position; `DROPPED` where a filter dropped the element, where
            the read failed under an error budget, or where a restored ledger says the
            element was skipped before.
        failures: `{offset: exception}` of the reads that failed under a budget (None:
            none), to charge when the consumer reaches them.
        error: the exception raised at the position right after the elements (no
            budget), if any.
    """

    __slots__ = ("elements", "error", "failures", "start")

    def __init__(
        self,
        start: int,
        elements: list[T],
        error: BaseException | None = None,
        failures: dict[int, BaseException] | None = None,
    ) -> None:
        self.start, self.elements, self.error, self.failures = start, elements, error, failures

    def charge(self, offset: int, ledger: ErrorLedger, stage: int, name: str) -> None:
        """Charges the failure at `offset`, if there is one (the element there is DROPPED).

        The stage is named by the error's chute note when it has one (the op of a
        `MapDataset` that raised inside the read, e.g. `map(parse)`), else `name`.
        """
        failures = self.failures
        if failures is not None and offset in failures:
            error = failures[offset]
            position = self.start + offset
            ledger.charge(stage, (position,), _raised_by(error, name), error, position + 1)


def _raised_by(error: BaseException, default: str) -> str:
    for note in getattr(error, "__notes__", ()):
        if note.startswith(_PREFIX) and " on the element at " in note:
            return str(note[len(_PREFIX) :].split(" on the element at ", 1)[0])
    return default


def read_span(
    dataset: RandomAccessDataSource[T],
    start: int,
    stop: int,
    ledger: ErrorLedger | None = None,
    stage: int = 0,
) -> Span[T]:
    """Reads positions `[start, stop)` of `dataset` in one batched call.

    The batched call either succeeds or tells nothing about which element failed, so a
    failed span is read again one position at a time. Without `ledger`, the elements
    before the first failing position are kept and its exception (with a note naming
    the position) ends the span; if every single read succeeds (a transient error),
    the batched call's exception is the span's error at `start`. With `ledger`, every
    failing position holds `DROPPED` and its exception is in `failures`; positions the
    ledger replays (skipped before a restore, by this reader: `stage`) are `DROPPED`
    too, unread.

    Example:
        >>> span = read_span([10, 11, None, 13], 0, 4)
        >>> span.elements, span.error
        ([10, 11, None, 13], None)
        >>> class Picky:
        ...     def __len__(self): return 4
        ...     def __getitem__(self, i):
        ...         if i == 2: raise ValueError("bad record")
        ...         return i
        >>> span = read_span(Picky(), 0, 4)
        >>> span.elements, span.error
        ([0, 1], ValueError('bad record'))
        >>> span = read_span(Picky(), 0, 4, ErrorLedger(None))
        >>> span.elements, span.failures
        ([0, 1, DROPPED, 3], {2: ValueError('bad record')})
    """
    positions = np.arange(start, stop, dtype=np.int64)
    try:
        elements: list[T] = fetch(dataset, positions, np.zeros(stop - start, np.uint64))
    except Exception as batch_error:
        elements = []
        failures: dict[int, BaseException] = {}
        one_epoch = np.zeros(1, np.uint64)
        for position in range(start, stop):
            try:
                elements.extend(fetch(dataset, positions[position - start :][:1], one_epoch))
            except Exception as error:
                _note(error, dataset, position)
                if ledger is None:
                    return Span(start, elements, error)
                failures[position - start] = error
                elements.append(DROPPED)  # type: ignore[arg-type]
        if ledger is None:
            _note(batch_error, dataset, start)
            return Span(start, [], batch_error)
        span = Span(start, elements, None, failures or None)
    else:
        span = Span(start, elements)
    if ledger is not None and ledger.replay:
        for replay_stage, origin in ledger.replay:
            if replay_stage == stage and len(origin) == 1 and start <= origin[0] < stop:
                span.elements[origin[0] - start] = DROPPED  # type: ignore[assignment]
                if span.failures is not None:
                    span.failures.pop(origin[0] - start, None)
    return span
