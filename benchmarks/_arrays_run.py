"""One run of `bench_large_arrays`: `python -m benchmarks._arrays_run KIND`.

Makes `ARRAYS` float32 arrays of 2 MiB in a map and batches them by 8, in a fresh
process, and prints the GB/s of batches delivered as one JSON line. KIND:

- `plain`: the loop a user writes without a loader (`np.full` per array, `np.stack`
  per batch), with the allocator as Python leaves it: glibc hands 2 MiB blocks back to
  the kernel when freed, so each new array faults in fresh pages;
- `kept`: the same loop after `mallopt` makes glibc keep freed memory for reuse (what
  chute's worker processes do), so arrays stay in the CPU's caches;
- `workers0`: `MapDataset.range(n).map(make).batch(8)` in this process;
- `workers2`: `...to_iter_dataset().map(make).mp_prefetch(2 workers).batch(8)`, the
  workers starting inside the timing.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time

import numpy as np

ARRAY_BYTES = 2 * 2**20
ARRAYS = 768  # 1.5 GiB per run.
BATCH = 8


def make_array(i: int) -> np.ndarray:
    return np.full(ARRAY_BYTES // 4, i, dtype=np.float32)


def _plain() -> None:
    for start in range(0, ARRAYS, BATCH):
        np.stack([make_array(i) for i in range(start, start + BATCH)])


def main() -> None:
    kind = sys.argv[1]
    if kind == "kept":
        mallopt = ctypes.CDLL(None).mallopt
        mallopt(-3, 32 * 2**20)  # M_MMAP_THRESHOLD: blocks below 32 MiB from the heap.
        mallopt(-1, 256 * 2**20)  # M_TRIM_THRESHOLD: keep up to 256 MiB free.
    if kind in ("plain", "kept"):
        start = time.perf_counter()
        _plain()
    else:
        import chute

        if kind == "workers0":
            batches = chute.MapDataset.range(ARRAYS).map(make_array).batch(BATCH)
        else:
            options = chute.MultiprocessingOptions(num_workers=2)
            stream = chute.MapDataset.range(ARRAYS).to_iter_dataset().map(make_array)
            batches = stream.mp_prefetch(options, chunk_size=BATCH).batch(BATCH)
        start = time.perf_counter()
        for _ in batches:
            pass
    seconds = time.perf_counter() - start
    print(json.dumps({"gb_per_s": ARRAYS * ARRAY_BYTES / seconds / 1e9}))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
