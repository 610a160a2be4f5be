"""asv benchmarks of resuming on another number of processes, from uneven stop points.

`ResumeAnywhere`: 4 processes of the image pipeline, sharded by stride, stop after 1, 4,
2 and 3 batches (as preempted hosts do) and continue on 3. A restored process skips
what the others consumed (its frontier) instead of re-reading it; its first batch
should cost no more than 3 ms over a fresh first batch, as a same-count restore does
(`track_resharded_restore_minus_fresh_ms`). `StateSize`: the bytes of the largest state
after ten reshards of a 10^9-record pipeline whose processes never stop together (also
with a window shuffle or packing after the shard).
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import tempfile
import time
from typing import Any

import numpy as np

import chute
import chute_checkpoint
from chute_sources import ArrayRecordSource

from .bench_execution_workers import IMAGES, image_of, normalise, write_images

STOPS = (1, 4, 2, 3)  # Batches of 32 each of the 4 processes took before the stop.


def sharded_images(paths: list[str], index: int, count: int, workers: int) -> Any:
    """The image pipeline, sharded after the shuffle, in batches of 32."""
    ds = chute.MapDataset.source(ArrayRecordSource(paths)).shuffle(seed=0).shard(index, count)
    it = ds.to_iter_dataset().map(image_of).map(normalise)
    if workers:
        it = it.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers))
    return it.batch(32)


class ResumeAnywhere:
    """Image pipeline, 4 processes stopped unevenly -> 3: restore + first batch, reshard."""

    params = (0, 2)
    param_names = ("workers",)
    timeout = 300

    def setup(self, workers: int) -> None:
        self.folder = tempfile.mkdtemp(prefix="chute-bench-reshard-")
        self.paths = write_images(self.folder, IMAGES)
        self.workers = workers
        documents = []
        for index, stop in enumerate(STOPS):
            it = iter(sharded_images(self.paths, index, len(STOPS), workers))
            for _ in range(stop):
                next(it)
            documents.append(json.loads(json.dumps(chute_checkpoint.make_document(it, index, 4))))
            it.close()
        self.documents = documents
        self.document = chute_checkpoint.reshard(documents, 3)[0]
        assert "frontier" in json.dumps(self.document["state"])  # It does skip.

    def teardown(self, workers: int) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _first_batch(self, restored: bool) -> float:
        start = time.perf_counter()
        it = iter(sharded_images(self.paths, 0, 3, self.workers))
        if restored:
            chute_checkpoint.apply_document(it, self.document)
        next(it)
        elapsed = time.perf_counter() - start
        it.close()
        return elapsed

    def track_resharded_restore_minus_fresh_ms(self, workers: int) -> float:
        """A resharded state applied, then `next(it)`, minus a fresh first batch (median of 5)."""
        self._first_batch(False)
        self._first_batch(True)
        differences = []
        for repeat in range(5):
            order = (False, True) if repeat % 2 == 0 else (True, False)
            times = {restored: self._first_batch(restored) for restored in order}
            differences.append(times[True] - times[False])
        return statistics.median(differences) * 1e3

    track_resharded_restore_minus_fresh_ms.unit = "ms"  # type: ignore[attr-defined]

    def time_reshard_four_to_three(self, workers: int) -> None:
        chute_checkpoint.reshard(self.documents, 3)


def _billion(index: int, count: int, holding: str | None = None) -> Any:
    ds = chute.MapDataset.range(10**9).shard(index, count).to_iter_dataset()
    if holding == "window":  # A window of 1,000 over a filtered stream (gaps: a bitmask).
        return ds.filter(_kept).window_shuffle(1000, seed=5)
    if holding == "pack":  # 16 open rows of 256 tokens, 1 to 40 tokens per record.
        return ds.map(_tokens).pack(256, num_packing_bins=16)
    if holding == "window_pack":  # The window's records shuffled, then packed.
        shuffled = ds.filter(_kept).map(_tokens).window_shuffle(1000, seed=5)
        return shuffled.pack(256, num_packing_bins=16)
    if holding == "files":  # 10^7 files of 100 records, 16 open, a window of 1,000.
        files = chute.MapDataset.range(10**7).shard(index, count).map(_file)
        return chute.IterDataset.interleave(files, cycle_length=16).window_shuffle(1000, seed=5)
    return ds


def _file(number: int) -> Any:
    return chute.MapDataset.range(number * 100, number * 100 + 100).to_iter_dataset()


def _kept(x: int) -> bool:
    return x % 13 != 3  # 13: no shard count of the run (1 to 8) lines up with it.


def _tokens(x: int) -> dict[str, Any]:
    return {"t": np.arange(1 + x % 40, dtype=np.int32)}


def largest_state_after_ten_reshards(seed: int = 7, holding: str | None = None) -> int:
    """Bytes of the largest state of 10 reshards of 10^9 records, processes never together.

    Each process starts near record 10^8, spread over 5,000 positions; after each
    reshard, each new process reads up to 3,000 records of its own before the next.
    With `holding`, a window shuffle or a packer after the shard (its elements held go
    back to be read at a reshard, and the ones it delivered are listed).
    """
    rng = random.Random(seed)
    count = 4
    iterators = [iter(_billion(index, count, holding)) for index in range(count)]
    for it in iterators:
        start = {"position": 10**8 // count + rng.randrange(5000)}
        it.set_state(start if holding is None else _holding_state(holding, start))
    largest = 0
    for new in (4, 7, 2, 8, 5, 1, 3, 6, 8, 3):
        documents = [chute_checkpoint.make_document(it, i, count) for i, it in enumerate(iterators)]
        largest = max(largest, *(len(json.dumps(d["state"])) for d in documents))
        count, iterators = new, [iter(_billion(k, new, holding)) for k in range(new)]
        for k, document in enumerate(chute_checkpoint.reshard(documents, new)):
            chute_checkpoint.apply_document(iterators[k], document)
            for _ in range(rng.randrange(3000)):
                next(iterators[k])
    return max(largest, *(len(json.dumps(it.get_state())) for it in iterators))


def _holding_state(holding: str, reader: dict[str, Any]) -> dict[str, Any]:
    """The state of `_billion(..., holding)` at the reader state `reader`, nothing held."""
    if holding == "window":
        return {"window_start": {"parent": reader, "index": 0}, "window": 0, "offset": 0}
    if holding == "files":  # The same point in files of 100 records, none open.
        files = {"cursor": 0, "next_input": reader["position"] // 100, "slots": [None] * 16}
        return {"window_start": files, "window": 0, "offset": 0}
    if holding == "window_pack":
        mapped = {"parent": {"parent": reader, "index": 0}, "index": 0}
        window = {"window_start": mapped, "window": 0, "offset": 0}
        return {"parent": window, "read": 0, "bins": []}
    return {"parent": {"parent": reader, "index": 0}, "read": 0, "bins": []}


class StateSize:
    """The largest state after ten reshards of 10^9 records (bytes of its JSON).

    Also with a window shuffle of 1,000 over a filtered stream, with 16 open packing
    rows, and with both ("window_pack": the window's records packed), after the shard:
    their states list the positions they delivered past the first element they hold,
    at most a window (or the open rows) per process. And
    ("files") 10^7 files of 100 records read 16 at a time, with a window shuffle of
    1,000: the states of the files open, and what the window yielded, by file.
    """

    timeout = 120
    params = (None, "window", "pack", "window_pack", "files")
    param_names = ("holding",)

    def track_largest_state_bytes_after_ten_reshards(self, holding: str | None) -> float:
        return float(largest_state_after_ten_reshards(holding=holding))

    track_largest_state_bytes_after_ten_reshards.unit = "bytes"  # type: ignore[attr-defined]
