"""The accelerator run's data and its image pipeline, importable without jax.

Worker processes started by the fork server import the functions a pipeline uses by
module name; keeping them here, away from `measure` (which imports jax), keeps each
worker's start cheap.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import numpy as np

import chute
from chute_sources import ArrayRecordSource

from ..bench_execution_workers import crop_flip, normalise, seconds_in_fork, write_images

__all__ = [
    "augment",
    "image_pipeline",
    "parallel_plain_images_per_second",
    "plain_images_per_second",
    "pipeline_images_per_second",
    "write_images",
]


def augment(record: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """A decoded record -> a random 56x56 crop, maybe flipped, scaled to [-1, 1]."""
    return {"image": normalise(crop_flip(record["image"], rng)), "label": np.int32(record["label"])}


def image_pipeline(paths: list[str], batch_size: int, workers: int) -> chute.IterDataset:
    """ArrayRecord -> shuffle -> decode -> random crop/flip -> normalise -> batch, endless.

    With `workers > 0` the workers make whole batches (`mp_prefetch` after `batch`), so
    the consumer only receives them, as a training process should.
    """
    ds = (
        chute.MapDataset.source(ArrayRecordSource(paths))
        .shuffle(seed=0)
        .repeat(None)
        .to_iter_dataset()
        .random_map(augment, seed=1)
        .batch(batch_size)
    )
    if workers:
        ds = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers))
    return ds


def pipeline_images_per_second(
    paths: list[str], batch_size: int, workers: int, seconds: float
) -> tuple[float, float, float]:
    """(seconds to the first batch, images/s, the consumer's CPU share) once workers run.

    Batches come from the workers in turn, so once `workers` batches are in, each worker
    has started and made one: the rate is timed from there, for about `seconds`. The
    consumer's CPU share is the CPU time of this process (all its threads) over the
    wall time of that window: near 1.0, the consumer is what limits the rate.
    """
    start = time.perf_counter()
    it = iter(image_pipeline(paths, batch_size, workers))
    next(it)
    first = time.perf_counter() - start
    for _ in range(workers - 1):
        next(it)
    images, start, cpu = 0, time.perf_counter(), time.process_time()
    while (elapsed := time.perf_counter() - start) < seconds:
        images += len(next(it)["label"])
    consumer_cpu = (time.process_time() - cpu) / elapsed
    it.close()
    return first, images / elapsed, consumer_cpu


def plain_images_per_second(paths: list[str], batch_size: int, images: int) -> float:
    """The same work as `image_pipeline` in a plain loop on one core: images/s.

    Timed after a first, untimed pass (warm, as the pipeline is), in a child forked
    from this process where that is safe (reading ArrayRecord files starts native
    threads, which must not run in a process that later forks its workers).
    """
    source = ArrayRecordSource(paths)
    order = np.random.default_rng(0).permutation(len(source))[:images].tolist()

    def loop() -> None:
        batch, rng = [], np.random.default_rng(1)
        for key in order:
            batch.append(augment(source[key], rng))
            if len(batch) == batch_size:
                np.stack([b["image"] for b in batch])
                np.array([b["label"] for b in batch])
                batch = []

    return len(order) / seconds_in_fork(loop, prepare=loop)


def _plain_window(
    paths: list[str], batch_size: int, start_at: float, seconds: float
) -> tuple[int, float]:
    """The plain loop, endlessly, in a process of its own; counted from `start_at`.

    Returns (images made from `start_at` on, the seconds they took): the loop runs
    untimed until the wall clock reaches `start_at` (every process warms up and starts
    together), then for about `seconds`.
    """
    source = ArrayRecordSource(paths)
    rng = np.random.default_rng(1)
    keys = rng.permutation(len(source)).tolist()
    images, counting_since, position = 0, None, 0
    while True:
        batch = [augment(source[keys[(position + i) % len(keys)]], rng) for i in range(batch_size)]
        np.stack([b["image"] for b in batch])
        np.array([b["label"] for b in batch])
        position += batch_size
        now = time.time()
        if counting_since is None:
            if now >= start_at:
                counting_since = now
        else:
            images += batch_size
            if now - counting_since >= seconds:
                return images, now - counting_since


def parallel_plain_images_per_second(
    paths: list[str], batch_size: int, processes: int, seconds: float
) -> float:
    """Images/s of `processes` plain loops side by side: what the machine itself allows.

    A worker count's ideal is not always the one-core rate times the count: cores may be
    hyperthreads, and memory bandwidth is shared. Each loop runs in a process of its
    own (started by a fork server: this process has native threads) over the same
    window of wall time.
    """
    context = multiprocessing.get_context("forkserver")
    start_at = time.time() + 3.0  # Time enough for each process to start and warm.
    with context.Pool(processes) as pool:
        done = pool.starmap(_plain_window, [(paths, batch_size, start_at, seconds)] * processes)
    return sum(images / took for images, took in done)
