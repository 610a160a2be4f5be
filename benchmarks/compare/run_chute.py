"""chute's side of the comparison: `python run_chute.py WORKLOAD DATA_DIR [WORKERS]`."""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workloads as w


def main() -> None:
    workload, folder = sys.argv[1], sys.argv[2]
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    started = time.perf_counter()
    import chute

    options = chute.MultiprocessingOptions(num_workers=workers)
    if workload == "range":
        ds = chute.MapDataset.range(w.RANGE_SIZE).seed(0).shuffle().map(w.times_two_plus_one)
        w.report(w.measure(ds.batch(w.RANGE_BATCH), len, w.RANGE_SIZE))
    elif workload in ("images", "first_batch"):
        paths = w.write_images(folder)
        ds = (
            chute.MapDataset.source(chute.ArrayRecordSource(paths, decode=False))
            .seed(0)
            .shuffle()
            .map(w.decode)
            .random_map(w.crop_flip)
            .map(w.normalise)
            .to_iter_dataset()
        )
        if workers:
            ds = ds.mp_prefetch(options)
        batches = ds.batch(w.IMAGE_BATCH)
        if workload == "first_batch":
            ready = time.perf_counter()
            result = w.measure(batches, lambda b: len(b["label"]), 1)
            result["process_first_batch_s"] = result["first_batch_s"] + (ready - started)
            w.report(result)
        else:
            w.report(w.measure(batches, lambda b: len(b["label"]), w.IMAGES))
    elif workload == "arrays":
        ds = chute.MapDataset.range(w.ARRAYS).map(w.make_array).batch(w.ARRAY_BATCH)
        result = w.measure(ds.to_iter_dataset().mp_prefetch(options), len, w.ARRAYS)
        result["mb_per_s"] = result["records_per_s"] * w.ARRAY_BYTES / 1e6
        w.report(result)
    elif workload == "checkpoint":
        ds = (
            chute.MapDataset.range(w.RANGE_SIZE)
            .seed(0)
            .shuffle()
            .map(w.times_two_plus_one)
            .to_iter_dataset()
            .mp_prefetch(options)
            .batch(w.RANGE_BATCH)
        )
        w.report(w.checkpoint_round_trip(ds, os.path.join(folder, "chute-state.json")))
    else:
        raise SystemExit(f"unknown workload {workload!r}")


if __name__ == "__main__":
    main()
