"""`chute demo`: write a sample ArrayRecord data set, read it back, report records/s."""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np

from chute_sources import ArrayRecordSource, write_array_record

__all__ = ["run_demo"]

_IMAGE_SHAPE = (32, 32, 3)


def _record(index: int) -> dict[str, object]:
    rng = np.random.default_rng(index)
    image = rng.integers(0, 256, size=_IMAGE_SHAPE, dtype=np.uint8)
    return {"image": image, "label": index % 10, "id": f"sample-{index:06d}"}


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:>12,.0f} records/s"


def run_demo(records: int, shards: int, folder: str | None, seed: int) -> int:
    """Writes `records` sample records in `shards` files, reads them back, prints speed.

    Returns:
        0 when every record read back equals the one written, 1 otherwise.
    """
    if records < 1 or shards < 1:
        print("chute demo: --records and --shards must be positive")
        return 2
    with tempfile.TemporaryDirectory(prefix="chute-demo-") as scratch:
        out = folder or scratch
        os.makedirs(out, exist_ok=True)
        print(f"chute demo: {records:,} records of {_IMAGE_SHAPE} uint8 images + labels")
        data = [_record(i) for i in range(records)]
        start = time.perf_counter()
        paths = write_array_record(data, os.path.join(out, "demo"), num_shards=shards)
        written = time.perf_counter() - start
        size = sum(os.path.getsize(p) for p in paths)
        print(f"  wrote {len(paths)} ArrayRecord files, {size / 2**20:.1f} MiB, to {out}")
        print(f"  write                     {_rate(records, written)}")
        with ArrayRecordSource(paths) as source:
            order = np.arange(records)
            shuffled = np.random.default_rng(seed).permutation(records)
            results = {}
            for name, keys in (("sequential", order), ("random", shuffled)):
                start = time.perf_counter()
                read = []
                for batch in np.array_split(keys, max(1, records // 256)):
                    read.extend(source.__getitems__(batch))
                results[name] = (time.perf_counter() - start, keys, read)
            bad = 0
            for _, keys, read in results.values():
                for key, record in zip(keys.tolist(), read, strict=True):
                    expected = data[key]
                    same = record["label"] == expected["label"] and record["id"] == expected["id"]
                    if not (same and np.array_equal(record["image"], expected["image"])):
                        bad += 1
            for name, (seconds, _, _) in results.items():
                print(f"  read {name:<10} (batches of 256) {_rate(records, seconds)}")
        if bad:
            print(f"  FAILED: {bad} records read back differ from the ones written")
            return 1
        print(f"  checked: all {2 * records:,} records read back equal the ones written")
    return 0
