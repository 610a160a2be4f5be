"""Error budgets (`skip_errors`) across a reshard: the skipped stay skipped, failures shared.

A budget's state lists the elements it skipped by their position in its process's
shard, and counts its failures. Resharded, every skipped element is behind every new
process (consumed), so the list is emptied; the failures are split among the new
processes, so that together they count as many as the old ones did.
"""

from __future__ import annotations

from typing import Any

from chute_transforms.internal import PARENT_STATES

from ._errors import ReshardError
from ._reshard_windows import inner_state

__all__ = ["budget_failures", "share_failures"]


def budget_failures(state: Any, where: str) -> tuple[int, ...]:
    """The failures each error budget in `state` counted, outermost first."""
    counts: list[int] = []
    while isinstance(state, dict):
        try:
            if "errors" in state:
                counts.append(PARENT_STATES.failures(state))
            state = inner_state(state)
        except ValueError as error:
            raise ReshardError(f"{where}: {error}") from None
    return tuple(counts)


def share_failures(state: Any, failures: tuple[int, ...], shard: int, count: int) -> None:
    """Gives shard `shard` of `count` its share of each budget's failures, in place.

    The skipped elements are behind every new process (consumed), and the failures they
    cost are split among the new processes, so that together they count as many.
    """
    budgets = iter(failures)
    while isinstance(state, dict):
        if "errors" in state:
            total = next(budgets)
            PARENT_STATES.with_failures(state, total // count + (shard < total % count))
        state = inner_state(state)
