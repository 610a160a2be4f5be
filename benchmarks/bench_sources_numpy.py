"""asv benchmarks of `NumpySource`: random batched reads from a memory-mapped `.npy` file."""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time

import numpy as np

from chute_sources import NumpySource


class NumpySourceRandomReads:
    """Batches of 1000 random 4 KiB records from a 64 MiB `(N, 64, 64)` uint8 `.npy` file.

    The file was just written, so it sits in the page cache: this measures the per-batch
    cost of the source on top of NumPy's own fancy indexing, not the disk.
    """

    records = 16_384  # 16_384 * 64 * 64 bytes = 64 MiB
    batch_size = 1_000
    repeats = 7

    def setup(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="chute-bench-numpy-")
        self.path = os.path.join(self.folder, "images.npy")
        rows = np.arange(self.records, dtype=np.uint32).astype(np.uint8)
        np.save(self.path, np.broadcast_to(rows[:, None, None], (self.records, 64, 64)))
        self.keys = np.random.default_rng(0).integers(0, self.records, self.batch_size)
        self.source = NumpySource(self.path)

    def teardown(self) -> None:
        self.source.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def time_random_read_batch(self) -> None:
        self.source.__getitems__(self.keys)

    def track_ratio_to_plain_fancy_index(self) -> float:
        """Records/s of `NumpySource` over records/s of `np.load(mmap_mode="r")[keys]`.

        Both read the same keys in the same call; the median over a few alternating
        repeats. 1.0 means the source adds nothing to NumPy's own read.
        """
        plain = np.load(self.path, mmap_mode="r")
        plain[self.keys]  # warm both paths up
        self.source.__getitems__(self.keys)
        ratios = []
        for repeat in range(self.repeats):
            timings = {}
            order = ("source", "plain") if repeat % 2 == 0 else ("plain", "source")
            for name in order:
                start = time.perf_counter()
                if name == "source":
                    self.source.__getitems__(self.keys)
                else:
                    plain[self.keys]
                timings[name] = time.perf_counter() - start
            # (batch / t_source) / (batch / t_plain)
            ratios.append(timings["plain"] / timings["source"])
        del plain
        return statistics.median(ratios)

    track_ratio_to_plain_fancy_index.unit = "ratio"  # type: ignore[attr-defined]


if __name__ == "__main__":
    bench = NumpySourceRandomReads()
    bench.setup()
    try:
        start = time.perf_counter()
        bench.time_random_read_batch()
        print(f"time_random_read_batch: {(time.perf_counter() - start) * 1e3:.2f} ms")
        print(f"track_ratio_to_plain_fancy_index: {bench.track_ratio_to_plain_fancy_index():.3f}")
    finally:
        bench.teardown()
