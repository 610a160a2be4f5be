"""Stopping a chunk between its elements once nobody wants its result.

An executor that cannot kill a running chunk (Ray: `ray.cancel` races with replies,
see `_ray_board`) passes `ChunkPlan.run` a `cancelled` check instead. The plan asks it
between elements and raises `ChunkCancelled` once it says yes, so a closed iterator
leaves no chunk running for longer than one element takes (and a check's delay).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from chute_core import ChuteError
from chute_transforms import MapChain

__all__ = ["ChunkCancelled", "run_maps_until"]

_PIECE_SECONDS = 0.01  # A piece of maps that ran faster than this grows twice as large.


class ChunkCancelled(ChuteError):
    """A chunk stopped between elements: its `cancelled` check said nobody wants it.

    Example:
        >>> issubclass(ChunkCancelled, ChuteError)
        True
    """


def run_maps_until(
    chain: MapChain,
    elements: list[Any],
    start: int,
    outputs: list[Any],
    cancelled: Callable[[], bool],
) -> None:
    """`chain.run(elements, start, outputs)`, asking `cancelled()` between pieces.

    Pieces start at one element and double while each takes under 10 ms, so slow
    elements are checked one by one and quick ones cost a few checks per chunk.

    Raises:
        ChunkCancelled: `cancelled()` said yes before the last piece.

    Example:
        >>> outputs = []
        >>> run_maps_until(MapChain([abs]), [-1, -2, -3], 0, outputs, lambda: False)
        >>> outputs
        [1, 2, 3]
        >>> try:
        ...     run_maps_until(MapChain([abs]), [-1, -2], 0, [], lambda: True)
        ... except ChunkCancelled as error:
        ...     print(error)
        stopped after 1 of 2 elements: nobody wants this chunk any more
    """
    done, size = 0, 1
    while done < len(elements):
        began = time.perf_counter()
        chain.run(elements[done : done + size], start + done, outputs)
        done += size
        if done < len(elements) and cancelled():
            raise ChunkCancelled(
                f"stopped after {done} of {len(elements)} elements: nobody wants this "
                "chunk any more"
            )
        if time.perf_counter() - began < _PIECE_SECONDS:
            size *= 2
