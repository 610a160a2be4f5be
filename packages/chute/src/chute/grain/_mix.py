"""Grain's mixture of random-access datasets: its proportions, its length, its order.

`chute.MapDataset.mix` keeps each component within one element of its share in every
prefix and ends exactly before the first position that needs an element a component
lacks. Grain 0.2.18 differs in three ways, and code written for it may count on them:

- Weights become integers: each is scaled so that the smallest is 100, then truncated
  (0.7 : 0.3 becomes 233 : 100, not 7 : 3).
- The length is `int(min(len(component) / share))`, with shares from those integers,
  computed in floating point (6728 for components of 4708 and 60000 at 0.7 : 0.3).
- Position `k` is placed by splitting `k` among the components one after another: the
  first gets `k - k * (rest / total)` of the first `k` positions (rounded down), and
  the rest are split the same way among the others. The element at `k` belongs to the
  component whose count grows from the first `k` positions to the first `k + 1`.

An index past the end reads as a later epoch (`k + epoch * len`), and a component's
index past its own end as its later epoch, as Grain reads them; so `repeat` over a
Grain mixture continues the same placement instead of starting it again.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from chute_core import RandomAccessDataSource
from chute_samplers import ENDLESS, EpochArray, MapNode, PositionArray, fetch

__all__ = ["GrainMixMap", "grain_mix_length", "grain_proportions", "locate"]

T = TypeVar("T")

_SMALLEST = 100  # Grain scales the smallest weight to this before truncating.


def grain_proportions(weights: Sequence[float] | None, count: int) -> tuple[int, ...]:
    """The integer proportions Grain mixes `count` components by.

    Example:
        >>> grain_proportions([0.7, 0.3], 2), grain_proportions(None, 3)
        ((233, 100), (1, 1, 1))
    """
    if weights is None:
        return (1,) * count
    values = list(weights)
    if len(values) != count:
        raise ValueError(f"MapDataset.mix: got {len(values)} weights for {count} datasets.")
    for number, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise TypeError(f"MapDataset.mix: weights[{number}] must be a number, got {value!r}.")
        if not math.isfinite(value) or value < 0:
            raise ValueError(
                f"MapDataset.mix: weights[{number}] must be finite and positive, got {value!r}."
            )
    if 0 in values:
        raise ValueError("Must specify all non-zero proportions for mixing.")  # Grain's words.
    scale = _SMALLEST / min(values)
    scaled = [value * scale for value in values]
    if not all(math.isfinite(value) for value in scaled):
        raise ValueError(
            f"MapDataset.mix: weights {values} span too wide a range to scale the smallest "
            f"to {_SMALLEST}, as Grain does."
        )
    return tuple(int(value) for value in scaled)


def grain_mix_length(lengths: Sequence[int], proportions: Sequence[int]) -> int:
    """Grain's length of a mixture: no component's element is needed twice.

    Example:
        >>> grain_mix_length([4708, 60000], grain_proportions([0.7, 0.3], 2))
        6728
    """
    total = sum(proportions)
    shares = [
        length / (weight / total) for length, weight in zip(lengths, proportions, strict=True)
    ]
    return min(sys.maxsize, int(min(shares)))


def locate(
    indices: Sequence[int] | np.ndarray[Any, Any], proportions: Sequence[int]
) -> tuple[list[int], list[int]]:
    """(component, index in that component) of each mixture index, as Grain places them.

    Example:
        >>> locate(range(6), (300, 100))
        ([0, 0, 0, 1, 0, 0], [0, 1, 2, 0, 3, 4])
    """
    ks = [int(k) for k in indices]
    total = sum(proportions)
    if not ks or max(ks) + 1 < (2**62) // max(total, 1):
        return _locate_int64(np.asarray(ks, np.int64), proportions)
    components, keys = [], []
    for k in ks:  # Python integers: no overflow, whatever the index.
        component, key = _locate_one(k, proportions)
        components.append(component)
        keys.append(key)
    return components, keys


def _locate_one(k: int, proportions: Sequence[int]) -> tuple[int, int]:
    remaining, before, through = sum(proportions), k, k + 1
    for component, weight in enumerate(proportions):
        others_before = before * (remaining - weight) // remaining
        others_through = through * (remaining - weight) // remaining
        mine_through = through - others_through
        if before - others_before != mine_through:
            return component, mine_through - 1
        remaining -= weight
        before, through = others_before, others_through
    raise AssertionError(f"no component holds mixture index {k} of {tuple(proportions)}")


def _locate_int64(
    ks: np.ndarray[Any, np.dtype[np.int64]], proportions: Sequence[int]
) -> tuple[list[int], list[int]]:
    remaining, before, through = sum(proportions), ks, ks + 1
    components = np.full(len(ks), -1, np.int64)
    keys = np.zeros(len(ks), np.int64)
    for component, weight in enumerate(proportions):
        others_before = before * (remaining - weight) // remaining
        others_through = through * (remaining - weight) // remaining
        mine_through = through - others_through
        here = (components < 0) & (before - others_before != mine_through)
        components[here] = component
        keys[here] = mine_through[here] - 1
        remaining -= weight
        before, through = others_before, others_through
    return components.tolist(), keys.tolist()


class GrainMixMap(MapNode[T]):
    """Mixes `parents` by `weights` as Grain's `MapDataset.mix` does (see the module).

    Example:
        >>> node = GrainMixMap([[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]], [0.75, 0.25])
        >>> len(node), list(node)
        (6, [0, 2, 4, 1, 6, 8])
    """

    def __init__(
        self, parents: Sequence[RandomAccessDataSource[T]], weights: Sequence[float] | None
    ) -> None:
        if not parents:
            raise ValueError("MapDataset.mix: datasets is empty; pass at least one dataset.")
        self._parents = tuple(parents)
        self._proportions = grain_proportions(weights, len(self._parents))
        self._lengths = [len(parent) for parent in self._parents]
        self._length = grain_mix_length(self._lengths, self._proportions)

    @property
    def parents(self) -> tuple[RandomAccessDataSource[T], ...]:
        """The components."""
        return self._parents

    @property
    def proportions(self) -> tuple[int, ...]:
        """Grain's integer proportions."""
        return self._proportions

    def __len__(self) -> int:
        return self._length

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[T]:
        length = self._length
        indices = [
            int(p) if length >= ENDLESS else int(e) * length + int(p)
            for p, e in zip(positions.tolist(), epochs.tolist(), strict=True)
        ]
        components, keys = locate(indices, self._proportions)
        result: list[T] = [None] * len(indices)  # type: ignore[list-item]
        for component in sorted(set(components)):
            slots = [i for i, c in enumerate(components) if c == component]
            size = self._lengths[component]
            wanted = [keys[i] for i in slots]
            if size >= ENDLESS:
                where, epoch = wanted, [0] * len(wanted)
            else:
                where, epoch = [k % size for k in wanted], [k // size for k in wanted]
            values = fetch(
                self._parents[component], np.asarray(where, np.int64), np.asarray(epoch, np.uint64)
            )
            for slot, value in zip(slots, values, strict=True):
                result[slot] = value
        return result

    def __repr__(self) -> str:
        return f"GrainMixMap({list(self._parents)!r}, proportions={list(self._proportions)})"
