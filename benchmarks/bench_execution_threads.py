"""asv benchmarks of the execution layer's threads: parallel ordered reads and prefetch.

`ThreadedReads`: 2000 elements, each costing about 50 us of work that releases the GIL
(`numpy_sort`: sorting a 64 KB float64 array, CPU-bound, so bounded by the machine's
cores; `sleep`: `time.sleep(50e-6)`, a stand-in for waiting on storage, which the OS
stretches to ~100-200 us), read by `PrefetchReadIter` with 8 threads beside
`SequentialIter` doing the same reads in the same call (`track_speedup_*`: above 1, the
threads are faster). On a 2-core machine the CPU-bound case stays near 1x (a plain
`ThreadPoolExecutor` does no better: re-taking the GIL after each 50 us op costs about
as much as the op); CPU-bound maps need worker processes.

`ThreadPrefetch`: cheap elements (a `SequentialIter` over integers) through
`ThreadPrefetchIter`, in elements per second, and as a ratio to iterating the parent
directly (below 1: the cost of handing each element and its state across threads).
"""

from __future__ import annotations

import time
import timeit
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from chute_execution import PrefetchReadIter, ReadOptions, ThreadPrefetchIter
from chute_samplers import SequentialIter
from chute_sources import RangeSource
from chute_transforms import MapMap

from ._timing import median_ratio, median_seconds

COSTLY_ELEMENTS = 2000
THREADS = 8
CHEAP_ELEMENTS = 50_000

_ARRAY = np.random.default_rng(0).random(8192)  # 64 KB of float64.


def _numpy_sort(x: int) -> int:
    np.sort(_ARRAY)  # ~50 us; NumPy releases the GIL while sorting.
    return x


def _sleep(x: int) -> int:
    time.sleep(50e-6)
    return x


_COSTS: dict[str, Callable[[int], int]] = {"numpy_sort": _numpy_sort, "sleep": _sleep}


def _drain(iterator: object) -> None:
    for _ in iterator:  # type: ignore[attr-defined]
        pass


class ThreadedReads:
    """A 50 us GIL-releasing map over 2000 elements: 8 threads vs one."""

    params: ClassVar[list[str]] = list(_COSTS)
    param_names: ClassVar[list[str]] = ["cost"]
    timer = timeit.default_timer

    def setup(self, cost: str) -> None:
        self.dataset = MapMap(RangeSource(COSTLY_ELEMENTS), _COSTS[cost])
        self.options = ReadOptions(num_threads=THREADS, prefetch_buffer_size=500)

    def _threads(self) -> None:
        with PrefetchReadIter(self.dataset, self.options) as iterator:
            _drain(iterator)

    def _sequential(self) -> None:
        _drain(SequentialIter(self.dataset))

    def time_prefetch_read_8_threads(self, cost: str) -> None:
        self._threads()

    def time_sequential_iter(self, cost: str) -> None:
        self._sequential()

    def track_speedup_8_threads(self, cost: str) -> float:
        return median_ratio(self._threads, self._sequential, repeats=3)

    track_speedup_8_threads.unit = "ratio"  # type: ignore[attr-defined]


class ThreadPrefetch:
    """50,000 cheap elements through `ThreadPrefetchIter` vs iterating the parent."""

    params: ClassVar[list[int]] = [16, 256]
    param_names: ClassVar[list[str]] = ["buffer_size"]
    timer = timeit.default_timer

    def setup(self, buffer_size: int) -> None:
        self.source = RangeSource(CHEAP_ELEMENTS)

    def _prefetched(self, buffer_size: int) -> None:
        with ThreadPrefetchIter(SequentialIter(self.source), buffer_size) as iterator:
            _drain(iterator)

    def _direct(self) -> None:
        _drain(SequentialIter(self.source))

    def time_thread_prefetch(self, buffer_size: int) -> None:
        self._prefetched(buffer_size)

    def time_parent_directly(self, buffer_size: int) -> None:
        self._direct()

    def track_elements_per_second(self, buffer_size: int) -> float:
        return CHEAP_ELEMENTS / median_seconds(lambda: self._prefetched(buffer_size), repeats=3)

    track_elements_per_second.unit = "elements/s"  # type: ignore[attr-defined]

    def track_ratio_to_parent(self, buffer_size: int) -> float:
        return median_ratio(lambda: self._prefetched(buffer_size), self._direct, repeats=5)

    track_ratio_to_parent.unit = "ratio"  # type: ignore[attr-defined]
