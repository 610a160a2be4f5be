"""asv benchmarks of the stream ops, per element: map, filter, flat_map, random_map.

Each op runs over 20,000 integers from an in-memory `ListIterator`. Two figures per op,
both from one call so they hold on a noisy machine:

- `track_op_us_per_element`: what the op adds per input element, i.e. the median time
  of the op over the list iterator minus that of the list iterator alone (measured
  alternately), divided by the elements. It includes the user's function call.
- `track_ratio_to_plain_loop`: throughput of the op over the list iterator divided by
  that of a plain loop over the list doing the same work: calling the same function
  (for random_map, with a Philox generator per element built the plain NumPy way: the
  same kind of work, not the same draws). 1.0 is parity; below 1 is the price of
  checkpointable iteration with origins.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import numpy as np

from chute_testing import ListIterator
from chute_transforms import FilterIter, FlatMapIter, MapIter, RandomMapIter

from ._timing import median_ratio, median_seconds

ELEMENTS = 20_000
SEED = 7


def add_one(x: int) -> int:
    return x + 1


def is_even(x: int) -> bool:
    return x % 2 == 0


def twice(x: int) -> tuple[int, int]:
    return (x, x)


def plus_uniform(x: int, rng: np.random.Generator) -> float:
    return x + rng.random()


def _drain(iterator: Iterator[Any]) -> None:
    for _ in iterator:
        pass


def _plain_random_map(items: list[int]) -> None:
    """A loop that builds a Philox generator per element with NumPy and calls the function."""
    key = np.uint64(SEED)
    for i, x in enumerate(items):
        rng = np.random.Generator(np.random.Philox(key=key, counter=[0, 0, i, 0]))
        plus_uniform(x, rng)


class StreamOps:
    """One stream op over 20,000 integers: µs per element and ratio to a plain loop."""

    params: ClassVar[list[str]] = ["map", "filter", "flat_map", "random_map"]
    param_names: ClassVar[list[str]] = ["op"]

    def setup(self, op: str) -> None:
        self.items = list(range(ELEMENTS))
        items = self.items
        ours: dict[str, Callable[[], Iterator[Any]]] = {
            "map": lambda: MapIter(ListIterator(items), add_one),
            "filter": lambda: FilterIter(ListIterator(items), is_even),
            "flat_map": lambda: FlatMapIter(ListIterator(items), twice),
            "random_map": lambda: RandomMapIter(ListIterator(items), plus_uniform, SEED),
        }
        plain: dict[str, Callable[[], None]] = {
            "map": lambda: _drain(add_one(x) for x in items),
            "filter": lambda: _drain(x for x in items if is_even(x)),
            "flat_map": lambda: _drain(y for x in items for y in twice(x)),
            "random_map": lambda: _plain_random_map(items),
        }
        self.make = ours[op]
        self.plain = plain[op]

    def _ours(self) -> None:
        _drain(self.make())

    def _source_only(self) -> None:
        _drain(ListIterator(self.items))

    def time_op(self, op: str) -> None:
        self._ours()

    def track_op_us_per_element(self, op: str) -> float:
        """µs the op adds per input element (op over the source, minus the source)."""
        self._ours()
        self._source_only()
        differences = []
        for _ in range(5):
            start = time.perf_counter()
            self._ours()
            middle = time.perf_counter()
            self._source_only()
            differences.append((middle - start) - (time.perf_counter() - middle))
        return statistics.median(differences) / ELEMENTS * 1e6

    track_op_us_per_element.unit = "µs/element"  # type: ignore[attr-defined]

    def track_us_per_element(self, op: str) -> float:
        """µs per input element of the op over the list iterator, source included."""
        return median_seconds(self._ours, repeats=5) / ELEMENTS * 1e6

    track_us_per_element.unit = "µs/element"  # type: ignore[attr-defined]

    def track_ratio_to_plain_loop(self, op: str) -> float:
        """Elements/s of the op over the list iterator / a plain loop doing the same."""
        return median_ratio(self._ours, self.plain, repeats=5)

    track_ratio_to_plain_loop.unit = "ratio"  # type: ignore[attr-defined]
