"""The layout of a stream repeat's state, as resharding reads and writes it.

`RepeatIter`'s state is `{"epoch": e, "parent": <the parent's state>}`. Resharded to
another process count, processes may have stopped in different epochs, so the new
state also lists the parent's states for the later epochs some process had reached
(`"ahead"`, one per epoch after `e`, in order): each says where that epoch starts for
this process and which of its positions other processes consumed (a frontier). When
an epoch ends, the repeat takes the next of them rather than the parent's start.
`REPEAT_STATES` reaches the parent's state and writes the resharded state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["AHEAD", "REPEAT_STATES", "RepeatStates"]

AHEAD = "ahead"
"""The key of the parent's states for the epochs after the current one."""

_EPOCH, _PARENT = "epoch", "parent"
_KEYS = frozenset({_EPOCH, _PARENT})


class RepeatStates:
    """`chute_core.WrapperLayout` of `RepeatIter`'s state, and its epochs ahead.

    Example:
        >>> state = {"epoch": 2, "parent": {"position": 5}}
        >>> REPEAT_STATES.inner(state), REPEAT_STATES.epoch(state)
        ({'position': 5}, 2)
        >>> REPEAT_STATES.write(state, 1, {"position": 3}, [{"position": 0}])
        {'epoch': 1, 'parent': {'position': 3}, 'ahead': [{'position': 0}]}
    """

    def inner(self, state: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The parent's state (of the current epoch); None if `state` is no repeat's."""
        keys = set(state)
        if not (keys == _KEYS or keys == _KEYS | {AHEAD}):
            return None
        inner: Mapping[str, Any] = state[_PARENT]
        return inner if isinstance(inner, Mapping) else None

    def rebuild(
        self, state: Mapping[str, Any], inner: dict[str, Any], scale: tuple[int, int]
    ) -> dict[str, Any]:
        """`state` around a moved `inner` (the epoch and epochs ahead: see `write`)."""
        del scale
        return {_EPOCH: state[_EPOCH], _PARENT: inner}

    def epoch(self, state: Mapping[str, Any]) -> int:
        """The epoch the state is in.

        Raises:
            ValueError: not an int >= 0.
        """
        value = state[_EPOCH]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"a repeat's epoch must be an int >= 0, got {value!r:.80}.")
        return value

    def ahead(self, state: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """The parent's states of the epochs after the current one (resharded states).

        Raises:
            ValueError: not a list of states.
        """
        value = state.get(AHEAD, [])
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            raise ValueError(
                f"a repeat's epochs ahead must be a list of states, got {value!r:.80}."
            )
        return value

    def write(
        self,
        state: Mapping[str, Any],
        epoch: int,
        parent: Mapping[str, Any],
        ahead: Sequence[Mapping[str, Any]],
    ) -> dict[str, Any]:
        """The repeat's state in `epoch` at `parent`, with the parent's states `ahead`."""
        del state
        written: dict[str, Any] = {_EPOCH: epoch, _PARENT: parent}
        if ahead:
            written[AHEAD] = list(ahead)
        return written


REPEAT_STATES = RepeatStates()
"""The layout of `RepeatIter`'s state."""
