"""asv benchmarks of the Ray executor (`ray_prefetch`) on a local Ray cluster.

- `ImagesOnRay.track_ratio_to_mp_prefetch`: the image pipeline of
  `bench_execution_workers` (ArrayRecord 64x64 images: shuffle -> decode -> crop/flip ->
  normalise -> batch(128)) with 2 Ray workers, over the same with 2 local worker
  processes (throughput ratio, pairs run alternately). On one 2-core machine this is
  Ray's overhead, not a gain: the gain is more CPUs than one host has.
- `ImagesOnRay.track_ms_per_chunk_scheduling`: what one chunk costs the consumer beyond
  its work: a plan of 1-element chunks of an identity map, seconds per chunk.
- `ImagesOnRay.track_batch_bytes_copied`: bytes of a batch's arrays that are copies
  rather than views into Ray's object store (0: the consumer reads them in place).

The cluster is started once per run (`ray.init` with 2 CPUs) and stopped after.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import timeit
import warnings

import chute

from ._timing import median_ratio
from .bench_execution_workers import image_pipeline, write_images

IMAGES = 2048
BATCH = 128
TINY_CHUNKS = 200


def start_ray() -> bool:
    """Starts a local 2-CPU Ray cluster unless one runs; whether this call started it."""
    import ray

    if ray.is_initialized():
        return False
    path = os.pathsep.join(entry for entry in sys.path if entry)  # `benchmarks` importable.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": path}},
        )
    return True


class ImagesOnRay:
    """The image pipeline with 2 Ray workers, beside 2 local worker processes."""

    timer = timeit.default_timer
    number = 1
    repeat = 1
    timeout = 300

    def setup(self) -> None:
        self.started = start_ray()
        self.folder = tempfile.mkdtemp(prefix="chute-bench-ray-")
        self.pipeline = image_pipeline(write_images(self.folder, IMAGES))
        self.on_ray = self.pipeline.ray_prefetch(chute.RayOptions(num_workers=2)).batch(BATCH)
        options = chute.MultiprocessingOptions(num_workers=2)
        self.local = self.pipeline.mp_prefetch(options).batch(BATCH)
        tiny = chute.MapDataset.range(TINY_CHUNKS).to_iter_dataset()
        self.tiny = tiny.ray_prefetch(chute.RayOptions(num_workers=2), chunk_size=1)
        next(iter(self.on_ray))  # Warm: the Ray workers have imported chute.

    def teardown(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.started:
            import ray

            ray.shutdown()

    def _ray(self) -> None:
        for _ in self.on_ray:
            pass

    def _local(self) -> None:
        for _ in self.local:
            pass

    def time_images_on_ray(self) -> None:
        self._ray()

    def track_ratio_to_mp_prefetch(self) -> float:
        return median_ratio(self._ray, self._local, repeats=3)

    track_ratio_to_mp_prefetch.unit = "ratio"  # type: ignore[attr-defined]

    def track_ms_per_chunk_scheduling(self) -> float:
        start = time.perf_counter()
        count = sum(1 for _ in self.tiny)
        return (time.perf_counter() - start) / count * 1000

    track_ms_per_chunk_scheduling.unit = "ms"  # type: ignore[attr-defined]

    def track_batch_bytes_copied(self) -> float:
        batch = next(iter(self.on_ray))
        in_place = not batch.flags.writeable and not batch.flags.owndata
        return 0.0 if in_place else float(batch.nbytes)

    track_batch_bytes_copied.unit = "bytes"  # type: ignore[attr-defined]
