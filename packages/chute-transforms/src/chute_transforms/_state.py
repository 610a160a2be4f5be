"""The layout of a stream op's state around its parent's: `{"parent": ..., ...}`.

Every op over one parent iterator keeps the parent's state under `"parent"`, plus its
own counters (`"index"`: elements it has handed out, for error notes). `SkipErrorsIter`
adds `"errors"`: its failure count and the elements it skipped, by their position in
its shard. `PARENT_STATES` tells resharding how to reach the parent's state and how to
rebuild the op's around a moved one. Resharded, the skipped elements are consumed (no
new process reads them again), so the list is emptied, and the processes share the
failure count (`failures`, `with_failures`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PARENT_STATES", "ParentStates"]

_PARENT = "parent"
_INDEX = "index"
_ERRORS = "errors"


class ParentStates:
    """`chute_core.WrapperLayout` of the ops in this layer (and workers' batches).

    Example:
        >>> PARENT_STATES.inner({"parent": {"position": 4}, "index": 4})
        {'position': 4}
        >>> PARENT_STATES.rebuild({"parent": {}, "index": 4}, {"position": 2}, (1, 2))
        {'parent': {'position': 2}, 'index': 2}
    """

    def inner(self, state: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The parent's state; None if `state` wraps none."""
        if _PARENT not in state:
            return None
        if not set(state) <= {_PARENT, _INDEX, _ERRORS}:
            raise ValueError(f"unexpected keys in the state {dict(state)!r:.200}.")
        parent: Mapping[str, Any] = state[_PARENT]
        return parent

    def rebuild(
        self, state: Mapping[str, Any], inner: dict[str, Any], scale: tuple[int, int]
    ) -> dict[str, Any]:
        """`state` around `inner`, its element count scaled like the positions."""
        rebuilt: dict[str, Any] = {_PARENT: inner}
        if _INDEX in state:  # Counts elements for error notes; scaled like the positions.
            rebuilt[_INDEX] = int(state[_INDEX]) * scale[0] // scale[1]
        if _ERRORS in state:  # The skipped elements are behind every new process.
            rebuilt[_ERRORS] = {"failures": self.failures(state), "skipped": []}
        return rebuilt

    def failures(self, state: Mapping[str, Any]) -> int:
        """The failures an error budget's state counts (0 for other ops' states).

        Raises:
            ValueError: a count that is no non-negative int.

        Example:
            >>> PARENT_STATES.failures({"parent": {}, "errors": {"failures": 3, "skipped": []}})
            3
        """
        errors = state.get(_ERRORS)
        if errors is None:
            return 0
        count = errors.get("failures") if isinstance(errors, Mapping) else None
        if type(count) is not int or count < 0:
            raise ValueError(f"the error budget's state {errors!r:.200} has no failure count.")
        return count

    def with_failures(self, state: dict[str, Any], failures: int) -> dict[str, Any]:
        """`state` (an error budget's, rebuilt) counting `failures` instead."""
        if _ERRORS in state:
            state[_ERRORS] = {"failures": failures, "skipped": []}
        return state


PARENT_STATES = ParentStates()
