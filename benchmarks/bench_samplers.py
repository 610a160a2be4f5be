"""asv benchmarks of the samplers layer: positions per second, and ratios to NumPy.

Each `track_*_ratio` divides chute's positions/s by the positions/s of
`numpy.random.Generator.permutation` of the same size, both measured in the same call
(alternating, median of 5: `_timing.median_ratio`), so the figure is comparable across
machines. The permutation is the natural yardstick: it is what a materialised shuffle
costs (chute's permutation needs no memory and answers any position directly).

Run as plain Python for a quick look: `uv run --frozen python benchmarks/bench_samplers.py`
(or `python -m benchmarks.bench_samplers`).
"""

from __future__ import annotations

import timeit
from collections.abc import Callable

import numpy as np

from chute_samplers import IndexSampler, Permutation

try:
    from ._timing import median_ratio, median_seconds
except ImportError:  # Run as a script: this folder is on sys.path.
    from _timing import median_ratio, median_seconds  # type: ignore[no-redef]

_REPEATS = 5
_SCALAR_POSITIONS = 20_000  # The pure-Python loops time this many positions.
_ITER_POSITIONS = 20_000


def _numpy_permutation(size: int) -> Callable[[], object]:
    rng = np.random.default_rng(0)
    return lambda: rng.permutation(size)


def _ratio(ours: Callable[[], object], our_positions: int, size: int) -> float:
    """(our positions/s) / (positions/s of numpy's permutation of `size`), same call."""
    time_ratio = median_ratio(ours, _numpy_permutation(size), repeats=_REPEATS)
    return time_ratio * our_positions / size


class PermutationSuite:
    """`Permutation`: vectorised `take` and the scalar `perm[i]` loop."""

    params = ([1 << 16, (1 << 20) + 1],)
    param_names = ("size",)
    timer = timeit.default_timer

    def setup(self, size: int) -> None:
        self.perm = Permutation(size, seed=0, epoch=1)
        self.positions = np.arange(size, dtype=np.int64)
        self.scalar_positions = range(min(size, _SCALAR_POSITIONS))

    def _vectorised(self) -> None:
        self.perm.take(self.positions)

    def _scalar(self) -> None:
        perm = self.perm
        for i in self.scalar_positions:
            perm[i]

    def time_vectorised(self, size: int) -> None:
        self._vectorised()

    def time_scalar_loop(self, size: int) -> None:
        self._scalar()

    def track_vectorised_positions_per_second(self, size: int) -> float:
        return size / median_seconds(self._vectorised, _REPEATS)

    track_vectorised_positions_per_second.unit = "positions/s"  # type: ignore[attr-defined]

    def track_vectorised_ratio(self, size: int) -> float:
        return _ratio(self._vectorised, size, size)

    track_vectorised_ratio.unit = "ratio"  # type: ignore[attr-defined]

    def track_scalar_positions_per_second(self, size: int) -> float:
        return len(self.scalar_positions) / median_seconds(self._scalar, _REPEATS)

    track_scalar_positions_per_second.unit = "positions/s"  # type: ignore[attr-defined]

    def track_scalar_ratio(self, size: int) -> float:
        return _ratio(self._scalar, len(self.scalar_positions), size)

    track_scalar_ratio.unit = "ratio"  # type: ignore[attr-defined]


class IndexSamplerSuite:
    """`IndexSampler`: iterating `RecordMetadata` (with per-record generators) and the
    vectorised `record_keys`."""

    params = ([1 << 16, (1 << 20) + 1],)
    param_names = ("num_records",)
    timer = timeit.default_timer

    def setup(self, num_records: int) -> None:
        self.sampler = IndexSampler(num_records, num_epochs=2, shuffle=True, seed=0)
        self.count = min(num_records, _ITER_POSITIONS)
        self.positions = np.arange(num_records, dtype=np.int64)

    def _iterate(self) -> None:
        iterator = iter(self.sampler)
        for _ in range(self.count):
            next(iterator)

    def _record_keys(self) -> None:
        self.sampler.record_keys(self.positions)

    def time_iterate(self, num_records: int) -> None:
        self._iterate()

    def time_record_keys(self, num_records: int) -> None:
        self._record_keys()

    def track_iterate_positions_per_second(self, num_records: int) -> float:
        return self.count / median_seconds(self._iterate, _REPEATS)

    track_iterate_positions_per_second.unit = "positions/s"  # type: ignore[attr-defined]

    def track_iterate_ratio(self, num_records: int) -> float:
        return _ratio(self._iterate, self.count, num_records)

    track_iterate_ratio.unit = "ratio"  # type: ignore[attr-defined]

    def track_record_keys_ratio(self, num_records: int) -> float:
        return _ratio(self._record_keys, num_records, num_records)

    track_record_keys_ratio.unit = "ratio"  # type: ignore[attr-defined]


def _main() -> None:
    for suite_class in (PermutationSuite, IndexSamplerSuite):
        (sizes,) = suite_class.params
        for size in sizes:
            suite = suite_class()
            suite.setup(size)
            for name in sorted(dir(suite)):
                if name.startswith("track_"):
                    start = timeit.default_timer()
                    value = getattr(suite, name)(size)
                    seconds = timeit.default_timer() - start
                    unit = getattr(getattr(suite_class, name), "unit", "")
                    print(
                        f"{suite_class.__name__}.{name}({size}): {value:,.3f} {unit}"
                        f"  [{seconds:.2f} s]"
                    )


if __name__ == "__main__":
    _main()
