"""Grain's side of the comparison: `python run_grain.py WORKLOAD DATA_DIR [WORKERS]`."""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workloads as w


class _Decode:
    def map(self, record: bytes) -> dict:  # grain.transforms.Map
        return w.decode(record)


def main() -> None:
    workload, folder = sys.argv[1], sys.argv[2]
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    started = time.perf_counter()
    import grain
    from absl import flags

    flags.FLAGS.mark_as_parsed()  # Grain's workers read absl flags (defaults are fine).

    options = grain.MultiprocessingOptions(num_workers=workers)
    if workload == "range":
        ds = grain.MapDataset.range(w.RANGE_SIZE).seed(0).shuffle().map(w.times_two_plus_one)
        w.report(w.measure(ds.batch(w.RANGE_BATCH), len, w.RANGE_SIZE))
    elif workload in ("images", "first_batch"):
        paths = w.write_images(folder)
        ds = (
            grain.MapDataset.source(grain.sources.ArrayRecordDataSource(paths))
            .seed(0)
            .shuffle()
            .map(w.decode)
            .random_map(w.crop_flip)
            .map(w.normalise)
            .to_iter_dataset()
            .batch(w.IMAGE_BATCH)
        )
        if workers:
            ds = ds.mp_prefetch(options)
        if workload == "first_batch":
            ready = time.perf_counter()
            result = w.measure(ds, lambda b: len(b["label"]), 1)
            result["process_first_batch_s"] = result["first_batch_s"] + (ready - started)
            w.report(result)
        else:
            w.report(w.measure(ds, lambda b: len(b["label"]), w.IMAGES))
    elif workload == "arrays":
        ds = grain.MapDataset.range(w.ARRAYS).map(w.make_array).batch(w.ARRAY_BATCH)
        result = w.measure(ds.to_iter_dataset().mp_prefetch(options), len, w.ARRAYS)
        result["mb_per_s"] = result["records_per_s"] * w.ARRAY_BYTES / 1e6
        w.report(result)
    elif workload == "checkpoint":
        ds = (
            grain.MapDataset.range(w.RANGE_SIZE)
            .seed(0)
            .shuffle()
            .map(w.times_two_plus_one)
            .to_iter_dataset()
            .batch(w.RANGE_BATCH)
            .mp_prefetch(options)
        )
        w.report(w.checkpoint_round_trip(ds, os.path.join(folder, "grain-state.json")))
    else:
        raise SystemExit(f"unknown workload {workload!r}")


if __name__ == "__main__":
    main()
