"""Chunks cut by measured cost: a slow map's first element, and cheap elements' rate.

`mp_prefetch(num_workers=2)` with the default (adaptive) chunks against the same
pipeline with a fixed `chunk_size=64` (the previous default), in the same process:
- a map that sleeps 2 ms (400 elements): time to the first element, and the ratio of
  the fixed grid's time to the first element over the adaptive one's;
- a cheap map (200k elements): the ratio of elements/s, adaptive over fixed (1.0: no
  cost for adapting).
"""

from __future__ import annotations

import time
import timeit

import chute

from ._timing import median_ratio

SLOW = 400
CHEAP = 200_000


def sleep_2ms(x: int) -> int:
    time.sleep(0.002)
    return x


def add_one(x: int) -> int:
    return x + 1


def _first_element_seconds(chunk_size: int | None) -> float:
    ds = chute.MapDataset.range(SLOW).to_iter_dataset().map(sleep_2ms)
    it = iter(ds.mp_prefetch(num_workers=2, chunk_size=chunk_size))
    it.start_prefetch()
    time.sleep(0.5)  # The workers are up and busy: what remains is the first chunk's work.
    it.close()
    it = iter(ds.mp_prefetch(num_workers=2, chunk_size=chunk_size))
    start = time.perf_counter()
    next(it)
    seconds = time.perf_counter() - start
    it.close()
    return seconds


class AdaptiveUnits:
    """Adaptive chunks vs a fixed grid of 64, 2 workers."""

    timer = timeit.default_timer
    number = 1
    repeat = 3

    def _cheap(self, chunk_size: int | None) -> None:
        ds = chute.MapDataset.range(CHEAP).to_iter_dataset().map(add_one)
        for _ in ds.mp_prefetch(num_workers=2, chunk_size=chunk_size):
            pass

    def time_cheap_adaptive(self) -> None:
        self._cheap(None)

    def track_first_element_seconds_slow_map(self) -> float:
        return _first_element_seconds(None)

    track_first_element_seconds_slow_map.unit = "seconds"  # type: ignore[attr-defined]

    def track_first_element_ratio_fixed_over_adaptive(self) -> float:
        return _first_element_seconds(64) / _first_element_seconds(None)

    track_first_element_ratio_fixed_over_adaptive.unit = "ratio"  # type: ignore[attr-defined]

    def track_cheap_ratio_adaptive_to_fixed(self) -> float:
        return median_ratio(lambda: self._cheap(None), lambda: self._cheap(64), repeats=3)

    track_cheap_ratio_adaptive_to_fixed.unit = "ratio"  # type: ignore[attr-defined]
