"""The state of a stream cut into units, and what resharding adds to it.

`{"position": p, "offset": k}`: the `k`-th output from base position `p` (see
`_chunk_positions`). Inside a unit the state also says `through`, the base position
after the last output's, which resharding needs where a filter (or a frontier) made
outputs and positions differ. Where the workers split elements (a flat map before the
prefetch) and the last output is not its element's last, `through` is that element's
position (it goes back to be read) and `at` names it with the outputs of it delivered
(`[position, outputs]`). A resharded iterator's state holds the positions it still
skips (`frontier`, a `chute_samplers.internal.Frontier`) and the outputs of split
elements other processes delivered (`skip`: `[position, outputs]` pairs, left out by
the workers, `ChunkPlan.drops`).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from chute_core import InvalidStateError, IteratorState
from chute_samplers.internal import FRONTIER, Frontier, SkipConsumed
from chute_transforms.internal import position_counts

from ._chunk_plan import ChunkPlan
from ._chunk_positions import AT, SKIP, THROUGH

__all__ = ["Drops", "UnitStates", "reading_through", "split_extras", "unit_state"]

Drops = tuple[tuple[int, int], ...]
"""`(position, outputs)` pairs: outputs of split elements delivered by another process."""


def unit_state(
    position: int,
    offset: int,
    last_origin: tuple[int, ...] | None,
    frontier: Frontier | None,
    *,
    next_origin: tuple[int, ...] | None = None,
    splits: bool = False,
    drops: Drops = (),
) -> dict[str, Any]:
    """The state at output `offset` from base `position`, past `last_origin`'s output.

    `next_origin` is the next output's (None: the unit has none left); `splits`: the
    workers split elements; `drops`: outputs of split elements they leave out.

    Example:
        >>> unit_state(8, 2, (11,), None)
        {'position': 8, 'offset': 2, 'through': 12}
        >>> unit_state(8, 2, (9, 0), None, next_origin=(9, 1), splits=True)
        {'position': 8, 'offset': 2, 'through': 9, 'at': [9, 1]}
    """
    state: dict[str, Any] = {"position": position, "offset": offset}
    if offset and last_origin:
        last = int(last_origin[0])
        inside = (  # Outputs of the element remain: it goes back to be read.
            splits
            and len(last_origin) > 1
            and next_origin is not None
            and len(next_origin) > 1
            and next_origin[0] == last
        )
        state[THROUGH] = last if inside else last + 1
        if inside:
            state[AT] = [last, int(last_origin[1]) + 1]
    left = None if frontier is None else frontier.after(position)
    if left is not None:
        state[FRONTIER] = left.to_json()
    ahead = [[p, n] for p, n in drops if p >= position]
    if ahead:
        state[SKIP] = ahead
    return state


def split_extras(
    state: IteratorState, owner: str, length: int
) -> tuple[IteratorState, Frontier | None, Drops, dict[str, Any]]:
    """`state` without its extras, and the frontier, drops and `before` they say.

    `frontier` and `skip` are read; `through` and `at`, what the state says of the
    outputs before it, are checked and returned as they are (`before`).

    With a frontier (a resharded state), a position past `length` is clamped to it, as
    readers do (see `chute_samplers.internal.read_reader_state`).

    Example:
        >>> split_extras({"position": 8, "offset": 2, "through": 12}, "it", 10)
        ({'position': 8, 'offset': 2}, None, (), {'through': 12})
        >>> split_extras({"position": 8, "offset": 0, "skip": [[9, 2]]}, "it", 10)
        ({'position': 8, 'offset': 0}, None, ((9, 2),), {})
    """
    if not isinstance(state, dict) or not ({FRONTIER, THROUGH, AT, SKIP} & set(state)):
        return state, None, (), {}
    rest = dict(state)
    before = {key: rest.pop(key) for key in (THROUGH, AT) if key in rest}
    through = before.get(THROUGH, 0)
    if type(through) is not int or not 0 <= through <= sys.maxsize:
        raise InvalidStateError(
            f"{owner}: state['through'] = {through!r:.50} is no int in [0, {sys.maxsize}]."
        )
    if AT in before:
        position_counts(owner, [before[AT]], AT, "outputs")  # One [position, outputs].
    drops = tuple(position_counts(owner, rest.pop(SKIP, []), SKIP, "outputs").items())
    frontier = Frontier.from_json(rest.pop(FRONTIER), owner) if FRONTIER in rest else None
    position = rest.get("position")
    if frontier is not None and type(position) is int and position > length:
        rest["position"] = length
    return rest, frontier, drops, before


class UnitStates:
    """Part of `MultiprocessPrefetchIter`: its plan and states, as resharding reads them.

    The iterator sets `_plan`, `_frontier`, `_drops` and `_restored` (see `restored`),
    and gives `unit_start`.
    """

    _plan: ChunkPlan
    _frontier: Frontier | None
    _drops: Drops
    _restored: tuple[int, int, dict[str, Any]] | None
    unit_start: Callable[[int], int]  # The base position a unit starts at (the iterator's).

    @property
    def plan(self) -> ChunkPlan:
        """The plan the workers run now (reading through what a resharded state skips)."""
        return self._plan

    def restored(self, chunk: int, offset: int, before: dict[str, Any]) -> None:
        """Keeps what a restored state said of the outputs before its output `offset`.

        That is `through` and `at` of unit `chunk`, for the states saved again before the
        unit's outputs are at hand.
        """
        self._restored = (chunk, offset, before) if offset and before else None

    def state_at(self, chunk: int, offset: int, *around: tuple[int, ...] | None) -> dict[str, Any]:
        """The state at output `offset` of unit `chunk`, past the outputs from `around`.

        `around`: the last output's origin, and the next's if the unit has one.
        """
        last, after = (*around, None, None)[:2]
        splits = self._plan.max_fan_out != 1
        state = unit_state(
            self.unit_start(chunk), offset, last, self._frontier, next_origin=after,
            splits=splits, drops=self._drops,
        )  # fmt: skip
        restored = self._restored
        if not around and restored is not None and restored[:2] == (chunk, offset):
            state.update(restored[2])  # Saved again before the unit's outputs came.
        return state


def reading_through(plan: ChunkPlan, frontier: Frontier | None, drops: Drops = ()) -> ChunkPlan:
    """`plan` reading its base through `frontier` (or plainly), leaving out `drops`.

    Example:
        >>> reading_through(ChunkPlan(range(4)), None, ((2, 1),)).drops
        ((2, 1),)
    """
    base = plan.dataset.dataset if isinstance(plan.dataset, SkipConsumed) else plan.dataset
    return dataclasses.replace(
        plan, dataset=base if frontier is None else SkipConsumed(base, frontier), drops=drops
    )
