"""The baselines: single-process plain loops and memcpy, `python run_plain.py WORKLOAD DIR`.

The same work with no loader: workload 1 a loop over a NumPy permutation; workload 2
the image steps in a loop reading with array_record's own reader (one core);
workload 3 the bandwidth of copying 2 MiB arrays into batches (`np.stack`, fresh
memory each time, as a loader's consumer would), the limit for moving arrays.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
import workloads as w


def range_batches():
    order = np.random.default_rng(0).permutation(w.RANGE_SIZE)
    for start in range(0, w.RANGE_SIZE, w.RANGE_BATCH):
        yield np.array([w.times_two_plus_one(int(i)) for i in order[start : start + 256]])


def image_batches(paths: list[str]):
    from array_record.python.array_record_data_source import ArrayRecordDataSource

    source = ArrayRecordDataSource(paths)
    order = np.random.default_rng(0).permutation(w.IMAGES).tolist()
    for start in range(0, w.IMAGES, w.IMAGE_BATCH):
        elements = [
            w.normalise(w.crop_flip(w.decode(source[i]), np.random.default_rng([0, i])))
            for i in order[start : start + w.IMAGE_BATCH]
        ]
        yield {
            "image": np.stack([e["image"] for e in elements]),
            "label": np.array([e["label"] for e in elements]),
        }


def memcpy_batches():
    arrays = [w.make_array(i) for i in range(w.ARRAY_BATCH)]
    for _ in range(w.ARRAYS // w.ARRAY_BATCH):
        yield np.stack(arrays)


def main() -> None:
    workload, folder = sys.argv[1], sys.argv[2]
    if workload == "range":
        w.report(w.measure(range_batches(), len, w.RANGE_SIZE))
    elif workload == "images":
        w.report(
            w.measure(image_batches(w.write_images(folder)), lambda b: len(b["label"]), w.IMAGES)
        )
    elif workload == "arrays":
        result = w.measure(memcpy_batches(), len, w.ARRAYS)
        result["mb_per_s"] = result["records_per_s"] * w.ARRAY_BYTES / 1e6
        w.report(result)
    elif workload == "checkpoint":
        import json

        state = {"position": 12345, "epoch": 0}
        path = os.path.join(folder, "plain-state.json")
        start = time.perf_counter()
        with open(path, "w") as file:
            json.dump(state, file)
        saved = time.perf_counter() - start
        start = time.perf_counter()
        with open(path) as file:
            json.load(file)
        w.report({"save_s": saved, "restore_s": time.perf_counter() - start})
    else:
        raise SystemExit(f"unknown workload {workload!r}")


if __name__ == "__main__":
    main()
