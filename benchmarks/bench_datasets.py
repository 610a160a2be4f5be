"""asv benchmarks of the fluent datasets, single process: per-element overhead.

The workload of the execution issue's first row: integers -> shuffle -> map -> batch,
and a chain of three maps, each beside a plain Python loop doing the same work in the
same call (`track_*_ratio_*`: above 1, chute is faster than the plain loop).
"""

from __future__ import annotations

import numpy as np

import chute

from ._timing import median_ratio, median_seconds

N = 200_000
BATCH = 256


def _add_one(x: int) -> int:
    return x + 1


def _double(x: int) -> int:
    return 2 * x


def _square(x: int) -> int:
    return x * x


class ShuffleMapBatch:
    """`range(N) -> shuffle -> map -> batch(256)`, iterated to the end."""

    def setup(self) -> None:
        mapped = chute.MapDataset.range(N).shuffle(seed=0).map(_add_one)
        self.ds = mapped.batch(BATCH)
        self.stream = mapped.to_iter_dataset().batch(BATCH)  # Batched after the stream.
        self.permutation = np.random.default_rng(0).permutation(N)

    def _ours(self) -> None:
        for _ in self.ds:
            pass

    def _plain(self) -> None:
        order = self.permutation
        for start in range(0, N, BATCH):
            np.asarray([_add_one(int(x)) for x in order[start : start + BATCH]])

    def time_iterate(self) -> None:
        self._ours()

    def track_us_per_element(self) -> float:
        return median_seconds(self._ours, repeats=3) / N * 1e6

    track_us_per_element.unit = "us"  # type: ignore[attr-defined]

    def track_ratio_to_plain_loop(self) -> float:
        return median_ratio(self._ours, self._plain, repeats=3)

    track_ratio_to_plain_loop.unit = "ratio"  # type: ignore[attr-defined]

    def _stream(self) -> None:
        for _ in self.stream:
            pass

    def track_stream_ratio_to_plain_loop(self) -> float:
        """The same batches, written `...map(f).to_iter_dataset().batch(256)`."""
        return median_ratio(self._stream, self._plain, repeats=3)

    track_stream_ratio_to_plain_loop.unit = "ratio"  # type: ignore[attr-defined]


class MapChain:
    """Three maps over a stream of N integers (`to_iter_dataset().map().map().map()`)."""

    def setup(self) -> None:
        base = chute.MapDataset.range(N)
        self.random_access = base.map(_add_one).map(_double).map(_square)
        self.stream = base.to_iter_dataset().map(_add_one).map(_double).map(_square)

    def _plain(self) -> None:
        for x in range(N):
            _square(_double(_add_one(x)))

    def time_random_access_chain(self) -> None:
        for _ in self.random_access:
            pass

    def time_stream_chain(self) -> None:
        for _ in self.stream:
            pass

    def track_random_access_ratio_to_plain_loop(self) -> float:
        return median_ratio(lambda: [None for _ in self.random_access], self._plain, repeats=3)

    track_random_access_ratio_to_plain_loop.unit = "ratio"  # type: ignore[attr-defined]

    def track_stream_ratio_to_plain_loop(self) -> float:
        return median_ratio(lambda: [None for _ in self.stream], self._plain, repeats=3)

    track_stream_ratio_to_plain_loop.unit = "ratio"  # type: ignore[attr-defined]
