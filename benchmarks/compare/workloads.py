"""The workloads every loader runs: pure NumPy and zlib, importable without chute.

Each loader's runner (`run_chute.py`, `run_grain.py`, `run_torch.py`, `run_plain.py`)
builds these same steps with its own API. Image records are raw bytes: one label
byte, then zlib-compressed 64 x 64 x 3 pixels, written once with ArrayRecord, so every
loader reads the same files with a real decode step.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

RANGE_SIZE = 1_000_000
RANGE_BATCH = 256
IMAGES = 4096
IMAGE_BATCH = 128
ARRAY_BYTES = 2 * 2**20
ARRAYS = 256
ARRAY_BATCH = 8
TIME_CAP = 8.0  # Seconds: slow loaders are measured on a prefix of the epoch.


def times_two_plus_one(x: Any) -> Any:
    """The map of workload 1."""
    return x * 2 + 1


def encode_image(image: np.ndarray, label: int) -> bytes:
    """One image record: a label byte, then the zlib-compressed pixels."""
    return bytes([label]) + zlib.compress(image.tobytes(), 1)


def decode(record: bytes) -> dict[str, Any]:
    """Record bytes to `{"image": uint8[64, 64, 3], "label": int}`."""
    pixels = np.frombuffer(zlib.decompress(record[1:]), np.uint8).reshape(64, 64, 3)
    return {"image": pixels, "label": record[0]}


def crop_flip(element: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """A random 56 x 56 crop, flipped left-right with probability 1/2."""
    y, x = rng.integers(0, 9, size=2)
    image = element["image"][y : y + 56, x : x + 56]
    if rng.random() < 0.5:
        image = image[:, ::-1]
    return {"image": image, "label": element["label"]}


def normalise(element: dict[str, Any]) -> dict[str, Any]:
    """Pixels to float32 in [-1, 1]."""
    image = (element["image"].astype(np.float32) - 127.5) / 127.5
    return {"image": image, "label": element["label"]}


def make_array(i: int) -> np.ndarray:
    """A 2 MiB float32 array (workload 3)."""
    return np.full(ARRAY_BYTES // 4, i, dtype=np.float32)


def write_images(folder: str) -> list[str]:
    """Writes the image records to two ArrayRecord files (once per folder)."""
    from array_record.python.array_record_module import ArrayRecordWriter

    paths = [os.path.join(folder, f"images-{i:05d}-of-00002.array_record") for i in range(2)]
    if all(os.path.exists(p) for p in paths):
        return paths
    rng = np.random.default_rng(0)
    per_file = IMAGES // 2
    for number, path in enumerate(paths):
        writer = ArrayRecordWriter(path + ".tmp", "group_size:1")
        for i in range(per_file):
            image = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
            writer.write(encode_image(image, (number * per_file + i) % 10))
        writer.close()
        os.replace(path + ".tmp", path)
    return paths


def measure(batches: Iterable[Any], rows: Callable[[Any], int], total: int) -> dict[str, float]:
    """Iterates `batches`: time to the first batch, then rows/s in the steady state.

    Throughput counts the batches after the first, over the time after the first (so
    start-up, reported as `first_batch_s`, does not hide in it), until `total` rows or
    `TIME_CAP` seconds.
    """
    start = time.perf_counter()
    iterator = iter(batches)
    count = rows(next(iterator))
    first = time.perf_counter()
    steady = 0
    for batch in iterator if count < total else ():
        steady += rows(batch)
        if count + steady >= total or time.perf_counter() - first > TIME_CAP:
            break
    seconds = time.perf_counter() - first
    return {
        "records_per_s": steady / seconds if steady else 0.0,
        "first_batch_s": first - start,
        "records": count + steady,
    }


def checkpoint_round_trip(dataset: Iterable[Any], path: str) -> dict[str, float]:
    """Save after 10 batches (get_state + json.dump), then restore in a new iterator
    (json.load + set_state + next); checks the restored batch is the next one."""
    it: Any = iter(dataset)
    for _ in range(10):
        next(it)
    start = time.perf_counter()
    with open(path, "w") as file:
        json.dump(it.get_state(), file)
    saved = time.perf_counter() - start
    expected = next(it).tolist()
    fresh: Any = iter(dataset)
    start = time.perf_counter()
    with open(path) as file:
        fresh.set_state(json.load(file))
    first = next(fresh).tolist()
    restored = time.perf_counter() - start
    assert first == expected, "restore did not continue with the next batch"
    return {"save_s": saved, "restore_s": restored, "bytes": os.path.getsize(path)}


def report(result: dict[str, Any]) -> None:
    """Prints one runner's result as the JSON line the driver reads."""
    print("RESULT " + json.dumps(result), flush=True)
