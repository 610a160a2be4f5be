"""asv benchmarks of the runtime autotuner (`mp_prefetch()`'s default since 2026-11-29).

Issue 32's target, on the image pipeline of `bench_execution_workers` read for several
epochs through one iterator (batch(128), the workers stacking the batches): starting
from no workers, within 10 s the autotuner reaches >= 0.9x of the rate of the best
fixed configuration (the best of 0, 1 and 2 workers, measured in the same call), and
over those 10 s it does no worse than a fixed 0 workers (>= 1.0x), the default before
the autotuner became it (`track_ratio_autotuned_to_default` keeps its name).

A loop over epochs makes a new iterator each epoch, which starts where the last one's
tuning settled, on the workers it left parked: `track_ratio_next_iterator_to_best_fixed`
reads the same dataset again for `NEXT_SECONDS` right after the autotuned run, and
divides its whole rate (its start included) by the best fixed configuration's.

Each call measures every configuration afresh (parked workers of an earlier run are
stopped first, so no run inherits another's): 4 s each for the fixed ones, 10 s for
the autotuned one. The autotuned and the best rate are those of each run's last 3 s
(the workers' start left out of both); the default's is its whole run's (it starts no
workers).
"""

from __future__ import annotations

import shutil
import tempfile
import time
import timeit
from collections.abc import Callable, Iterator
from typing import Any

import chute
from chute_sources import ArrayRecordSource

from .bench_execution_workers import IMAGES, crop_flip, image_of, normalise, write_images

FIXED_SECONDS = 4.0
TUNED_SECONDS = 10.0
LATE_SECONDS = 3.0  # The rates compared with the best: the last 3 s of each run.
NEXT_SECONDS = 4.0  # The next iterator's run (LATE_SECONDS of it are timed separately).
EPOCHS = 200  # More than any run reads.


def long_image_pipeline(paths: list[str]) -> chute.IterDataset:
    """The image pipeline, over `EPOCHS` shuffled epochs (one iterator reads them all)."""
    return (
        chute.MapDataset.source(ArrayRecordSource(paths))
        .shuffle(seed=0)
        .repeat(EPOCHS)
        .to_iter_dataset()
        .map(image_of)
        .random_map(crop_flip, seed=1)
        .map(normalise)
    )


def timed_rates(
    iterator: Iterator[Any], seconds: float, consume: Callable[[Any], int]
) -> tuple[float, float]:
    """Items per second over `seconds` of `iterator`, and over the last `LATE_SECONDS`.

    `consume(element)` does the work of one step and returns how many items it was;
    the iterator is closed after.
    """
    start = time.perf_counter()
    late_start, late_count, count, now = None, 0, 0, start
    for element in iterator:
        count += consume(element)
        now = time.perf_counter()
        if late_start is None and now - start >= seconds - LATE_SECONDS:
            late_start, late_count = now, count
        if now - start >= seconds:
            break
    close = getattr(iterator, "close", None)
    if close is not None:
        close()
    assert late_start is not None and now > late_start, "the run ended early"
    return count / (now - start), (count - late_count) / (now - late_start)


class RuntimeAutotune:
    """The autotuned image pipeline against fixed configurations, in one call."""

    timer = timeit.default_timer
    number = 1
    repeat = 1
    timeout = 300

    def setup(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="chute-bench-autotune-")
        self.paths = write_images(self.folder, IMAGES)
        self.pipeline = long_image_pipeline(self.paths)

    def teardown(self) -> None:
        chute.stop_idle_workers()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _dataset(self, workers: int, autotune: Any) -> chute.IterDataset:
        """The dataset measured with `workers` (tuned from there with `autotune`)."""
        options = chute.MultiprocessingOptions(workers, autotune=autotune)
        return self.pipeline.mp_prefetch(options, chunk_size=128).batch(128)

    def _rates(self, dataset: chute.IterDataset, seconds: float) -> tuple[float, float]:
        """Items per second of a new iterator of `dataset` over its whole run and its last
        `LATE_SECONDS` (images here)."""
        return timed_rates(iter(dataset), seconds, len)

    def _measure(self) -> tuple[float, float, float]:
        """The autotuned late rate, its whole one, and the next iterator's whole one over
        the best fixed rate, the default's and the best fixed rate."""
        fixed = {}
        for workers in (0, 1, 2):
            chute.stop_idle_workers()
            fixed[workers] = self._rates(self._dataset(workers, False), FIXED_SECONDS)
        chute.stop_idle_workers()
        tuned = self._dataset(0, chute.AutotuneOptions(max_workers=2))
        whole, late = self._rates(tuned, TUNED_SECONDS)
        following, _ = self._rates(tuned, NEXT_SECONDS)  # The last one's workers parked.
        best = max(rate for _, rate in fixed.values())
        return late / best, whole / fixed[0][0], following / best

    def track_ratio_autotuned_to_best_fixed(self) -> float:
        """The autotuned rate in its last 3 of 10 s over the best fixed configuration's."""
        return self._measure()[0]

    track_ratio_autotuned_to_best_fixed.unit = "ratio"  # type: ignore[attr-defined]

    def track_ratio_autotuned_to_default(self) -> float:
        """The autotuned rate over its first 10 s over that of a fixed 0 workers."""
        return self._measure()[1]

    track_ratio_autotuned_to_default.unit = "ratio"  # type: ignore[attr-defined]

    def track_ratio_next_iterator_to_best_fixed(self) -> float:
        """A next iterator's rate over its 4 s, its start included, over the best fixed one's."""
        return self._measure()[2]

    track_ratio_next_iterator_to_best_fixed.unit = "ratio"  # type: ignore[attr-defined]
