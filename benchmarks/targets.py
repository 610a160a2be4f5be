"""The performance targets of issues 21 and 32, measured by the asv benchmarks' `track_`s.

`uv run --frozen python -m benchmarks.targets [NAME ...]` calls each benchmark's
`track_` method 5 times in this process and prints the median, every value, the load
average before and after, and whether the target holds. NAMES (all by default):
`per_element`, `images`, `images_fresh`, `images_steady`, `arrays`, `arrays_fresh`,
`arrays_steady`, `arrays_plain`, `cold`, `warm`, `restore`, `reshard_restore`,
`metrics`, `data_loader`, `data_loader_images`, `mixtures`, `autotune`, `ray`,
`autotune_demo`. Timings on a shared 2-core machine are noisy: read the load average
with each figure. The `_fresh`
figures start new worker processes for each iterator (`idle_worker_seconds=0`); the
others take over the workers the last iterator parked, as a loop over epochs does.
"""

from __future__ import annotations

import inspect
import os
import statistics
import sys
from typing import Any

from . import bench_autotune as autotune
from . import bench_autotune_demo as autotune_demo
from . import bench_checkpoint as checkpoint
from . import bench_data_loader as data_loader
from . import bench_datasets as datasets
from . import bench_execution_workers as workers
from . import bench_large_arrays as arrays
from . import bench_metrics as metrics
from . import bench_mixtures as mixtures
from . import bench_ray as ray
from . import bench_reshard as reshard
from ._ray_cluster import stop as stop_cluster

REPEATS = 5

# (name, figure, asv class, `track_` method, its parameters, target)
TARGETS: list[tuple[str, str, type, str, tuple[Any, ...], str]] = [
    ("per_element",
     "0 workers, list of 1M ints -> shuffle -> map -> batch(256), built in the timing / plain loop",
     datasets.ShuffleMapBatch, "track_ratio_to_plain_loop", (), ">= 0.9"),
    ("images", "images, 2 workers / 1-core plain loop, start included",
     workers.ImagePipeline, "track_ratio_two_workers_to_plain_loop", (), ">= 1.6"),
    ("images_fresh", "images, 2 new workers each time / 1-core plain loop, start included",
     workers.ImagePipeline, "track_ratio_two_fresh_workers_to_plain_loop", (), ">= 1.6"),
    ("images_steady", "images, 2 workers / 1-core plain loop, after the first batch",
     workers.ImagePipeline, "track_steady_ratio_two_workers_to_plain_loop", (), ">= 1.6"),
    ("arrays", "2 MiB arrays, 2 workers / memcpy, start included",
     workers.LargeArrays, "track_ratio_to_memcpy", (), ">= 0.5"),
    ("arrays_fresh", "2 MiB arrays, 2 new workers each time / memcpy, start included",
     workers.LargeArrays, "track_ratio_to_memcpy_fresh_workers", (), ">= 0.5"),
    ("arrays_steady", "2 MiB arrays, 2 workers / memcpy, steady state",
     workers.LargeArrays, "track_steady_ratio_to_memcpy", (), ">= 0.7"),
    ("arrays_plain", "2 MiB arrays, 2 workers / plain loop (fresh processes)",
     arrays.LargeArraysVsPlainLoop, "track_two_workers_ratio_to_plain_loop", (), ">= 1.5"),
    ("arrays_plain", "2 MiB arrays, 0 workers / plain loop (fresh processes)",
     arrays.LargeArraysVsPlainLoop, "track_zero_workers_ratio_to_plain_loop", (), ">= 0.9"),
    ("arrays_plain", "2 MiB arrays, 2 workers / plain loop keeping freed memory",
     arrays.LargeArraysVsPlainLoop, "track_two_workers_ratio_to_kept_loop", (), "-"),
    ("cold", "first batch, 2 workers, first loader of a process (s)",
     workers.TimeToFirstBatch, "track_cold_first_batch_seconds", (), "< 0.150"),
    ("warm", "first batch, 2 workers, second loader (s)",
     workers.TimeToFirstBatch, "track_warm_first_batch_seconds", (), "< 0.060"),
    *(
        ("restore", f"restore + first batch minus a fresh first batch, {n} workers (ms)",
         checkpoint.RestoreFirstBatch, "track_restore_minus_fresh_ms", (n,), "<= 3")
        for n in (0, 2)
    ),
    *(
        ("reshard_restore",
         f"resharded restore (4 uneven -> 3) + first batch minus a fresh one, {n} workers (ms)",
         reshard.ResumeAnywhere, "track_resharded_restore_minus_fresh_ms", (n,), "<= 3")
        for n in (0, 2)
    ),
    ("metrics", "per_element's pipeline metered (iter(metrics=...)) / unmetered",
     metrics.MetricsOverhead, "track_ratio_metrics_on_to_off", (), ">= 0.98"),
    ("data_loader", "DataLoader(worker_count=0) / MapDataset",
     data_loader.DataLoaderVsMapDataset, "track_ratio_to_map_dataset", (), "-"),
    ("data_loader", "DataLoader(worker_count=2) / mp_prefetch",
     data_loader.DataLoaderVsMpPrefetch, "track_ratio_to_mp_prefetch", (), "-"),
    ("mixtures", "64 sources / 1 source, IterDataset.mix, records/s (fresh processes)",
     mixtures.SixtyFourSources, "track_throughput_ratio_to_one_source", (), ">= 0.9"),
    ("mixtures", "64 sources / 1 source, IterDataset.mix, threads",
     mixtures.SixtyFourSources, "track_threads_ratio_to_one_source", (), "<= 2"),
    ("mixtures", "64 sources / 1 source, IterDataset.mix, peak RSS",
     mixtures.SixtyFourSources, "track_rss_ratio_to_one_source", (), "<= 1.5"),
    ("mixtures", "64 sources through MapDataset.mix / 1 source, records/s",
     mixtures.SixtyFourSources, "track_map_mix_throughput_ratio_to_one_source", (), ">= 0.9"),
    ("data_loader_images", "images, DataLoader(worker_count=2) / mp_prefetch, built in the timing",
     data_loader.DataLoaderVsMpPrefetchImages, "track_ratio_to_mp_prefetch", (), ">= 0.95"),
    ("autotune", "images, autotuned from 0 workers, its last 3 of 10 s / best fixed of 0-2 workers",
     autotune.RuntimeAutotune, "track_ratio_autotuned_to_best_fixed", (), ">= 0.9"),
    ("autotune", "images, autotuned from 0 workers, its first 10 s / 0 workers fixed",
     autotune.RuntimeAutotune, "track_ratio_autotuned_to_default", (), ">= 1.0"),
    ("autotune", "images, the next iterator of the autotuned dataset, its 4 s / best fixed",
     autotune.RuntimeAutotune, "track_ratio_next_iterator_to_best_fixed", (), ">= 0.9"),
    ("ray", "images, 2 Ray workers / 2 local workers on one host, CPU per chunk",
     ray.ImagesOnRay, "track_cpu_per_chunk_ratio_to_local", (), "<= 1.2"),
    ("ray", "images, 2 Ray workers / 2 local workers on one host, images/s",
     ray.ImagesOnRay, "track_ratio_to_mp_prefetch", (), ">= 0.9"),
    ("autotune_demo", "chute demo's loop, autotuned from 0 workers, last 3 of 10 s / best fixed",
     autotune_demo.DemoAutotune, "track_ratio_autotuned_to_best_fixed", (), ">= 0.9"),
    ("autotune_demo",
     "chute demo's loop, autotuned from 0 workers, its first 10 s / 0 workers fixed",
     autotune_demo.DemoAutotune, "track_ratio_autotuned_to_default", (), ">= 1.0"),
    ("autotune_demo", "chute demo's loop, the next iterator of the autotuned dataset / best fixed",
     autotune_demo.DemoAutotune, "track_ratio_next_iterator_to_best_fixed", (), ">= 0.9"),
]  # fmt: skip


def _holds(value: float, target: str) -> str:
    if target == "-":
        return ""
    operator, bound = target.split()
    ok = {">=": value >= float(bound), "<": value < float(bound), "<=": value <= float(bound)}
    return "met" if ok[operator] else "NOT met"


def _cache(cls: type) -> tuple[Any, ...]:
    """What `cls().setup_cache` returns, as the first parameter asv gives (none if it has none).

    The Ray benchmarks' `setup_cache` takes `watched`: their shared cluster is kept while
    this process lives, until `_release` stops it.
    """
    bench = cls()
    if not hasattr(bench, "setup_cache"):
        return ()
    watching = "watched" in inspect.signature(bench.setup_cache).parameters
    return (bench.setup_cache(os.getpid()) if watching else bench.setup_cache(),)


def _release(cache: tuple[Any, ...]) -> None:
    """Stops what a `setup_cache` left running (a shared Ray cluster's keeper)."""
    if cache and isinstance(cache[0], dict) and cache[0].get("keeper") is not None:
        stop_cluster(cache[0])


def _measure(cls: type, method: str, params: tuple[Any, ...]) -> list[float] | str:
    """`REPEATS` calls of `cls().method(*params)`, between its `setup` and `teardown`.

    Or why it was skipped: its `setup` raised `NotImplementedError` (as asv skips it).
    """
    bench = cls()
    setup = getattr(bench, "setup", None)
    if setup is not None:
        try:
            setup(*params)
        except NotImplementedError as skipped:
            return str(skipped)
    try:
        return [getattr(bench, method)(*params) for _ in range(REPEATS)]
    finally:
        teardown = getattr(bench, "teardown", None)
        if teardown is not None:
            teardown(*params)


def main(names: list[str]) -> None:
    """Measures the targets named (all if none) and prints one line per figure.

    A class's `setup_cache` runs once, before its first row, and what it left running
    stops after its last row; a row whose `setup` raises `NotImplementedError` (a
    dependency missing) is reported as skipped.
    """
    known = {target[0] for target in TARGETS}
    unknown = sorted(set(names) - known)
    if unknown:
        raise SystemExit(f"unknown names {unknown}; choose from {sorted(known)}")
    rows = [target for target in TARGETS if not names or target[0] in names]
    last = {target[2]: index for index, target in enumerate(rows)}
    caches: dict[type, tuple[Any, ...]] = {}
    try:
        for index, (_, figure, cls, method, params, target) in enumerate(rows):
            if cls not in caches:
                caches[cls] = _cache(cls)
            before = os.getloadavg()[0]
            try:
                values = _measure(cls, method, (*caches[cls], *params))
            finally:
                if last[cls] == index:
                    _release(caches.pop(cls))
            if isinstance(values, str):
                print(f"{figure}: skipped ({values})", flush=True)
                continue
            after = os.getloadavg()[0]
            median = statistics.median(values)
            print(
                f"{figure}: {median:.3g} (target {target}: {_holds(median, target)}); "
                f"values {[round(v, 3) for v in values]}; load {before:.2f} -> {after:.2f}",
                flush=True,
            )
    finally:
        for cache in caches.values():
            _release(cache)  # After an error.


if __name__ == "__main__":
    main(sys.argv[1:])
