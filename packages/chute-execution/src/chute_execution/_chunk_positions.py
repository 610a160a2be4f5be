"""The layout of the workers' state: `{"position": p, "offset": k}`.

Inside a unit the state also says `through`, the base position after the last output
handed out: all positions before it were consumed, none after, whatever a filter
dropped; where the workers split elements (a flat map) and the last output handed out
is not its element's last, `through` is that element's position and `at` names it with
the outputs of it delivered. A resharded iterator adds the positions it skips
(`frontier`) and the outputs of split elements another process delivered (`skip`).

A stream cut into units of base positions (`MultiprocessPrefetchIter`) is at the
`k`-th output from base position `p`; older versions wrote `{"chunk": c, "offset": k}`
(grid chunk `c` of `chunk_size` positions), which is read too. `CHUNK_POSITIONS` tells
resharding how to read and write it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["AT", "CHUNK_POSITIONS", "SKIP", "THROUGH", "ChunkPositions"]

_CHUNK, _OFFSET, _POSITION = "chunk", "offset", "position"
THROUGH = "through"
"""Inside a unit: the base position after the last output's (what the offset consumed)."""
AT = "at"
"""Inside an element the workers split: `[its position, outputs of it delivered]`."""
SKIP = "skip"
"""A resharded state's `[[position, outputs], ...]`: outputs of split elements to leave out."""
_FRONTIER = "frontier"  # A resharded iterator's skipped positions (read by resharding).
_EXTRAS = {_FRONTIER, AT, SKIP}


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
        keys = set(state) - _EXTRAS
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

    def is_split(self, state: Mapping[str, Any]) -> bool:
        """Whether `state` is the workers' (whose elements they may split, as a flat map).

        Example:
            >>> CHUNK_POSITIONS.is_split({"position": 4, "offset": 0})
            True
        """
        return _POSITION in state and _OFFSET in state

    def delivered(self, state: Mapping[str, Any]) -> dict[int, int]:
        """The outputs of split elements delivered ahead of `through`, by base position.

        The element the state stopped inside (`at`: every output of it up to there,
        those another process delivered included) and the `skip` entries.

        Raises:
            ValueError: a damaged entry.

        Example:
            >>> state = {"position": 4, "offset": 3, "through": 5, "at": [5, 2]}
            >>> CHUNK_POSITIONS.delivered({**state, "skip": [[5, 1], [9, 1]]})
            {5: 2, 9: 1}
        """
        entries: dict[int, int] = {}
        for entry in [*state.get(SKIP, []), *([state[AT]] if AT in state else [])]:
            if not (isinstance(entry, list) and len(entry) == 2):
                raise ValueError(f"a skip or at entry is [position, outputs], got {entry!r:.80}.")
            position, outputs = entry
            if type(position) is not int or type(outputs) is not int or outputs < 1:
                raise ValueError(f"a skip or at entry is two ints, got {entry!r:.80}.")
            entries[position] = outputs  # `at` counts the outputs of `skip` too.
        return entries

    def with_skips(self, state: dict[str, Any], entries: list[list[int]]) -> dict[str, Any]:
        """A rebuilt workers' state that leaves out `entries` ([position, outputs]).

        Example:
            >>> CHUNK_POSITIONS.with_skips({"position": 2, "offset": 0}, [[3, 1]])
            {'position': 2, 'offset': 0, 'skip': [[3, 1]]}
        """
        state.pop(AT, None)
        if entries:
            state[SKIP] = entries
        else:
            state.pop(SKIP, None)
        return state


CHUNK_POSITIONS = ChunkPositions()
