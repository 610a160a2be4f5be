"""asv benchmarks of checkpointing an iterator with worker processes, beside plain JSON.

`save` takes the state, describes the pipeline (its fingerprint), writes the document
atomically (temporary file, fsync, rename, fsync of the folder); `restore` reads,
validates, checks the fingerprint and moves the iterator (restarting its workers at
the saved chunk). The baselines write / read the same bytes with plain `json.dump` /
`json.load`, in the same run; the ratios are baseline time over ours (above 1: ours
is faster; expect well below 1: fsync and the worker restart are the price of safety).

`RestoreFirstBatch` is the restore target of the performance issue: on the image
pipeline, a restored iterator's first batch should take no more than 3 ms longer than a
fresh iterator's first batch (`track_*_minus_fresh_ms`, measured in pairs in one run).
"""

from __future__ import annotations

import json
import operator
import os
import shutil
import statistics
import tempfile
import time
import timeit
from collections.abc import Callable
from typing import Any

import chute
import chute_checkpoint

from ._timing import median_ratio
from .bench_execution_workers import IMAGES, image_pipeline, write_images

SIZE = 100_000


class SaveRestoreWithWorkers:
    """shuffle -> map -> mp_prefetch(2 workers) -> batch(32), 50 batches in."""

    timer = timeit.default_timer
    number = 1
    repeat = 10

    def setup(self) -> None:
        ds = chute.MapDataset.range(SIZE).seed(0).shuffle().to_iter_dataset().map(operator.neg)
        options = chute.MultiprocessingOptions(num_workers=2)
        self.ds = ds.mp_prefetch(options, chunk_size=256).batch(32)
        self.it = iter(self.ds)
        for _ in range(50):
            next(self.it)
        self.folder = tempfile.mkdtemp(prefix="chute-bench-ckpt-")
        self.path = chute_checkpoint.save(self.it, self.folder)
        self.document = chute_checkpoint.read_document(self.path)
        self.plain = os.path.join(self.folder, "plain.json")

    def teardown(self) -> None:
        del self.it
        shutil.rmtree(self.folder, ignore_errors=True)

    def time_save(self) -> None:
        chute_checkpoint.save(self.it, self.folder)

    def time_restore(self) -> None:
        chute_checkpoint.restore(self.it, self.folder)

    def time_restore_then_next_batch(self) -> None:
        """Restore, then the first batch after it (workers resume at the saved chunk)."""
        chute_checkpoint.restore(self.it, self.folder)
        next(self.it)

    def _json_dump(self) -> None:
        with open(self.plain, "w") as file:
            json.dump(self.document, file, indent=2)

    def _json_load(self) -> None:
        with open(self.plain) as file:
            json.load(file)

    def track_ratio_save_to_json_dump(self) -> float:
        return median_ratio(self.time_save, self._json_dump, repeats=9)

    track_ratio_save_to_json_dump.unit = "ratio"  # type: ignore[attr-defined]

    def track_ratio_restore_to_json_load(self) -> float:
        self._json_dump()
        return median_ratio(self.time_restore, self._json_load, repeats=9)

    track_ratio_restore_to_json_load.unit = "ratio"  # type: ignore[attr-defined]

    def track_state_bytes(self) -> float:
        return float(os.path.getsize(self.path))

    track_state_bytes.unit = "bytes"  # type: ignore[attr-defined]


class RestoreFirstBatch:
    """Image pipeline -> batch(128): restore + first batch, minus a fresh first batch.

    The state is taken after 5 batches (mid-epoch) and goes through JSON; the restored
    iterator is new, as after a preemption. Pairs (fresh, restored) run alternately in
    one process; each figure is the median of 5 pair differences, in milliseconds.
    """

    params = (0, 2)
    param_names = ("workers",)
    timeout = 300

    def setup(self, workers: int) -> None:
        self.folder = tempfile.mkdtemp(prefix="chute-bench-restore-")
        pipeline = image_pipeline(write_images(self.folder, IMAGES))
        if workers:
            pipeline = pipeline.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers))
        self.ds = pipeline.batch(128)
        it = iter(self.ds)
        for _ in range(5):
            next(it)
        self.state = json.loads(json.dumps(it.get_state()))
        self.checkpoint = os.path.join(self.folder, "checkpoint")
        chute_checkpoint.save(it, self.checkpoint)
        it.close()

    def teardown(self, workers: int) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _first_batch(self, restore: Callable[[Any], object] | None) -> float:
        """Seconds from a new iterator (restored by `restore`, if given) to its first batch."""
        start = time.perf_counter()
        it = iter(self.ds)
        if restore is not None:
            restore(it)
        next(it)
        elapsed = time.perf_counter() - start
        it.close()
        return elapsed

    def _minus_fresh_ms(self, restore: Callable[[Any], object]) -> float:
        self._first_batch(None)
        self._first_batch(restore)
        differences = []
        for repeat in range(5):
            if repeat % 2 == 0:
                fresh = self._first_batch(None)
                restored = self._first_batch(restore)
            else:
                restored = self._first_batch(restore)
                fresh = self._first_batch(None)
            differences.append(restored - fresh)
        return statistics.median(differences) * 1e3

    def track_restore_minus_fresh_ms(self, workers: int) -> float:
        """`it.set_state(state)` then `next(it)`, minus `next(it)` of a fresh iterator."""
        return self._minus_fresh_ms(lambda it: it.set_state(self.state))

    track_restore_minus_fresh_ms.unit = "ms"  # type: ignore[attr-defined]

    def track_checkpoint_restore_minus_fresh_ms(self, workers: int) -> float:
        """`chute_checkpoint.restore(it, folder)` then `next(it)`, minus a fresh first batch."""
        return self._minus_fresh_ms(lambda it: chute_checkpoint.restore(it, self.checkpoint))

    track_checkpoint_restore_minus_fresh_ms.unit = "ms"  # type: ignore[attr-defined]
