"""One run of `bench_mixtures`: `python -m benchmarks._mixture_run SOURCES KIND`.

Builds a mixture of SOURCES streams (KIND `iter`: `IterDataset.mix` of streams each
read with `ReadOptions()`; `map`: `MapDataset.mix` read with `ReadOptions()`), times
its first `TIMED` records from `iter()` on (so that records read ahead are paid for),
and prints one JSON line: records/s, the most threads seen while iterating, and the
process's peak RSS in MiB. One source is the
baseline: the same records and work through a single stream.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
import zlib

import numpy as np

import chute

RECORDS = 512  # Distinct records, shared by the sources (each shuffles them its own way).
TIMED = 20_000


def _records() -> list[bytes]:
    """32x32x3 images, zlib-compressed: decoding them releases the GIL, as real decoders do."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 64, (RECORDS, 32, 32, 3), dtype=np.uint8)
    return [zlib.compress(image.tobytes(), 1) for image in images]


def decode(record: bytes) -> np.ndarray:
    return np.frombuffer(zlib.decompress(record), np.uint8).astype(np.float32) / 255.0


def build(sources: int, kind: str) -> chute.IterDataset:
    """The pipeline measured (see the module docs)."""
    records, options = _records(), chute.ReadOptions()
    if sources == 1:  # As many records as the mixtures have, in one stream.
        one = chute.MapDataset.source(records).seed(0).repeat(64).shuffle().map(decode)
        return one.to_iter_dataset(read_options=options)
    repeats = max(1, 64 // sources)  # 64 x 512 records in all, however many sources.
    parts = [
        chute.MapDataset.source(records).seed(k).repeat(repeats).shuffle().map(decode)
        for k in range(sources)
    ]
    if kind == "map":
        return chute.MapDataset.mix(parts).to_iter_dataset(read_options=options)
    return chute.IterDataset.mix([part.to_iter_dataset(read_options=options) for part in parts])


def main() -> None:
    sources, kind = int(sys.argv[1]), sys.argv[2]
    dataset = build(sources, kind)
    threads, start = threading.active_count(), time.perf_counter()
    iterator = iter(dataset)  # Timed from the start: read-ahead cannot hide reads.
    for count in range(1, TIMED + 1):
        next(iterator)
        if count % 1000 == 0:
            threads = max(threads, threading.active_count())
    seconds = time.perf_counter() - start
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"records_per_s": TIMED / seconds, "threads": threads, "rss_mib": rss_mib}))
    sys.stdout.flush()
    os._exit(0)  # Without joining read threads: the figures are printed.


if __name__ == "__main__":
    main()
