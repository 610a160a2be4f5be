"""The performance targets of issue 21, measured by the asv benchmarks' own `track_` methods.

`uv run --frozen python -m benchmarks.targets [NAME ...]` calls each benchmark's
`track_` method 5 times in this process and prints the median, every value, the load
average before and after, and whether the target holds. NAMES (all by default):
`per_element`, `images`, `images_steady`, `arrays`, `arrays_steady`, `cold`, `warm`,
`restore`, `data_loader`. Timings on a shared 2-core machine are noisy: read the load
average with each figure.
"""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

from . import bench_checkpoint as checkpoint
from . import bench_data_loader as data_loader
from . import bench_datasets as datasets
from . import bench_execution_workers as workers

REPEATS = 5


def _bench(cls: type, *params: Any) -> Any:
    """An instance of the asv benchmark class `cls`, set up (`teardown` gets `params`)."""
    bench = cls()
    bench.setup(*params)
    bench.params_used = params
    return bench


def _targets() -> dict[str, list[tuple[str, Callable[[], Callable[[], float]], str]]]:
    """Per name: (figure, a maker of the measurement, the target), made only when run."""
    images = lambda: _bench(workers.ImagePipeline)  # noqa: E731
    arrays = lambda: _bench(workers.LargeArrays)  # noqa: E731
    first = lambda: _bench(workers.TimeToFirstBatch)  # noqa: E731
    return {
        "per_element": [
            (
                "0 workers, range -> shuffle -> map -> batch(256) / plain loop",
                lambda: _bench(datasets.ShuffleMapBatch).track_ratio_to_plain_loop,
                ">= 0.9",
            )
        ],
        "images": [
            (
                "images, 2 workers / 1-core plain loop, start included",
                lambda: images().track_ratio_two_workers_to_plain_loop,
                ">= 1.6",
            )
        ],
        "images_steady": [
            (
                "images, 2 workers / 1-core plain loop, after the first batch",
                lambda: images().track_steady_ratio_two_workers_to_plain_loop,
                ">= 1.6",
            )
        ],
        "arrays": [
            (
                "2 MiB arrays, 2 workers / memcpy, start included",
                lambda: arrays().track_ratio_to_memcpy,
                ">= 0.5",
            )
        ],
        "arrays_steady": [
            (
                "2 MiB arrays, 2 workers / memcpy, steady state",
                lambda: arrays().track_steady_ratio_to_memcpy,
                ">= 0.7",
            )
        ],
        "cold": [
            (
                "first batch, 2 workers, first loader of a process (s)",
                lambda: first().track_cold_first_batch_seconds,
                "< 0.150",
            )
        ],
        "warm": [
            (
                "first batch, 2 workers, second loader (s)",
                lambda: first().track_warm_first_batch_seconds,
                "< 0.060",
            )
        ],
        "restore": [
            (
                f"restore + first batch minus a fresh first batch, {n} workers (ms)",
                lambda n=n: _with_params(_bench(checkpoint.RestoreFirstBatch, n), n),
                "<= 3",
            )
            for n in (0, 2)
        ],
        "data_loader": [
            (
                "DataLoader(worker_count=0) / MapDataset",
                lambda: _bench(data_loader.DataLoaderVsMapDataset).track_ratio_to_map_dataset,
                "-",
            ),
            (
                "DataLoader(worker_count=2) / mp_prefetch",
                lambda: _bench(data_loader.DataLoaderVsMpPrefetch).track_ratio_to_mp_prefetch,
                "-",
            ),
        ],
    }


def _with_params(bench: Any, *params: Any) -> Callable[[], float]:
    """`bench.track_restore_minus_fresh_ms(*params)`, as a call without arguments."""

    def measure() -> float:
        value: float = bench.track_restore_minus_fresh_ms(*params)
        return value

    measure.bench = bench  # type: ignore[attr-defined]
    return measure


def _holds(value: float, target: str) -> str:
    if target == "-":
        return ""
    operator, bound = target.split()
    ok = {">=": value >= float(bound), "<": value < float(bound), "<=": value <= float(bound)}
    return "met" if ok[operator] else "NOT met"


def main(names: list[str]) -> None:
    """Measures the targets named (all if none) and prints one line per figure."""
    targets = _targets()
    unknown = sorted(set(names) - set(targets))
    if unknown:
        raise SystemExit(f"unknown names {unknown}; choose from {sorted(targets)}")
    for name in names or list(targets):
        for figure, make, target in targets[name]:
            measure = make()
            before = os.getloadavg()[0]
            try:
                values = [measure() for _ in range(REPEATS)]
            finally:
                bench = getattr(measure, "bench", None) or getattr(measure, "__self__", None)
                teardown = getattr(bench, "teardown", None)
                if teardown is not None:
                    teardown(*getattr(bench, "params_used", ()))
            after = os.getloadavg()[0]
            median = statistics.median(values)
            print(
                f"{figure}: {median:.3g} (target {target}: {_holds(median, target)}); "
                f"values {[round(v, 3) for v in values]}; load {before:.2f} -> {after:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1:])
