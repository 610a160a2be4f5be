"""Where a saved state stands in its shard, and the same state moved to another position.

A state holds its stream's position in one of the layouts of `LAYOUTS` (a reader's
`{"position": p}`, the workers' `{"position": p, "offset": k}`) or an interleave's
(`OPEN_STREAMS`: the next input it opens), possibly inside the
states of stages that hold elements or skip failures (`inner_state`), and, once
resharded, the frontier of positions it still skips.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chute_core import PositionLayout
from chute_execution.internal import AT, CHUNK_POSITIONS, SKIP, THROUGH
from chute_samplers.internal import FRONTIER, OPEN_STREAMS, READER_POSITIONS, Frontier

from ._document_shape import check_positions, damaged_state
from ._errors import ReshardError
from ._reshard_stages import traits_of
from ._reshard_windows import inner_state, rebuild_state

__all__ = ["LAYOUTS", "frontier_of", "leaf_of", "moved_state", "position_of"]

LAYOUTS: tuple[PositionLayout, ...] = (READER_POSITIONS, CHUNK_POSITIONS)
"""The state layouts that hold a stream's position, each owned by the layer that keeps it."""


def frontier_of(state: Any, shard: int, count: int, epoch: int, where: str) -> Frontier | None:
    """The frontier a (resharded) state holds for shard `shard` of `count`, or None.

    Raises:
        ReshardError: it is damaged, or of another shard or epoch length.

    Example:
        >>> frontier_of({"position": 3}, 0, 2, 0, "state 0") is None
        True
    """
    leaf = leaf_of(state)
    if FRONTIER not in leaf:
        return None
    try:
        frontier = Frontier.from_json(leaf[FRONTIER], where)
    except ValueError as error:
        raise ReshardError(str(error)) from None
    if (frontier.index, frontier.count) != (shard, count):
        raise ReshardError(
            f"{where} holds the frontier of shard {frontier.index} of {frontier.count}, but is "
            f"of shard {shard} of {count}; the file is damaged or of another pipeline."
        )
    if frontier.epoch != epoch:
        raise ReshardError(
            f"{where} holds a frontier of epochs of {frontier.epoch} records, but its pipeline "
            f"reads epochs of {epoch}; the file is damaged or of another pipeline."
        )
    return frontier


def position_of(
    state: Any,
    chunk_size: int | None,
    pipeline: Mapping[str, Any],
    where: str,
    frontier: Frontier | None = None,
) -> int:
    """The position of its shard that `state` reads next (what it consumed is before it).

    Example:
        >>> position_of({"position": 64, "offset": 0}, 64, {"stages": []}, "state 0")
        64
    """
    whole = leaf_of(state)
    if OPEN_STREAMS.is_state(whole):  # An interleave's: the next input it opens.
        try:
            return OPEN_STREAMS.position(whole)
        except ValueError as error:
            raise ReshardError(f"{where}: {error}") from None
    leaf = {k: v for k, v in whole.items() if k not in (FRONTIER, AT, SKIP)}
    check_positions(leaf, where)  # Counters only: int() would hide "4", 4.5 or True.
    drops = any(traits_of(item).drops for item in pipeline["stages"])
    if frontier is not None and leaf.get("offset") and THROUGH not in leaf:  # Skips in a unit.
        if drops:
            raise ReshardError(
                f"{where} is inside a unit of a filtered stream, where the offset counts kept "
                "elements, not positions; save at a unit boundary."
            )
        leaf = {
            "position": frontier.skip_kept(int(leaf["position"]), int(leaf["offset"])),
            "offset": 0,
        }
    for layout in LAYOUTS:
        try:
            position = layout.read(leaf, chunk_size, drops)
        except ValueError as error:
            raise ReshardError(str(error)) from None
        if position is not None:
            return position
    raise ReshardError(f"cannot find the stream position in the state {state!r:.200}.")


def leaf_of(state: Any) -> dict[str, Any]:
    """The innermost state, the one that holds the stream's position.

    Example:
        >>> leaf_of({"position": 2})
        {'position': 2}
    """
    while isinstance(state, dict):
        try:
            inner = inner_state(state)
        except ValueError as error:
            raise ReshardError(str(error)) from None
        if inner is None:
            return state
        state = inner
    raise ReshardError(f"cannot find the stream position in the state {state!r:.200}.")


def moved_state(
    state: Any,
    position: int,
    chunk_size: int | None,
    counts: tuple[int, int],
    where: str,
    frontier: Frontier | None = None,
) -> Any:
    """`state` at `position` of its shard, skipping `frontier`; `counts`: (old, new) shards.

    Example:
        >>> moved_state({"position": 9}, 4, None, (2, 3), "state 0")
        {'position': 4}
    """
    inner = inner_state(state)
    if inner is not None:
        moved = moved_state(dict(inner), position, chunk_size, counts, where, frontier)
        try:
            return rebuild_state(state, moved, counts)
        except (TypeError, ValueError, OverflowError) as error:  # A counter of another type.
            raise damaged_state(state, error, where) from error
    if OPEN_STREAMS.is_state(state):  # The streams it opened in part: `assign_opened`.
        written = OPEN_STREAMS.write(state, position, ())
    else:
        found = [layout for layout in LAYOUTS if layout.read(state, chunk_size, False) is not None]
        if not found:
            raise ReshardError(f"cannot find the stream position in the state {state!r:.200}.")
        written = found[0].write(position, chunk_size)
    if frontier is not None:
        written[FRONTIER] = frontier.to_json()
    return written
