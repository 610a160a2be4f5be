"""asv benchmarks of per-batch latency and of memory over a long iteration.

`BatchLatency`: 64-element batches of a cheap map, read through 0 or 2 worker
processes; `track_p50_seconds` / `track_p99_seconds` are the median and 99th
percentile of the time one `next()` takes in the steady state (after 20 warm-up
batches), with `track_p99_over_p50` as the noise-proof figure (a tail that grows shows
stalls: a worker falling behind, a reorder window too small, a GC pause).

`LongIteration`: `peakmem_*` is the consumer process's peak RSS while 300k elements
(batches of 256 rows of 1 KiB) stream through 2 workers; it should not grow with the
length of the run (buffers are bounded).
"""

from __future__ import annotations

import statistics
import time
import timeit

import numpy as np

import chute

BATCHES = 300


def add_one(x: int) -> int:
    return x + 1


def row_of(i: int) -> np.ndarray:
    return np.full(256, i, np.float32)  # 1 KiB.


class BatchLatency:
    """p50 / p99 of one batch's `next()`, with 0 and 2 workers."""

    params = (0, 2)
    param_names = ("workers",)
    timer = timeit.default_timer
    number = 1
    repeat = 3

    def setup(self, workers: int) -> None:
        ds = chute.MapDataset.range(64 * (BATCHES + 20)).map(add_one).batch(64)
        self.ds = ds.to_iter_dataset()
        if workers:
            self.ds = self.ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers))
        self._latencies: list[float] | None = None

    def _measure(self) -> list[float]:
        if self._latencies is None:
            it = iter(self.ds)
            for _ in range(20):
                next(it)
            latencies = []
            for _ in range(BATCHES):
                start = time.perf_counter()
                next(it)
                latencies.append(time.perf_counter() - start)
            self._latencies = sorted(latencies)
        return self._latencies

    def time_batches(self, workers: int) -> None:
        self._latencies = None
        self._measure()

    def track_p50_seconds(self, workers: int) -> float:
        return statistics.median(self._measure())

    def track_p99_seconds(self, workers: int) -> float:
        latencies = self._measure()
        return latencies[int(0.99 * (len(latencies) - 1))]

    def track_p99_over_p50(self, workers: int) -> float:
        return self.track_p99_seconds(workers) / max(self.track_p50_seconds(workers), 1e-9)

    track_p50_seconds.unit = "seconds"  # type: ignore[attr-defined]
    track_p99_seconds.unit = "seconds"  # type: ignore[attr-defined]
    track_p99_over_p50.unit = "ratio"  # type: ignore[attr-defined]


class LongIteration:
    """Peak memory of the consumer over a long run through 2 workers."""

    timeout = 300

    def peakmem_stream_through_two_workers(self) -> None:
        ds = (
            chute.MapDataset.range(300_000)
            .map(row_of)
            .to_iter_dataset()
            .mp_prefetch(chute.MultiprocessingOptions(num_workers=2))
            .batch(256)
        )
        for _ in ds:
            pass
