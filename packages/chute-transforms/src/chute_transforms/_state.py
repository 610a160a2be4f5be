"""The layout of a stream op's state around its parent's: `{"parent": ..., ...}`.

Every op over one parent iterator keeps the parent's state under `"parent"`, plus its
own counters (`"index"`: elements it has handed out, for error notes). `SkipErrorsIter`
adds `"errors"`: the elements it skipped, by position. `PARENT_STATES` tells resharding
how to reach the parent's state and how to rebuild the op's around a moved one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PARENT_STATES", "SKIPS_REFUSED", "ParentStates"]

_PARENT = "parent"
_INDEX = "index"
_ERRORS = "errors"

SKIPS_REFUSED = (
    "the pipeline has an error budget (skip_errors): each process's state records the "
    "elements it skipped by their position in its own shard, which another process count "
    "cuts differently; restore with the same process count."
)


class ParentStates:
    """`chute_core.WrapperLayout` of the ops in this layer (and workers' batches).

    Example:
        >>> PARENT_STATES.inner({"parent": {"position": 4}, "index": 4})
        {'position': 4}
        >>> PARENT_STATES.rebuild({"parent": {}, "index": 4}, {"position": 2}, (1, 2))
        {'parent': {'position': 2}, 'index': 2}
    """

    def inner(self, state: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The parent's state; None if `state` wraps none; raises if it records skips."""
        if _PARENT not in state:
            return None
        if _ERRORS in state:
            raise ValueError(SKIPS_REFUSED)
        if not set(state) <= {_PARENT, _INDEX}:
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
        return rebuilt


PARENT_STATES = ParentStates()
