"""asv benchmarks of worker processes (`mp_prefetch`), each beside a baseline of the same run.

Targets (issue 21), as ratios measured in one run:

- large arrays (2 MiB, batch(8)) through 2 workers: >= 0.5 of one-thread memcpy
  bandwidth with the workers' start included (`LargeArrays.track_ratio_to_memcpy`),
  >= 0.7 in the steady state (`track_steady_ratio_to_memcpy`);
- the image pipeline with 2 workers: >= 1.6x the plain loop on one core
  (`ImagePipeline.track_ratio_two_workers_to_plain_loop`, start included;
  `track_steady_ratio_two_workers_to_plain_loop`, after the first batch);
- time to first batch with 2 workers: < 150 ms from `iter()` for the first loader of a
  fresh process (cold), < 60 ms for a second iterator in the same process (warm,
  on the workers the first one parked).

Worker functions live at module level so that workers started by the fork server can
import them."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable

import numpy as np

import chute
from chute_core.internal import map_in_fork
from chute_sources import ArrayRecordSource

from ._timing import median_ratio, median_seconds

SMALL = 400_000
ARRAY_BYTES = 2 * 2**20
ARRAYS = 384
LONG_ARRAYS = 1536  # 3 GiB: the steady state, after WARM_BATCHES batches.
WARM_BATCHES = 16
IMAGES = 4096


def add_one(x: int) -> int:
    return x + 1


def make_array(i: int) -> np.ndarray:
    return np.full(ARRAY_BYTES // 4, i, dtype=np.float32)


def crop_flip(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    y, x = rng.integers(0, 9, size=2)
    out = image[y : y + 56, x : x + 56]
    return out[:, ::-1] if rng.random() < 0.5 else out


def normalise(image: np.ndarray) -> np.ndarray:
    return (image.astype(np.float32) - 127.5) / 127.5


def image_of(record: dict) -> np.ndarray:
    return record["image"]


_WRITE_IMAGES = """
import json, os, sys
import numpy as np
from chute_sources import write_array_record
folder, count = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
images = rng.integers(0, 256, (count, 64, 64, 3), dtype=np.uint8)
records = [{"image": images[i], "label": i % 10} for i in range(count)]
print(json.dumps(write_array_record(records, os.path.join(folder, "img"), num_shards=2)))
"""


def write_images(folder: str, count: int) -> list[str]:
    """`count` random 64x64 RGB images with labels, in two ArrayRecord files.

    Written by another process, as a data set usually is: ArrayRecord's writer leaves
    a native thread running, and a process with threads cannot fork its workers (they
    then start from the fork server instead).
    """
    done = subprocess.run(
        [sys.executable, "-c", _WRITE_IMAGES, folder, str(count)],
        capture_output=True,
        text=True,
        check=True,
    )
    paths: list[str] = json.loads(done.stdout)
    return paths


def seconds_in_fork(
    function: Callable[[], object], prepare: Callable[[], object] | None = None
) -> float:
    """Seconds `function()` takes in a child forked from this process (here if unsafe).

    `prepare()`, if given, runs first in the same process, untimed.

    For a baseline that would start native threads here (reading ArrayRecord files
    starts its reader pool for good), which would keep the workers of the pipeline
    measured against it from being forked.
    """

    def timed(_: int) -> int:
        if prepare is not None:
            prepare()
        start = time.perf_counter_ns()
        function()
        return time.perf_counter_ns() - start

    forked = map_in_fork(timed, [0], stall_seconds=600.0)
    return (forked[0] if forked is not None else timed(0)) / 1e9


def image_pipeline(paths: list[str]) -> chute.IterDataset:
    """The image pipeline: shuffle -> decode -> crop/flip -> normalise (not batched)."""
    return (
        chute.MapDataset.source(ArrayRecordSource(paths))
        .shuffle(seed=0)
        .to_iter_dataset()
        .map(image_of)
        .random_map(crop_flip, seed=1)
        .map(normalise)
    )


class SmallElements:
    """400k integers -> map through 2 workers (elements/s, worker start included; ratio to
    a plain one-process loop doing the same calls)."""

    timer = timeit.default_timer
    number = 1
    repeat = 3

    def setup(self) -> None:
        base = chute.MapDataset.range(SMALL).to_iter_dataset().map(add_one)
        self.ds = base.mp_prefetch(chute.MultiprocessingOptions(num_workers=2), chunk_size=1024)

    def time_iterate(self) -> None:
        for _ in self.ds:
            pass

    def track_elements_per_second(self) -> float:
        return SMALL / median_seconds(self.time_iterate, repeats=3)

    track_elements_per_second.unit = "elements/s"  # type: ignore[attr-defined]

    def _plain_loop(self) -> None:
        for x in range(SMALL):
            add_one(x)

    def track_ratio_to_plain_loop(self) -> float:
        """Elements/s through 2 workers (start included) / a one-process loop calling add_one."""
        return median_ratio(self.time_iterate, self._plain_loop, repeats=3)

    track_ratio_to_plain_loop.unit = "ratio"  # type: ignore[attr-defined]


class LargeArrays:
    """384 arrays of 2 MiB made in 2 workers -> batch(8) (MB/s and ratio to memcpy).

    `time_iterate` and `track_ratio_to_memcpy` include starting the iterator: its
    workers are those the last one parked (`idle_worker_seconds`), as in a loop over
    epochs; `track_ratio_to_memcpy_fresh_workers` starts new worker processes each
    time (and faults in their heaps); `track_steady_ratio_to_memcpy` is the steady
    state of a longer stream. The baseline copies the same 768 MiB once in this process.
    """

    timer = timeit.default_timer
    number = 1
    repeat = 3

    def setup(self) -> None:
        self.ds = self._arrays(ARRAYS)
        self.fresh = self._arrays(ARRAYS, idle_worker_seconds=0)
        self.long = self._arrays(LONG_ARRAYS)
        self.src = np.ones(ARRAYS * ARRAY_BYTES // 4, np.float32)
        self.dst = np.empty_like(self.src)

    def time_iterate(self) -> None:
        self._iterate(self.ds)

    @staticmethod
    def _iterate(ds: chute.IterDataset[np.ndarray]) -> None:
        for _ in ds:
            pass

    def _memcpy(self) -> None:
        np.copyto(self.dst, self.src)

    def track_megabytes_per_second(self) -> float:
        return ARRAYS * ARRAY_BYTES / 1e6 / median_seconds(self.time_iterate, repeats=3)

    track_megabytes_per_second.unit = "MB/s"  # type: ignore[attr-defined]

    def track_ratio_to_memcpy(self) -> float:
        return self._ratio_to_memcpy(self.ds)

    track_ratio_to_memcpy.unit = "ratio"  # type: ignore[attr-defined]

    def track_ratio_to_memcpy_fresh_workers(self) -> float:
        """`track_ratio_to_memcpy` with new worker processes for each iterator."""
        return self._ratio_to_memcpy(self.fresh)

    def _ratio_to_memcpy(self, ds: chute.IterDataset[np.ndarray]) -> float:
        ours = median_seconds(lambda: self._iterate(ds), repeats=3)
        return median_seconds(self._memcpy, repeats=5) / ours

    track_ratio_to_memcpy_fresh_workers.unit = "ratio"  # type: ignore[attr-defined]

    @staticmethod
    def _arrays(count: int, idle_worker_seconds: float = 30.0) -> chute.IterDataset[np.ndarray]:
        base = chute.MapDataset.range(count).to_iter_dataset().map(make_array)
        options = chute.MultiprocessingOptions(
            num_workers=2, idle_worker_seconds=idle_worker_seconds
        )
        return base.mp_prefetch(options, chunk_size=8).batch(8)

    def _steady_seconds_per_batch(self) -> float:
        """Seconds per batch of a long stream after its first 16 batches.

        By then the workers run and each has its pool of slabs (3 per worker, faulted
        in once: fresh shared memory costs ~0.85 ms per MiB on the development VM,
        so the 48 batches of `time_iterate` mostly measure that start).
        """
        it = iter(self.long)
        for _ in range(WARM_BATCHES):
            next(it)
        start, count = time.perf_counter(), 0
        for _ in it:
            count += 1
        return (time.perf_counter() - start) / count

    def track_steady_ratio_to_memcpy(self) -> float:
        """Bandwidth in the steady state (`_steady_seconds_per_batch`, median of 3) / memcpy."""
        per_batch = statistics.median(self._steady_seconds_per_batch() for _ in range(3))
        return median_seconds(self._memcpy, repeats=5) / (ARRAYS // 8) / per_batch

    track_steady_ratio_to_memcpy.unit = "ratio"  # type: ignore[attr-defined]


_COLD = """
import sys, time
start = time.perf_counter()
import operator, chute


def first_batch(ds):
    before = time.perf_counter()
    it = iter(ds)
    next(it)
    return time.perf_counter() - before


def main():
    options = chute.MultiprocessingOptions(num_workers=2, start_method=sys.argv[1])
    ds = chute.MapDataset.range(1024).to_iter_dataset().map(operator.neg)
    ds = ds.mp_prefetch(options).batch(32)
    cold = first_batch(ds)
    total = time.perf_counter() - start
    warm = first_batch(ds)  # The first iterator is garbage: this one takes its workers over.
    print(cold, total, warm)


if __name__ == "__main__":
    main()
"""


def cold_first_batch(start_method: str = "auto") -> tuple[float, float, float, float]:
    """A fresh process runs a script that imports chute and gets a first batch, twice.

    A script, like a training job, that has not imported jax: with "auto" its workers
    fork from it; with "forkserver" they fork from a fork server that starts at
    `mp_prefetch` (the path of a consumer that imported jax or runs threads).

    Returns:
        Seconds from `iter()` to the first batch (2 workers, first loader of the
        process), from the start of the script to it, of the whole process
        (interpreter start and exit included), and from `iter()` to the first batch
        of a second iterator of the same dataset (warm: it takes over the workers
        the first one parked).
    """
    with tempfile.TemporaryDirectory(prefix="chute-bench-cold-") as folder:
        script = os.path.join(folder, "first_batch.py")
        with open(script, "w") as f:
            f.write(_COLD)
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, script, start_method], capture_output=True, text=True, check=True
        ).stdout
        whole = time.perf_counter() - start
    first, total, warm = map(float, out.split())
    return first, total, whole, warm


class TimeToFirstBatch:
    """Seconds from `iter()` to the first batch with 2 workers.

    Cold: the first loader of a fresh process starts its workers; warm: a second
    iterator takes over the workers the first one parked.
    """

    timer = timeit.default_timer
    number = 1
    repeat = 5

    def setup(self) -> None:
        base = chute.MapDataset.range(1024).to_iter_dataset().map(add_one)
        self.ds = base.mp_prefetch(chute.MultiprocessingOptions(num_workers=2)).batch(32)

    def time_first_batch(self) -> None:
        it = iter(self.ds)
        next(it)
        del it  # Parks the workers: the next run takes them over (`idle_worker_seconds`).

    def track_cold_first_batch_seconds(self) -> float:
        """From `iter()` to the first batch, first loader of a fresh process (target < 0.15)."""
        return statistics.median(cold_first_batch()[0] for _ in range(5))

    track_cold_first_batch_seconds.unit = "seconds"  # type: ignore[attr-defined]

    def track_warm_first_batch_seconds(self) -> float:
        """From `iter()` to the first batch of a second iterator in that process (< 0.06)."""
        return statistics.median(cold_first_batch()[3] for _ in range(5))

    track_warm_first_batch_seconds.unit = "seconds"  # type: ignore[attr-defined]

    def track_cold_first_batch_forkserver_seconds(self) -> float:
        """The cold start where the consumer may not fork (jax imported, threads running)."""
        return statistics.median(cold_first_batch("forkserver")[0] for _ in range(5))

    track_cold_first_batch_forkserver_seconds.unit = "seconds"  # type: ignore[attr-defined]

    def track_cold_process_seconds(self) -> float:
        """A whole fresh process: start, import chute, two first batches, exit."""
        return statistics.median(cold_first_batch()[2] for _ in range(5))

    track_cold_process_seconds.unit = "seconds"  # type: ignore[attr-defined]


class ImagePipeline:
    """ArrayRecord 64x64 images: shuffle -> decode -> crop/flip -> normalise -> batch(128)."""

    timer = timeit.default_timer
    number = 1
    repeat = 3

    def setup(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="chute-bench-img-")
        self.paths = write_images(self.folder, IMAGES)
        self.pipeline = image_pipeline(self.paths)

    def teardown(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _plain(self) -> None:
        """The same work in a plain loop, in one process (`_plain_seconds` times it)."""
        source, order = self.source, np.random.default_rng(0).permutation(IMAGES)
        batch = []
        for key in order.tolist():
            image = source[key]["image"]
            rng = np.random.default_rng(key)
            batch.append(normalise(crop_flip(image, rng)))
            if len(batch) == 128:
                np.stack(batch)
                batch = []

    def _plain_seconds(self) -> float:
        """`_plain` timed in a forked child, after a first pass there (warm, like ours)."""
        self.source = ArrayRecordSource(self.paths)  # Counted in a child: no threads here.
        return seconds_in_fork(self._plain, prepare=self._plain)  # A first pass, untimed.

    _options = chute.MultiprocessingOptions(num_workers=2)
    _fresh_options = chute.MultiprocessingOptions(num_workers=2, idle_worker_seconds=0)

    def _workers(self, options: chute.MultiprocessingOptions = _options) -> None:
        for _ in self.pipeline.mp_prefetch(options, chunk_size=128).batch(128):
            pass

    def _fresh_workers(self) -> None:
        self._workers(self._fresh_options)

    def time_two_workers(self) -> None:
        self._workers()

    def track_ratio_two_workers_to_plain_loop(self) -> float:
        """The plain loop's time (1 core) over the pipeline's with 2 workers (start included).

        Both warm, alternately, medians of 3: ours in this process after a first run
        (each iterator takes over the workers the last one parked, as in a loop over
        epochs); the plain loop in a child forked from it (`_plain_seconds`) after a
        first pass there (reading ArrayRecord files starts native threads, which must
        not run here, where the pipeline forks its workers).
        """
        return self._ratio_to_plain_loop(self._workers)

    track_ratio_two_workers_to_plain_loop.unit = "ratio"  # type: ignore[attr-defined]

    def track_ratio_two_fresh_workers_to_plain_loop(self) -> float:
        """`track_ratio_two_workers_to_plain_loop` with new worker processes each time."""
        return self._ratio_to_plain_loop(self._fresh_workers)

    track_ratio_two_fresh_workers_to_plain_loop.unit = "ratio"  # type: ignore[attr-defined]

    def _ratio_to_plain_loop(self, ours_run: Callable[[], None]) -> float:
        ours_run()
        ratios = []
        for repeat in range(3):
            if repeat % 2 == 0:
                plain, ours = self._plain_seconds(), median_seconds(ours_run, repeats=1)
            else:
                ours, plain = median_seconds(ours_run, repeats=1), self._plain_seconds()
            ratios.append(plain / ours)
        return statistics.median(ratios)

    def _workers_after_first_batch(self) -> float:
        """Seconds from the first batch to the end (the workers run, their start is past)."""
        it = iter(self.pipeline.mp_prefetch(self._options, chunk_size=128).batch(128))
        next(it)
        start = time.perf_counter()
        for _ in it:
            pass
        return time.perf_counter() - start

    def track_steady_ratio_two_workers_to_plain_loop(self) -> float:
        """Throughput after the first batch, over the plain loop's (as `benchmarks.compare`).

        The plain loop has no start: its time for the 31 batches after the first is
        31/32 of its whole time.
        """
        self._workers_after_first_batch()
        ratios = []
        for repeat in range(3):
            if repeat % 2 == 0:
                plain, ours = self._plain_seconds(), self._workers_after_first_batch()
            else:
                ours, plain = self._workers_after_first_batch(), self._plain_seconds()
            batches = IMAGES // 128
            ratios.append(plain * (batches - 1) / batches / ours)
        return statistics.median(ratios)

    track_steady_ratio_two_workers_to_plain_loop.unit = "ratio"  # type: ignore[attr-defined]


def _first_batch_seconds() -> float:
    bench = TimeToFirstBatch()
    bench.setup()
    start = time.perf_counter()
    bench.time_first_batch()
    return time.perf_counter() - start
