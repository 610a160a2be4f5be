"""asv benchmarks of the device layer: how long a training loop waits for its data.

A toy training loop runs a step on batches of 64 x 256 float32 rows that cost ~2 ms
each to make on the host (a NumPy map per element). The step is a small jitted update
plus 4 ms of `time.sleep`, standing for the accelerator's compute: on a real
accelerator the host's cores are free while the step runs, which a CPU-only XLA step
on this 2-core machine would not model (it would compete with the loader for cores).
`track_wait_fraction_*` is the share of the loop's wall time (after the first batch)
spent waiting for the next batch: `without_prefetch` fetches each batch and
`jax.device_put`s it when the step needs it; `with_prefetch` uses
`to_device(sharding, cpu_buffer_size=2, device_buffer_size=2)`, which prepares and
transfers the next batches while the step runs. Both are measured in the same run on
the same pipeline; lower is better.
"""

from __future__ import annotations

import os
import statistics
import time
import timeit
from typing import Any

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import chute

STEPS = 40
STEP_SECONDS = 0.004
BATCH = 64
WIDTH = 256


def make_row(i: int) -> np.ndarray:
    """~30 us of NumPy work per element (2 ms per batch of 64)."""
    rng = np.random.default_rng(i)
    row = rng.standard_normal(WIDTH).astype(np.float32)
    return np.sort(row) / (1.0 + np.abs(row).max())


@jax.jit
def train_step(weights: jax.Array, batch: jax.Array) -> jax.Array:
    hidden = jnp.tanh(batch @ weights)
    return weights - 1e-4 * (hidden.T @ batch) / batch.shape[0]


def _sharding() -> NamedSharding:
    return NamedSharding(Mesh(np.array(jax.devices()), ("data",)), PartitionSpec("data"))


def _dataset() -> Any:
    return chute.MapDataset.range(BATCH * STEPS).map(make_row).batch(BATCH).to_iter_dataset()


def _loop(batches: Any, put: Any) -> tuple[float, float]:
    """Runs the loop; returns (seconds waiting for data, total seconds) after step 1.

    The first batch (time to first batch: thread start, first transfers) is left out
    of both, so the fraction describes the steady state.
    """
    weights = jnp.zeros((WIDTH, WIDTH), jnp.float32)
    waited = 0.0
    it = iter(batches)
    weights = train_step(weights, put(next(it)))
    start = time.perf_counter()
    while True:
        before = time.perf_counter()
        try:
            batch = put(next(it))
        except StopIteration:
            break
        waited += time.perf_counter() - before
        weights = train_step(weights, batch)
        time.sleep(STEP_SECONDS)  # The accelerator computing; the host is idle.
        weights.block_until_ready()
    return waited, time.perf_counter() - start


class TrainingLoop:
    """Share of a toy training loop's time spent waiting for data."""

    timer = timeit.default_timer
    number = 1
    repeat = 3
    warmup_time = 0.0

    def setup(self) -> None:
        self.sharding = _sharding()
        self.plain = _dataset()
        self.prefetched = _dataset().to_device(
            self.sharding, cpu_buffer_size=2, device_buffer_size=2
        )
        train_step(jnp.zeros((WIDTH, WIDTH)), jnp.zeros((BATCH, WIDTH))).block_until_ready()

    def _without(self) -> tuple[float, float]:
        return _loop(self.plain, lambda b: jax.device_put(b, self.sharding))

    def _with(self) -> tuple[float, float]:
        return _loop(self.prefetched, lambda b: b)

    def time_loop_with_prefetch(self) -> None:
        self._with()

    def time_loop_without_prefetch(self) -> None:
        self._without()

    def _fraction(self, run: Any) -> float:
        return statistics.median(waited / total for waited, total in (run() for _ in range(3)))

    def track_wait_fraction_without_prefetch(self) -> float:
        return self._fraction(self._without)

    def track_wait_fraction_with_prefetch(self) -> float:
        return self._fraction(self._with)

    track_wait_fraction_without_prefetch.unit = "fraction"  # type: ignore[attr-defined]
    track_wait_fraction_with_prefetch.unit = "fraction"  # type: ignore[attr-defined]
