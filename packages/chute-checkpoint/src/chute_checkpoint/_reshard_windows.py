"""Resharding a stage that holds elements after the shard: what it holds goes back.

A window shuffle's state is its parent's at the start of its current window, a
packer's its parent's before the oldest element in an open row. So a process that
stopped inside a window (or with rows open) counts, for resharding, as stopped at the
first element held: the elements held go back to be read. Those it already yielded
(of the window, or in rows emitted) must not come again: their positions
(`chute_samplers.internal.WINDOW_STATES`, `chute_transforms.internal.PACK_STATES`)
become a `Frontier`'s `taken` list, global positions that whichever new process reads
them skips. Resharding again keeps the ones no reader has passed yet.

`inner_state` and `rebuild_state` walk and rebuild the states of the ops that wrap one
parent (`chute_transforms`' `{"parent": ...}`, the packers' and the window shuffle's
`{"window_start": ...}`).

Example:
    >>> window = {"window_start": {"parent": {"position": 2}, "index": 2}, "window": 1,
    ...           "offset": 1, "span": [2, 2]}
    >>> inner_state(inner_state(window))
    {'position': 2}
    >>> stages = [{"op": "window_shuffle", "params": {"window_size": 2, "seed": 0}}]
    >>> taken_ahead([{"position": 0}, window], [0, 2], 2, stages, "state")  # Local 2.
    (5,)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from chute_core import InvalidStateError
from chute_samplers.internal import REPEAT_STATES, WINDOW_STATES
from chute_transforms.internal import PACK_STATES, PARENT_STATES

from ._errors import ReshardError
from ._reshard_stages import traits_of

__all__ = [
    "find_state",
    "holding_states",
    "inner_state",
    "merge_taken",
    "rebuild_state",
    "taken_ahead",
]

_HOLDING = (PACK_STATES, WINDOW_STATES)
"""The layouts of the holding stages' states: each `inner`, `rebuild` and `taken`."""


def inner_state(state: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The state `state` wraps (its parent's); None: a reader's, or another leaf.

    Raises:
        ValueError: a parent's state among unexpected keys.
    """
    for layout in (*_HOLDING, REPEAT_STATES):  # Keys `PARENT_STATES` would refuse.
        inner = layout.inner(state)
        if inner is not None:
            return inner
    return PARENT_STATES.inner(state)


def rebuild_state(
    state: Mapping[str, Any], inner: dict[str, Any], scale: tuple[int, int]
) -> dict[str, Any]:
    """`state` around a moved `inner`, its counters scaled by `scale` (old, new)."""
    layout = _holding_layout(state)
    if layout is None and REPEAT_STATES.inner(state) is not None:
        layout = REPEAT_STATES  # Its epoch and epochs ahead: see `_reshard_epochs`.
    if layout is not None:
        rebuilt: dict[str, Any] = layout.rebuild(state, inner, scale)
        return rebuilt
    return PARENT_STATES.rebuild(state, inner, scale)


def _holding_layout(state: Mapping[str, Any]) -> Any:
    """The layout of `state` if a holding stage's (None: another op's)."""
    return next((layout for layout in _HOLDING if layout.inner(state) is not None), None)


def holding_states(
    state: Any, stages: Sequence[Mapping[str, Any]]
) -> list[tuple[Any, Mapping[str, Any], Mapping[str, Any]]]:
    """`(layout, state, params)` of each holding stage inside `state`, outermost first.

    `stages` are the pipeline's stages after the shard, whose holding stages' parameters
    pair with the states found, last stage with outermost state.
    """
    params = [item["params"] for item in stages if traits_of(item).holds]
    found: list[tuple[Any, Mapping[str, Any], Mapping[str, Any]]] = []
    while isinstance(state, dict) and len(found) < len(params):
        layout = _holding_layout(state)
        if layout is not None:
            found.append((layout, state, params[len(params) - 1 - len(found)]))
        try:
            state = inner_state(state)
        except ValueError:
            break  # Not a wrapper's state: nothing below.
    return found


def find_state(state: Any, wanted: Callable[[dict[str, Any]], bool]) -> Any:
    """The first state inside `state` (walking parents' states) that is `wanted`, if any.

    Example:
        >>> find_state({"parent": {"position": 2}, "index": 2}, lambda s: "position" in s)
        {'position': 2}
    """
    while isinstance(state, dict):
        if wanted(state):
            return state
        try:
            state = inner_state(state)
        except ValueError:
            return None  # Not a wrapper's state: nothing below.
    return None


def taken_ahead(
    states: Sequence[Any],
    positions: Sequence[int],
    count: int,
    stages: Sequence[Mapping[str, Any]],
    where: str,
) -> tuple[int, ...]:
    """The global positions the shards' holding stages yielded ahead of their positions.

    Args:
        states: the state of each shard `0..count-1`, in shard order.
        positions: each shard's reader position (the first element held, for a shard
            inside a window or with rows open).
        count: the number of shards (global position of shard `i`'s `j`: `i + count * j`).
        stages: the pipeline's stages after the shard (the holding stages' parameters
            are read there: a window shuffle, a packer, or a packer after a window shuffle).
        where: how to name the states in errors.

    Raises:
        ReshardError: a damaged state, or one from which the positions cannot be known
            (saved inside a window, or with rows open, by a chute that did not record
            them).
    """
    found: list[int] = []
    for shard, (state, position) in enumerate(zip(states, positions, strict=True)):
        local: list[int] = []
        # Each holding stage's state is its parent's before what it holds: a packer's
        # after a window shuffle names the window it began in, so the elements each
        # yielded ahead of the state inside it are all emitted.
        for layout, held, params in holding_states(state, stages):
            try:
                local.extend(layout.taken(held, params))
            except InvalidStateError as error:
                raise ReshardError(f"{where} {shard}: {error}") from None
        if local and min(local) < position:
            raise ReshardError(
                f"{where} {shard}: it yielded position {min(local)} ahead of the first element "
                f"it holds ({position}); the state is damaged."
            )
        found.extend(shard + count * p for p in local)
    return tuple(sorted(found))


def merge_taken(*lists: Sequence[int], below: int) -> tuple[int, ...]:
    """The positions of `lists`, ascending and once each, without those below `below`.

    Below the watermark `below` every position was consumed anyway.

    Example:
        >>> merge_taken([9, 4], [7, 9], below=5)
        (7, 9)
    """
    return tuple(sorted({p for taken in lists for p in taken if p >= below}))
