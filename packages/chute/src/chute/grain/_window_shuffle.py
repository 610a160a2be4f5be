"""Grain's `WindowShuffleMapDataset`: a shuffle within consecutive windows of positions."""

from __future__ import annotations

import operator
from typing import Any, SupportsIndex

import numpy as np

from chute_core.internal import check_int, check_seed

__all__ = ["WindowShuffleMapDataset"]


class _WindowShuffled:
    """Random access to `parent` with positions shuffled inside windows of `window_size`.

    Window `w` (positions `[w * window_size, (w + 1) * window_size)`, the last one
    shorter) holds the same elements in an order drawn from `(seed, w)`, so reading
    any position costs one permutation of one window, kept for the next read.
    """

    def __init__(self, parent: Any, window_size: int, seed: int) -> None:
        self.parent, self.window_size, self.seed = parent, window_size, seed
        self._window: tuple[int, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.parent)

    def __getitem__(self, index: SupportsIndex) -> Any:
        length = len(self.parent)
        index = operator.index(index)
        if not -length <= index < length:
            raise IndexError(f"WindowShuffleMapDataset: index {index} out of range ({length}).")
        index %= length
        window, offset = divmod(index, self.window_size)
        start = window * self.window_size
        if self._window is None or self._window[0] != window:
            size = min(self.window_size, length - start)
            order = np.random.default_rng([self.seed, window]).permutation(size)
            self._window = (window, order)
        return self.parent[start + int(self._window[1][offset])]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_window": None}


def WindowShuffleMapDataset(parent: Any, *, window_size: int, seed: int) -> Any:
    """`parent` with its elements shuffled within windows of `window_size` positions.

    Every window keeps its elements, in an order drawn from `(seed, window)`: the same
    order in every epoch (Grain draws a new one each epoch).

    Example:
        >>> import chute
        >>> ds = WindowShuffleMapDataset(chute.MapDataset.range(6), window_size=3, seed=0)
        >>> sorted(ds[:3]), sorted(ds[3:])
        ([0, 1, 2], [3, 4, 5])
    """
    from ._datasets import MapDataset

    owner = "WindowShuffleMapDataset"
    size = check_int(window_size, "window_size", owner, minimum=1)
    return MapDataset.source(
        _WindowShuffled(MapDataset.source(parent), size, check_seed(seed, owner))
    )
