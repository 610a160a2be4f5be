"""The layout of a reader's state: `{"position": p}`, the next position it reads.

A reader that continues other processes' positions after a reshard also holds the
positions it skips, under `"frontier"` (see `Frontier`).

`SequentialIter` (and every reader that walks positions in order) keeps this state;
`READER_POSITIONS` tells resharding how to read and write it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._frontier import FRONTIER

__all__ = ["READER_POSITIONS", "ReaderPositions"]

_POSITION = "position"


class ReaderPositions:
    """`chute_core.PositionLayout` of a reader's `{"position": p}` state.

    Example:
        >>> READER_POSITIONS.read({"position": 6}, None, False), READER_POSITIONS.write(3, None)
        (6, {'position': 3})
    """

    def read(self, state: Mapping[str, Any], chunk_size: int | None, drops: bool) -> int | None:
        """The position, or None if `state` is not a reader's."""
        keys = set(state)
        return int(state[_POSITION]) if keys in ({_POSITION}, {_POSITION, FRONTIER}) else None

    def write(self, position: int, chunk_size: int | None) -> dict[str, Any]:
        """The reader's state at `position`."""
        return {_POSITION: position}


READER_POSITIONS = ReaderPositions()
