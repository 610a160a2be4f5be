"""asv benchmarks of checkpointing an iterator with worker processes, beside plain JSON.

`save` takes the state, describes the pipeline (its fingerprint), writes the document
atomically (temporary file, fsync, rename, fsync of the folder); `restore` reads,
validates, checks the fingerprint and moves the iterator (restarting its workers at
the saved chunk). The baselines write / read the same bytes with plain `json.dump` /
`json.load`, in the same run; the ratios are baseline time over ours (above 1: ours
is faster; expect well below 1: fsync and the worker restart are the price of safety).
"""

from __future__ import annotations

import json
import operator
import os
import shutil
import tempfile
import timeit

import chute
import chute_checkpoint

from ._timing import median_ratio

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
