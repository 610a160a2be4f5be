"""The layout of the workers' state: `{"chunk": c, "offset": k}`.

A stream cut into chunks of `chunk_size` base positions (`MultiprocessPrefetchIter`)
is at the `k`-th output of chunk `c`. `CHUNK_POSITIONS` tells resharding how to read and
write it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CHUNK_POSITIONS", "ChunkPositions"]

_CHUNK, _OFFSET = "chunk", "offset"


class ChunkPositions:
    """`chute_sources.internal.PositionLayout` of the workers' `{"chunk", "offset"}` state.

    The offset counts a chunk's outputs, which are its positions unless a stage may
    drop elements; so a state inside a chunk of a filtered stream has no position.

    Example:
        >>> CHUNK_POSITIONS.read({"chunk": 2, "offset": 1}, 8, False)
        17
        >>> CHUNK_POSITIONS.write(17, 8)
        {'chunk': 2, 'offset': 1}
    """

    def read(self, state: Mapping[str, Any], chunk_size: int | None, drops: bool) -> int | None:
        """The base position, or None if `state` is not of this layout."""
        if set(state) != {_CHUNK, _OFFSET} or not isinstance(chunk_size, int):
            return None
        if state[_OFFSET] and drops:
            raise ValueError(
                f"the worker state {dict(state)} is inside a chunk of a filtered stream, where "
                "the offset counts kept elements, not positions; save at a chunk boundary."
            )
        return int(state[_CHUNK]) * chunk_size + int(state[_OFFSET])

    def write(self, position: int, chunk_size: int | None) -> dict[str, Any]:
        """The state at base `position` (`chunk_size` is required)."""
        if not isinstance(chunk_size, int):
            raise ValueError("a worker state needs the pipeline's chunk size.")
        chunk, offset = divmod(position, chunk_size)
        return {_CHUNK: chunk, _OFFSET: offset}


CHUNK_POSITIONS = ChunkPositions()
