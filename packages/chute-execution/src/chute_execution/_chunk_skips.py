"""`ChunkSkips`: charging the elements a chunk skipped under an error budget, in order.

Part of `MultiprocessPrefetchIter` (and its subclasses): a chunk's result lists the
elements its workers skipped; they are charged to the consumer's `ErrorLedger` as the
outputs before them are handed out, so a budget runs out at the same `next()` as it
would in one process.
"""

from __future__ import annotations

import dataclasses
import sys

from chute_core.internal import ErrorLedger, Key

from ._chunk_plan import Skip
from ._spans import SpanSchedule

__all__ = ["ChunkSkips"]


class ChunkSkips:
    """The skips of the current chunk, charged as their outputs are reached.

    The iterator that mixes this in sets `_ledger`, `_first_stage`, `_stages` (under a
    budget) and `_spans`, and starts with `set_skips(())`.
    """

    _skips: tuple[Skip, ...]
    _skip_at: int
    _ledger: ErrorLedger | None
    _first_stage: int
    _stages: int
    _spans: SpanSchedule

    @property
    def next_skip(self) -> int:
        """The output of the current chunk before which the next skip is charged."""
        return self._skip_at

    def set_skips(self, skips: tuple[Skip, ...]) -> None:
        """The skipped elements of the chunk just loaded, to charge as they are reached."""
        self._skips = skips
        self._skip_at = skips[0][0] if skips else sys.maxsize

    def charge_skips(self, upto: int) -> None:
        """Charges the current chunk's skips that came before output `upto` (or at it).

        Raises `ErrorBudgetExceededError` if the budget runs out; the skips not yet
        charged stay, so the same `next()` raises again.
        """
        if not self._skips:
            return
        ledger = self._ledger
        assert ledger is not None
        while self._skips and self._skips[0][0] <= upto:
            _, element, seen = self._skips[0]
            stage = element.stage + self._first_stage
            ledger.add(dataclasses.replace(element, stage=stage), seen, element.error)
            self.set_skips(self._skips[1:])

    def replay_for(self, chunk: int) -> tuple[Key, ...]:
        """The restored ledger's skipped elements in unit `chunk`, in the plan's stage numbers."""
        ledger = self._ledger
        span = self._spans.span(chunk)
        if ledger is None or not ledger.replay or span is None:
            return ()
        first, stages = self._first_stage, self._stages
        start, stop = span
        return tuple(
            (stage - first, origin)
            for stage, origin in ledger.replay
            if first <= stage < first + stages and start <= origin[0] < stop
        )
