"""asv benchmarks of the Ray executor (`ray_prefetch`) on a local Ray cluster.

- `ImagesOnRay.track_ratio_to_mp_prefetch`: the image pipeline of
  `bench_execution_workers` (ArrayRecord 64x64 images: shuffle -> decode -> crop/flip ->
  normalise -> batch(128)) with 2 Ray workers, over the same with 2 local worker
  processes (throughput ratio, pairs run alternately). On one 2-core machine this is
  Ray's overhead, not a gain: the gain is more CPUs than one host has.
- `ImagesOnRay.track_ms_per_chunk_scheduling`: what one chunk costs the consumer beyond
  its work: a plan of 1-element chunks of an identity map, seconds per chunk.
- `ImagesOnRay.track_cpu_per_chunk_ratio_to_local`: the CPU time (user + system) of
  this process and every process under it (the Ray cluster's, or the local workers')
  per chunk of the image pipeline on Ray, over the same with local workers (target
  <= 1.2).
- `ImagesOnRay.track_batch_bytes_copied`: bytes of a batch's arrays that are copies
  rather than views into Ray's object store (0: the consumer reads them in place).

The benchmarks share one local 2-CPU cluster, started by `setup_cache` once per commit
and environment that asv measures, and stopped after the class's last benchmark there
(`_ray_cluster`). Where `ray` is not installed (`chute-execution[ray]`), they are skipped.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import statistics
import tempfile
import time
import timeit
from collections.abc import Callable
from typing import Any

import chute

from ._ray_cluster import connect, init_ray, shared_cluster
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
    init_ray(num_cpus=2, include_dashboard=False)
    return True


def tree_cpu_seconds(*others: int) -> dict[int, float]:
    """CPU seconds (user + system) used so far by this process and each one under it, by pid.

    And by the processes `others` and each one under them. The Ray cluster that
    `ray.init` started here (its raylet, its workers) and local worker processes are all
    under this one; a shared cluster's are under its keeper (pass its pid).
    """
    import psutil

    used = {}
    roots = [psutil.Process()]
    for pid in others:
        try:
            roots.append(psutil.Process(pid))
        except psutil.Error:
            continue
    for process in [tree for root in roots for tree in (root, *root.children(recursive=True))]:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        used[process.pid] = times.user + times.system
    return used


def cpu_seconds_of(run: Callable[[], object], *others: int) -> float:
    """The CPU seconds this process tree (and `others`') spent during `run()`.

    Of the processes alive at its end.
    """
    before = tree_cpu_seconds(*others)
    run()
    after = tree_cpu_seconds(*others)
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


class ImagesOnRay:
    """The image pipeline with 2 Ray workers, beside 2 local worker processes.

    Every benchmark connects to one cluster that `setup_cache` starts (`_ray_cluster`).
    """

    timer = timeit.default_timer
    number = 1
    repeat = 1
    timeout = 300
    rounds = 1  # asv runs the class's benchmarks together, so the cluster is up once.

    def setup_cache(self, watched: int | None = None) -> dict[str, Any]:
        """The shared cluster, kept while `watched` lives; `{"address": None}` without ray.

        Under asv (`watched` None) it is kept while asv's run lives and this call's
        working folder exists: asv deletes it after the class's last benchmark.
        """
        if importlib.util.find_spec("ray") is None:
            return {"address": None}
        return shared_cluster(watched, os.getcwd() if watched is None else None)

    def setup(self, cluster: dict[str, Any]) -> None:
        if cluster["address"] is None:  # asv skips a benchmark whose setup raises this.
            raise NotImplementedError("ray is not installed (chute-execution[ray])")
        connect(cluster)
        self.keeper = int(cluster["keeper"])
        self.folder = tempfile.mkdtemp(prefix="chute-bench-ray-")
        self.pipeline = image_pipeline(write_images(self.folder, IMAGES))
        self.on_ray = self.pipeline.ray_prefetch(chute.RayOptions(num_workers=2)).batch(BATCH)
        options = chute.MultiprocessingOptions(num_workers=2)
        self.local = self.pipeline.mp_prefetch(options).batch(BATCH)
        tiny = chute.MapDataset.range(TINY_CHUNKS).to_iter_dataset()
        self.tiny = tiny.ray_prefetch(chute.RayOptions(num_workers=2), chunk_size=1)
        next(iter(self.on_ray))  # Warm: the Ray workers have imported chute.

    def teardown(self, cluster: dict[str, Any]) -> None:
        import ray

        shutil.rmtree(self.folder, ignore_errors=True)
        ray.shutdown()  # Disconnects: the keeper stops the cluster after the run.

    def _ray(self) -> None:
        for _ in self.on_ray:
            pass

    def _local(self) -> None:
        for _ in self.local:
            pass

    def time_images_on_ray(self, cluster: dict[str, Any]) -> None:
        self._ray()

    def track_ratio_to_mp_prefetch(self, cluster: dict[str, Any]) -> float:
        return median_ratio(self._ray, self._local, repeats=3)

    track_ratio_to_mp_prefetch.unit = "ratio"  # type: ignore[attr-defined]

    def track_cpu_per_chunk_ratio_to_local(self, cluster: dict[str, Any]) -> float:
        """CPU seconds of the process tree per pass on Ray over those with local workers.

        Both passes run the same chunks (the same plan, cut the same way), so the ratio
        of CPU per pass is the ratio of CPU per chunk. Medians of 3 pairs, alternately.
        """
        self._local()  # Warm: the local workers have started (and are parked between).
        ratios = []
        for repeat in range(3):
            runs = (self._ray, self._local) if repeat % 2 == 0 else (self._local, self._ray)
            spent = {run.__name__: cpu_seconds_of(run, self.keeper) for run in runs}
            ratios.append(spent["_ray"] / spent["_local"])
        return statistics.median(ratios)

    track_cpu_per_chunk_ratio_to_local.unit = "ratio"  # type: ignore[attr-defined]

    def track_ms_per_chunk_scheduling(self, cluster: dict[str, Any]) -> float:
        start = time.perf_counter()
        count = sum(1 for _ in self.tiny)
        return (time.perf_counter() - start) / count * 1000

    track_ms_per_chunk_scheduling.unit = "ms"  # type: ignore[attr-defined]

    def track_batch_bytes_copied(self, cluster: dict[str, Any]) -> float:
        batch = next(iter(self.on_ray))
        in_place = not batch.flags.writeable and not batch.flags.owndata
        return 0.0 if in_place else float(batch.nbytes)

    track_batch_bytes_copied.unit = "bytes"  # type: ignore[attr-defined]
