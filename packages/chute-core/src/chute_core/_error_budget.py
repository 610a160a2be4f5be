"""Error budgets: skipping elements that fail, deterministically, up to a limit.

A pipeline with an `ErrorBudget` skips an element whose reading or per-element
transform raises, instead of stopping, as long as the failures stay within the budget;
past it, `ErrorBudgetExceededError` names the failure and the ones skipped before.

The bookkeeping is an `ErrorLedger`, one per iterator chain. The stages that can skip
(the readers of random-access datasets and the elementwise stream ops) find it when
they are built (`active_ledger()`, set by `ledger_scope`) and register with it, which
numbers them in the order the chain is built: the same numbers every time the same
pipeline is built, in any process. A failure is charged when the consumer reaches it
in stream order (workers only report theirs), so the skips, the point where the
budget runs out and the counts in a checkpoint are the same with any number of
workers or threads. The ledger's state records the skipped elements (the most recent
`KEEP`): a restored pipeline skips them again without running them, so an element
that failed once is skipped the same way on every replay, even if it would now work.

Why a context variable carries the ledger, and who reads it. A budget covers every
stage before its `skip_errors`, whichever layer built them; passing the ledger as an
argument would add a parameter to every reader and stream op of every layer, and to
every user's iterator chain that never skips anything. So `SkipErrorsIter` builds its
parent chain inside `ledger_scope(ledger)`, and exactly these constructors read
`active_ledger()` once, when they are built (never while iterating):

- `chute_samplers.SequentialIter` (reads of a random-access dataset);
- the elementwise stream ops of `chute_transforms` (`MapIter`, `FilterIter`,
  `FlatMapIter`, `RandomMapIter`, `MapWithIndexIter`);
- in `chute_execution`: `PrefetchReadIter` (threaded reads), the chunk reader of a
  `ChunkPlan`, and `MultiprocessPrefetchIter` (whose workers report their skips, and
  which charges them in stream order).

Outside a scope, `active_ledger()` is None and these stages raise as usual. The other
context variables of chute are `chute_transforms.stacking_into` (memory a batch is
stacked into, set by a worker around one chunk) and the meta-package's statistics
recorder (`chute._stats.RECORDER`, set while `iter(stats=True)` builds a chain).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import math
import sys
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ._checks import check_int
from ._errors import (
    ArgumentTypeError,
    ErrorBudgetExceededError,
    InvalidArgumentError,
    InvalidStateError,
)
from ._protocols import IteratorState

__all__ = [
    "KEEP",
    "ErrorBudget",
    "ErrorLedger",
    "SkippedElement",
    "active_ledger",
    "ledger_scope",
]

KEEP = 1000
"""Skipped elements a ledger's state keeps (the most recent); the count is kept whole."""

_TEXT = 300
"""Characters of an error's text kept per skipped element."""

Key = tuple[int, tuple[int, ...]]
"""A skipped element's identity: (the stage's number in the chain, the element's origin)."""


@dataclasses.dataclass(frozen=True)
class ErrorBudget:
    """How many failing elements a pipeline may skip before it raises.

    After `seen` elements have been read (the position of the failing element plus
    one, counted in the dataset the pipeline reads), the pipeline may have skipped
    `max_failures + floor(max_failure_rate * seen)` elements: a fixed allowance, a
    proportional one, or both. The failure that goes past it raises
    `ErrorBudgetExceededError`.

    Attributes:
        max_failures: failing elements skipped in any case.
        max_failure_rate: failing elements skipped per element read, in [0, 1).

    Example:
        >>> budget = ErrorBudget(max_failures=2, max_failure_rate=0.001)
        >>> budget.allowance(seen=100), budget.allowance(seen=5000)
        (2, 7)
    """

    max_failures: int = 0
    max_failure_rate: float = 0.0

    def __post_init__(self) -> None:
        count = check_int(self.max_failures, "max_failures", "ErrorBudget")
        object.__setattr__(self, "max_failures", count)
        rate = self.max_failure_rate
        if isinstance(rate, bool) or not isinstance(rate, int | float | np.integer | np.floating):
            raise ArgumentTypeError(
                f"ErrorBudget: max_failure_rate must be a number in [0, 1), got {rate!r}."
            )
        if not 0 <= rate < 1 or math.isnan(rate):
            raise InvalidArgumentError(
                f"ErrorBudget: max_failure_rate must be a number in [0, 1), got {rate!r}."
            )
        if count == 0 and rate == 0:
            raise InvalidArgumentError(
                "ErrorBudget: max_failures=0 and max_failure_rate=0 allow no failure at all; "
                "give one of them, or leave the budget out to raise at the first failure."
            )

    def allowance(self, seen: int) -> int:
        """How many failures may have been skipped once `seen` elements were read."""
        return self.max_failures + math.floor(self.max_failure_rate * seen)


@dataclasses.dataclass(frozen=True)
class SkippedElement:
    """One element a pipeline skipped because it failed.

    Attributes:
        stage: the number of the stage that failed, in the order the chain was built.
        origin: where the element came from (`(position,)` in the dataset read, longer
            after a flat map); None for streams that do not say.
        where: the stage and the element, readable, e.g. `map(parse) at position 17`.
        error: the exception's type and message (shortened).

    Example:
        >>> skipped = SkippedElement(1, (17,), "map(parse) at position 17", "ValueError: bad")
        >>> SkippedElement.from_json(skipped.to_json()) == skipped
        True
    """

    stage: int
    origin: tuple[int, ...] | None
    where: str
    error: str

    @property
    def key(self) -> Key | None:
        """(stage, origin): what identifies the element when it is replayed."""
        return None if self.origin is None else (self.stage, self.origin)

    def to_json(self) -> list[Any]:
        """`[stage, origin or None, where, error]`."""
        origin = None if self.origin is None else list(self.origin)
        return [self.stage, origin, self.where, self.error]

    @classmethod
    def from_json(cls, value: Any) -> SkippedElement:
        """The inverse of `to_json`; raises `InvalidStateError` if `value` is malformed.

        The stage is an int >= 0, the origin null or a non-empty list of ints in
        `[0, sys.maxsize]`, `where` and `error` strings.
        """
        return _skipped_element(value, "a skipped element in an error ledger's state")


def _skipped_element(value: Any, field: str) -> SkippedElement:
    """`SkippedElement.from_json(value)`; messages name the element as `field`."""
    if isinstance(value, list) and len(value) == 4:
        stage, origin, where, error = value
        if origin is not None and not (
            isinstance(origin, list)
            and origin
            and all(_is_count(x) and x <= sys.maxsize for x in origin)
        ):
            raise InvalidStateError(
                f"{field} = {value!r} has origin {origin!r}: its ints are in [0, "
                f"{sys.maxsize}], at least one (or the origin is null)."
            )
        if _is_count(stage) and isinstance(where, str) and isinstance(error, str):
            return SkippedElement(stage, None if origin is None else tuple(origin), where, error)
    raise InvalidStateError(
        f"{field} must be [stage (an int >= 0), origin or null, where, error], got {value!r}."
    )


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def error_text(error: BaseException) -> str:
    """`Type: message` of `error`, shortened to a few hundred characters."""
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= _TEXT else text[: _TEXT - 3] + "..."


def describe_origin(origin: tuple[int, ...] | None, seen: int) -> str:
    """Where an element is, for messages: `position 17`, or its index in the stream."""
    if origin is None:
        return f"index {seen - 1} of the stream"
    if len(origin) == 1:
        return f"position {origin[0]}"
    return f"position {origin[0]} (origin {origin})"


class ErrorLedger:
    """The failures one iterator chain skipped, charged against a budget in stream order.

    With `budget=None` the ledger only collects (a worker's, or a chunk run for the
    consumer): `charge` never raises, and `reports` lists what was skipped, each with
    `at`, the number of outputs produced before it, for the consumer to charge.

    Example:
        >>> ledger = ErrorLedger(ErrorBudget(max_failures=1))
        >>> stage = ledger.register()
        >>> ledger.charge(stage, (4,), "map(f)", ValueError("bad"), seen=5)
        >>> ledger.failures, [s.where for s in ledger.skipped]
        (1, ['map(f) at position 4'])
        >>> try:
        ...     ledger.charge(stage, (9,), "map(f)", ValueError("worse"), seen=10)
        ... except ErrorBudgetExceededError as error:
        ...     print(error)
        map(f) at position 9 raised ValueError: worse; that is failure 2, and \
ErrorBudget(max_failures=1, max_failure_rate=0.0) allows 1 after 10 elements read. \
Skipped before: map(f) at position 4 (ValueError: bad).
    """

    def __init__(self, budget: ErrorBudget | None) -> None:
        if budget is not None and not isinstance(budget, ErrorBudget):
            raise TypeError(f"ErrorLedger: budget must be an ErrorBudget or None, got {budget!r}.")
        self.budget = budget
        self.failures = 0
        self._stages = 0
        self._recent: collections.deque[SkippedElement] = collections.deque(maxlen=KEEP)
        self._keys: set[Key] = set()
        self.replay: frozenset[Key] = frozenset()
        """Elements skipped before the state was restored: skipped again, unrun."""
        self.at = 0
        """(Collecting) outputs produced so far, stamped on each report."""
        self.reports: list[tuple[int, SkippedElement, int]] = []
        """(Collecting) `(at, skipped element, seen)` in the order they failed."""

    def register(self, count: int = 1) -> int:
        """Numbers `count` stages that skip failures; returns the first number."""
        first = self._stages
        self._stages += count
        return first

    @property
    def skipped(self) -> list[SkippedElement]:
        """The skipped elements kept (the most recent `KEEP`), oldest first."""
        return list(self._recent)

    def replays(self, stage: int, origin: tuple[int, ...] | None) -> bool:
        """Whether the element was skipped before a restore (so it is skipped again)."""
        return origin is not None and (stage, origin) in self.replay

    def charge(
        self,
        stage: int,
        origin: tuple[int, ...] | None,
        name: str,
        error: BaseException | str,
        seen: int,
    ) -> None:
        """Counts a failed element as skipped, or raises if the budget does not allow it.

        Args:
            stage: the failing stage's number (from `register`).
            origin: the element's origin, None if unknown.
            name: the stage, readable (`map(parse)`).
            error: the exception (or its text, from a worker).
            seen: elements read so far, the failing one included.

        Raises:
            ErrorBudgetExceededError: this failure is one more than the budget allows.
        """
        where = f"{name} at {describe_origin(origin, seen)}"
        text = error if isinstance(error, str) else error_text(error)
        self.add(SkippedElement(stage, origin, where, text), seen, error)

    def add(
        self, element: SkippedElement, seen: int, cause: BaseException | str | None = None
    ) -> None:
        """Charges an already described `SkippedElement` (see `charge`)."""
        key = element.key
        if key is not None and key in self._keys:
            return  # Charged before (the same element, read again after a restore).
        if self.budget is None:
            self.reports.append((self.at, element, seen))
            return
        allowed = self.budget.allowance(seen)
        if self.failures + 1 > allowed:
            before = "; ".join(f"{s.where} ({s.error})" for s in list(self._recent)[:5])
            more = f" and {self.failures - 5} more" if self.failures > 5 else ""
            message = (
                f"{element.where} raised {element.error}; that is failure {self.failures + 1}, "
                f"and {self.budget} allows {allowed} after {seen} elements read."
            )
            if before:
                message += f" Skipped before: {before}{more}."
            exceeded = ErrorBudgetExceededError(message)
            if isinstance(cause, BaseException):
                raise exceeded from cause
            raise exceeded
        self.failures += 1
        if len(self._recent) == KEEP:
            dropped = self._recent[0].key
            if dropped is not None:
                self._keys.discard(dropped)
        self._recent.append(element)
        if key is not None:
            self._keys.add(key)

    def get_state(self) -> IteratorState:
        """`{"failures": n, "skipped": [...]}` (see `SkippedElement.to_json`)."""
        return {"failures": self.failures, "skipped": [s.to_json() for s in self._recent]}

    def set_state(self, state: IteratorState, /) -> None:
        """Restores counts and skipped elements; they will be skipped again, unrun.

        Raises:
            InvalidStateError: see `check_state`; the ledger is then unchanged.
        """
        failures, elements = self.check_state(state)
        self.failures = failures
        self._recent = collections.deque(elements, maxlen=KEEP)
        self._keys = {key for key in (s.key for s in elements) if key is not None}
        self.replay = frozenset(self._keys)

    def check_state(self, state: object) -> tuple[int, list[SkippedElement]]:
        """The failure count and skipped elements of `state`, checked against this ledger.

        A state of this ledger counts at most `sys.maxsize` failures and keeps at most
        `KEEP` skipped elements, no more than the failures; each names a stage this
        ledger numbered (`register`) and an origin of index-sized ints >= 0, and no
        element is skipped twice.

        Raises:
            InvalidStateError: the state is malformed or out of range (the message
                names the field, the value and the allowed range).

        Example:
            >>> ledger = ErrorLedger(ErrorBudget(max_failures=1))
            >>> ledger.register()
            0
            >>> ledger.check_state({"failures": 1, "skipped": [[0, [4], "map", "E"]]})
            (1, [SkippedElement(stage=0, origin=(4,), where='map', error='E')])
        """
        if not isinstance(state, dict) or set(state) != {"failures", "skipped"}:
            raise InvalidStateError(
                "an error ledger's state is {'failures': n, 'skipped': [...]} (from "
                f"get_state()), got {state!r}."
            )
        failures, skipped = state["failures"], state["skipped"]
        if not _is_count(failures) or failures > sys.maxsize:
            raise InvalidStateError(
                f"the error ledger's state['failures'] = {failures!r} is out of range "
                f"[0, {sys.maxsize}] (a count)."
            )
        if not isinstance(skipped, list):
            raise InvalidStateError(
                "the error ledger's state['skipped'] must be a list of skipped elements, got "
                f"{type(skipped).__name__} {skipped!r}."
            )
        if len(skipped) > min(failures, KEEP):
            raise InvalidStateError(
                f"the error ledger's state['skipped'] lists {len(skipped)} skipped elements, "
                f"more than the {min(failures, KEEP)} it may keep (the {failures} failures, "
                f"at most {KEEP})."
            )
        elements: list[SkippedElement] = []
        keys: set[Key] = set()
        for number, value in enumerate(skipped):
            field = f"the error ledger's state['skipped'][{number}]"
            element = _skipped_element(value, field)
            if not element.stage < self._stages:
                raise InvalidStateError(
                    f"{field} = {value!r}: its stage {element.stage} is out of range "
                    f"[0, {self._stages - 1}] (the {self._stages} stages that skip failures)."
                )
            key = element.key
            if key is not None and key in keys:
                raise InvalidStateError(
                    f"{field} = {value!r} is skipped twice; an element is skipped once."
                )
            if key is not None:
                keys.add(key)
            elements.append(element)
        assert isinstance(failures, int)
        return failures, elements

    def preset(self, keys: Iterable[Key]) -> None:
        """(Collecting) the elements of this run that were skipped before a restore."""
        self.replay = frozenset(keys)

    def __repr__(self) -> str:
        return f"ErrorLedger({self.budget!r}, failures={self.failures})"


_ACTIVE: contextvars.ContextVar[ErrorLedger | None] = contextvars.ContextVar(
    "chute_error_ledger", default=None
)


def active_ledger() -> ErrorLedger | None:
    """The ledger of the iterator chain being built, if it has an error budget."""
    return _ACTIVE.get()


@contextlib.contextmanager
def ledger_scope(ledger: ErrorLedger | None) -> Iterator[ErrorLedger | None]:
    """Makes `ledger` the one stages built inside the block register with.

    Example:
        >>> ledger = ErrorLedger(None)
        >>> with ledger_scope(ledger):
        ...     active_ledger() is ledger
        True
        >>> active_ledger() is None
        True
    """
    token = _ACTIVE.set(ledger)
    try:
        yield ledger
    finally:
        _ACTIVE.reset(token)
