"""The PyTorch DataLoader's side: `python run_torch.py WORKLOAD DATA_DIR [WORKERS]`.

Runs in a separate virtual environment holding torch, numpy and array-record (never
chute's dependencies). Each workload is written as a PyTorch user would: a map-style
`Dataset` whose `__getitem__` does the per-record work, `DataLoader(batch_size=...,
shuffle=True, num_workers=...)` with the default collate. Random augmentation draws
from a generator seeded by (seed, index), like the other loaders.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
import workloads as w


class RangeSet:
    def __len__(self) -> int:
        return w.RANGE_SIZE

    def __getitem__(self, index: int) -> int:
        return w.times_two_plus_one(index)


class ImageSet:
    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.source = None  # Opened in each worker, on first use.

    def __len__(self) -> int:
        return w.IMAGES

    def __getitem__(self, index: int) -> dict:
        if self.source is None:
            from array_record.python.array_record_data_source import ArrayRecordDataSource

            self.source = ArrayRecordDataSource(self.paths)
        element = w.decode(self.source[index])
        element = w.crop_flip(element, np.random.default_rng([0, index]))
        return w.normalise(element)


class ArraySet:
    def __len__(self) -> int:
        return w.ARRAYS

    def __getitem__(self, index: int) -> np.ndarray:
        return w.make_array(index)


def main() -> None:
    workload, folder = sys.argv[1], sys.argv[2]
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    started = time.perf_counter()
    import torch
    from torch.utils.data import DataLoader

    torch.manual_seed(0)
    if workload == "range":
        loader = DataLoader(RangeSet(), batch_size=w.RANGE_BATCH, shuffle=True)
        w.report(w.measure(loader, len, w.RANGE_SIZE))
    elif workload in ("images", "first_batch"):
        loader = DataLoader(
            ImageSet(w.write_images(folder)),
            batch_size=w.IMAGE_BATCH,
            shuffle=True,
            num_workers=workers,
        )
        if workload == "first_batch":
            ready = time.perf_counter()
            result = w.measure(loader, lambda b: len(b["label"]), 1)
            result["process_first_batch_s"] = result["first_batch_s"] + (ready - started)
            w.report(result)
        else:
            w.report(w.measure(loader, lambda b: len(b["label"]), w.IMAGES))
    elif workload == "arrays":
        loader = DataLoader(ArraySet(), batch_size=w.ARRAY_BATCH, num_workers=workers)
        result = w.measure(loader, len, w.ARRAYS)
        result["mb_per_s"] = result["records_per_s"] * w.ARRAY_BYTES / 1e6
        w.report(result)
    elif workload == "checkpoint":
        w.report({"unsupported": "torch.utils.data.DataLoader has no iterator state"})
    else:
        raise SystemExit(f"unknown workload {workload!r}")


if __name__ == "__main__":
    main()
