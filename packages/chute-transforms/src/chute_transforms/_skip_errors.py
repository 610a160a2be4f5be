"""`SkipErrorsIter`: a pipeline that skips failing elements, up to an error budget."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from chute_core import (
    CheckpointableIterator,
    ErrorBudget,
    IteratorState,
    SkippedElement,
    StageTraits,
    declare_op,
)
from chute_core.internal import ErrorLedger, ledger_scope, state_dict, state_parent
from chute_samplers import IterNode

__all__ = ["SKIP_ERRORS", "SkipErrorsIter"]

T = TypeVar("T")


class SkipErrorsIter(IterNode[T]):
    """Builds a pipeline whose failing elements are skipped, within `budget`.

    `make_parent()` is called with this iterator's `ErrorLedger` active, so every
    stage it builds that reads or transforms single elements (readers of random-access
    datasets, map, random map, filter, flat map, also on worker processes) skips an
    element that raises instead of stopping, and charges it to the budget when the
    stream reaches it. Past the budget, `next()` raises `ErrorBudgetExceededError`,
    chained to the failure. Other errors (a batch whose elements do not stack, a worker
    that died) are raised as without a budget.

    The skips are a pure function of the elements: the same with any number of workers
    or threads. The state is `{"parent": ..., "errors": {"failures": n, "skipped":
    [...]}}`; a restored iterator counts on from `n` and skips the recorded elements
    again without running them, so a replay after a restore skips what the first run
    skipped.

    Args:
        make_parent: builds the pipeline (a zero-argument callable).
        budget: how many failures may be skipped.

    Example:
        >>> from chute_samplers import SequentialIter
        >>> from chute_sources import ErrorBudget
        >>> from chute_transforms import MapIter
        >>> it = SkipErrorsIter(
        ...     lambda: MapIter(SequentialIter([4, 0, 2]), lambda x: 8 // x),
        ...     ErrorBudget(max_failures=1),
        ... )
        >>> list(it), it.failures
        ([2, 4], 1)
        >>> it.skipped[0].where, it.skipped[0].error
        ('map(<lambda>) at position 1', 'ZeroDivisionError: integer division or modulo by zero')
    """

    def __init__(
        self, make_parent: Callable[[], CheckpointableIterator[T]], budget: ErrorBudget
    ) -> None:
        if not isinstance(budget, ErrorBudget):
            raise TypeError(
                f"SkipErrorsIter: budget must be an ErrorBudget, got {type(budget).__name__} "
                f"{budget!r}."
            )
        self._ledger = ErrorLedger(budget)
        with ledger_scope(self._ledger):
            self._parent = make_parent()

    @property
    def parent(self) -> CheckpointableIterator[T]:
        """The pipeline this iterator skips errors of."""
        return self._parent

    @property
    def budget(self) -> ErrorBudget:
        """The error budget."""
        assert self._ledger.budget is not None
        return self._ledger.budget

    @property
    def failures(self) -> int:
        """How many elements were skipped so far (restored with the state)."""
        return self._ledger.failures

    @property
    def skipped(self) -> list[SkippedElement]:
        """The skipped elements (the most recent thousand), oldest first."""
        return self._ledger.skipped

    @property
    def origin(self) -> tuple[int, ...] | None:
        origin: tuple[int, ...] | None = getattr(self._parent, "origin", None)
        return origin

    def __next__(self) -> T:
        return next(self._parent)

    def get_state(self) -> IteratorState:
        return {"parent": self._parent.get_state(), "errors": self._ledger.get_state()}

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(self, state, ("parent", "errors"))
        errors = checked["errors"]
        self._ledger.check_state(errors)  # Before the pipeline moves: a refusal moves nothing.
        self._parent.set_state(state_parent(self, checked))
        self._ledger.set_state(errors)  # type: ignore[arg-type]

    def close(self) -> None:
        """Closes the pipeline (stops its threads and workers), if it can be closed."""
        close: Any = getattr(self._parent, "close", None)
        if close is not None:
            close()

    def __getattr__(self, name: str) -> Any:
        # Other attributes of the pipeline's top iterator (e.g. `stats`) pass through.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._parent, name)

    def __repr__(self) -> str:
        return f"SkipErrorsIter({self._parent!r}, {self.budget!r})"


SKIP_ERRORS = declare_op("skip_errors", StageTraits(records_skips=True), iter_node=SkipErrorsIter)
"""The op's declaration (see `chute_core.declare_op`)."""
