"""The demo's data: scikit-learn's handwritten digits as ArrayRecord shards, and the pipeline.

Functions here run in worker processes, so they live in an importable module.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["BATCH", "EVAL_FRACTION", "augment", "pipeline", "to_features", "write_digits"]

BATCH = 64
EVAL_FRACTION = 0.2
"""The last fifth of the (fixed-order) digits is held out to measure accuracy."""


def write_digits(folder: str, shards: int = 4) -> tuple[list[str], dict[str, np.ndarray]]:
    """Writes the training digits to `shards` ArrayRecord files; returns them and the eval set.

    Example:
        >>> import tempfile
        >>> paths, held_out = write_digits(tempfile.mkdtemp(), shards=2)
        >>> len(paths), held_out["image"].shape[1:]
        (2, (8, 8))
    """
    from sklearn.datasets import load_digits

    from chute_sources import write_array_record

    digits = load_digits()
    images = digits.images.astype(np.uint8)  # 0..16 intensities, 8 x 8.
    labels = digits.target.astype(np.int64)
    split = int(len(images) * (1 - EVAL_FRACTION))
    records = [{"image": images[i], "label": int(labels[i])} for i in range(split)]
    paths = write_array_record(records, os.path.join(folder, "digits"), num_shards=shards)
    return paths, {"image": images[split:], "label": labels[split:]}


def augment(record: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """A random shift of up to one pixel each way, and a little intensity noise.

    Example:
        >>> record = {"image": np.ones((8, 8), np.uint8), "label": 3}
        >>> augment(record, np.random.default_rng(0))["image"].dtype
        dtype('float32')
    """
    image = record["image"].astype(np.float32) / 16.0
    dy, dx = rng.integers(-1, 2, size=2)
    image = np.roll(image, (int(dy), int(dx)), axis=(0, 1))
    image = image + rng.normal(0.0, 0.05, image.shape).astype(np.float32)
    return {"image": image, "label": record["label"]}


def to_features(record: dict[str, Any]) -> dict[str, Any]:
    """Flattens the image into the model's 64 inputs.

    Example:
        >>> to_features({"image": np.zeros((8, 8), np.float32), "label": 1})["x"].shape
        (64,)
    """
    return {"x": record["image"].reshape(64), "label": record["label"]}


def pipeline(paths: list[str], epochs: int, workers: int, autotune: Any = False) -> Any:
    """Global shuffle every epoch, per-record augmentation, batches, worker processes.

    `autotune` goes to `chute.MultiprocessingOptions` (True, or `chute.AutotuneOptions`:
    the workers change while it runs, starting from `workers`).

    Example:
        >>> import tempfile
        >>> paths, _ = write_digits(tempfile.mkdtemp(), shards=2)
        >>> batch = next(iter(pipeline(paths, epochs=1, workers=0)))
        >>> batch["x"].shape, batch["label"].shape
        ((64, 64), (64,))
    """
    import chute

    return (
        chute.MapDataset.source(chute.ArrayRecordSource(paths))
        .seed(2026)
        .shuffle()
        .repeat(epochs)
        .random_map(augment)
        .map(to_features)
        .batch(BATCH, drop_remainder=True)
        .to_iter_dataset()
        .mp_prefetch(chute.MultiprocessingOptions(num_workers=workers, autotune=autotune))
    )
