"""The state of a stream cut into units, and what resharding adds to it.

`{"position": p, "offset": k}`: the `k`-th output from base position `p` (see
`_chunk_positions`). Inside a unit the state also says `through`, the base position
after the last output's, which resharding needs where a filter (or a frontier) made
outputs and positions differ. A resharded iterator's state holds the positions it still
skips (`frontier`, a `chute_samplers.internal.Frontier`).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from chute_core import InvalidStateError, IteratorState
from chute_samplers.internal import FRONTIER, Frontier, SkipConsumed

from ._chunk_plan import ChunkPlan
from ._chunk_positions import THROUGH

__all__ = ["reading_through", "split_extras", "unit_state"]


def unit_state(
    position: int, offset: int, last_origin: tuple[int, ...] | None, frontier: Frontier | None
) -> dict[str, Any]:
    """The state at output `offset` from base `position`, the output before it from `last_origin`.

    Example:
        >>> unit_state(8, 2, (11,), None)
        {'position': 8, 'offset': 2, 'through': 12}
    """
    state: dict[str, Any] = {"position": position, "offset": offset}
    if offset and last_origin:
        state[THROUGH] = int(last_origin[0]) + 1
    left = None if frontier is None else frontier.after(position)
    if left is not None:
        state[FRONTIER] = left.to_json()
    return state


def split_extras(
    state: IteratorState, owner: str, length: int
) -> tuple[IteratorState, Frontier | None]:
    """`state` without `through` (checked: it is derived) and `frontier` (read), and the frontier.

    With a frontier (a resharded state), a position past `length` is clamped to it, as
    readers do (see `chute_samplers.internal.read_reader_state`).

    Example:
        >>> split_extras({"position": 8, "offset": 2, "through": 12}, "it", 10)
        ({'position': 8, 'offset': 2}, None)
    """
    if not isinstance(state, dict) or not (FRONTIER in state or THROUGH in state):
        return state, None
    rest = dict(state)
    through = rest.pop(THROUGH, 0)
    if type(through) is not int or not 0 <= through <= sys.maxsize:
        raise InvalidStateError(
            f"{owner}: state['through'] = {through!r:.50} is no int in [0, {sys.maxsize}]."
        )
    frontier = Frontier.from_json(rest.pop(FRONTIER), owner) if FRONTIER in rest else None
    position = rest.get("position")
    if frontier is not None and type(position) is int and position > length:
        rest["position"] = length
    return rest, frontier


def reading_through(plan: ChunkPlan, frontier: Frontier | None) -> ChunkPlan:
    """`plan` reading its base through `frontier` (skipping what it says), or plainly."""
    base = plan.dataset.dataset if isinstance(plan.dataset, SkipConsumed) else plan.dataset
    return dataclasses.replace(
        plan, dataset=base if frontier is None else SkipConsumed(base, frontier)
    )
