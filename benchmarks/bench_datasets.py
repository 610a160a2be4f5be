"""asv benchmarks of the fluent datasets, single process: per-element overhead.

The per-element workload as users write it (a list of 1,000,000 ints -> shuffle -> map
-> batch(256), the iterator built inside the timing), the same over a `RangeSource`,
and a chain of three maps, each beside a plain Python loop doing the same work in the
same call (`track_*_ratio_*`: above 1, chute is faster than the plain loop).
"""

from __future__ import annotations

import numpy as np

import chute

from ._timing import median_ratio, median_seconds

N = 200_000
LIST_N = 1_000_000  # The per-element workload's list, as issue 32 states it.
BATCH = 256


def _add_one(x: int) -> int:
    return x + 1


def _double(x: int) -> int:
    return 2 * x


def _square(x: int) -> int:
    return x * x


class ShuffleMapBatch:
    """1,000,000 Python ints in a list -> shuffle -> map -> batch(256), as users write it.

    Each timed pass builds its dataset and iterator, as a training script does at the
    start of an epoch. The plain loop beside it is what a user writes without a loader:
    the epoch's order from NumPy as a list (the fastest permutation in Python; the
    issue's `random.shuffle` of a list takes 15x longer), then per batch a list
    comprehension over the list and `np.array`. `track_range_ratio_to_plain_loop` keeps
    the earlier figure (a `RangeSource`, no list lookups) for comparison with older runs.
    """

    def setup(self) -> None:
        self.data = list(range(LIST_N))
        mapped = chute.MapDataset.range(N).shuffle(seed=0).map(_add_one)
        self.ds = mapped.batch(BATCH)
        self.stream = mapped.to_iter_dataset().batch(BATCH)  # Batched after the stream.
        self.permutation = np.random.default_rng(0).permutation(N)

    def _ours(self) -> None:
        ds = chute.MapDataset.source(self.data).seed(0).shuffle().map(_add_one).batch(BATCH)
        for _ in ds:
            pass

    def _plain(self) -> None:
        data = self.data
        order = np.random.default_rng(0).permutation(LIST_N).tolist()  # This epoch's order.
        for start in range(0, LIST_N, BATCH):
            np.array([data[i] + 1 for i in order[start : start + BATCH]])

    def time_iterate(self) -> None:
        self._ours()

    def track_us_per_element(self) -> float:
        return median_seconds(self._ours, repeats=3) / LIST_N * 1e6

    track_us_per_element.unit = "us"  # type: ignore[attr-defined]

    def track_ratio_to_plain_loop(self) -> float:
        return median_ratio(self._ours, self._plain, repeats=3)

    track_ratio_to_plain_loop.unit = "ratio"  # type: ignore[attr-defined]

    def _range(self) -> None:
        for _ in self.ds:
            pass

    def _range_plain(self) -> None:
        order = self.permutation
        for start in range(0, N, BATCH):
            np.asarray([_add_one(int(x)) for x in order[start : start + BATCH]])

    def track_range_ratio_to_plain_loop(self) -> float:
        """The earlier figure: `MapDataset.range(200_000)` against NumPy indices."""
        return median_ratio(self._range, self._range_plain, repeats=3)

    track_range_ratio_to_plain_loop.unit = "ratio"  # type: ignore[attr-defined]

    def _stream(self) -> None:
        for _ in self.stream:
            pass

    def track_stream_ratio_to_plain_loop(self) -> float:
        """`range(200_000)` written `...map(f).to_iter_dataset().batch(256)`."""
        return median_ratio(self._stream, self._range_plain, repeats=3)

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
