"""The layout of the workers' state: `{"position": p, "offset": k}`.

Inside a unit the state also says `through`, the base position after the last output
handed out: all positions before it were consumed, none after, whatever a filter
dropped. A resharded iterator adds the positions it skips (`frontier`).

A stream cut into units of base positions (`MultiprocessPrefetchIter`) is at the
`k`-th output from base position `p`; older versions wrote `{"chunk": c, "offset": k}`
(grid chunk `c` of `chunk_size` positions), which is read too. `CHUNK_POSITIONS` tells
resharding how to read and write it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CHUNK_POSITIONS", "THROUGH", "ChunkPositions"]

_CHUNK, _OFFSET, _POSITION = "chunk", "offset", "position"
THROUGH = "through"
"""Inside a unit: the base position after the last output's (what the offset consumed)."""
_FRONTIER = "frontier"  # A resharded iterator's skipped positions (read by resharding).


class ChunkPositions:
    """`chute_core.PositionLayout` of the workers' `{"position", "offset"}` state.

    The offset counts outputs from the position, which are positions unless a stage may
    drop elements; so a state inside a unit of a filtered stream has no position.

    Example:
        >>> CHUNK_POSITIONS.read({"position": 16, "offset": 1}, None, False)
        17
        >>> CHUNK_POSITIONS.read({"chunk": 2, "offset": 1}, 8, False)
        17
        >>> CHUNK_POSITIONS.write(17, 8)
        {'position': 17, 'offset': 0}
    """

    def read(self, state: Mapping[str, Any], chunk_size: int | None, drops: bool) -> int | None:
        """The base position, or None if `state` is not of this layout."""
        keys = set(state) - {_FRONTIER}
        if keys == {_POSITION, _OFFSET, THROUGH}:
            return int(state[THROUGH])
        if keys == {_POSITION, _OFFSET}:
            start = int(state[_POSITION])
        elif keys == {_CHUNK, _OFFSET} and isinstance(chunk_size, int):
            start = int(state[_CHUNK]) * chunk_size
        else:
            return None
        if state[_OFFSET] and drops:
            raise ValueError(
                f"the worker state {dict(state)} is inside a unit of a filtered stream, where "
                "the offset counts kept elements, not positions; save at a unit boundary."
            )
        return start + int(state[_OFFSET])

    def write(self, position: int, chunk_size: int | None) -> dict[str, Any]:
        """The state at base `position` (any cut restores it)."""
        return {_POSITION: position, _OFFSET: 0}


CHUNK_POSITIONS = ChunkPositions()
