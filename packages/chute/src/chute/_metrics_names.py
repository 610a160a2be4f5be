"""The metrics chute exports: names, kinds, units, labels and what each one means.

One table, read by the exporters (Prometheus, OpenTelemetry), by `chute top` and by
the observability guide's test, so a metric is described once. Names follow
Prometheus' conventions: a `chute_` prefix, base units (seconds, bytes) in the name,
`_total` on counters (Prometheus' client adds it; OpenTelemetry names go without).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

__all__ = ["ELEMENT_BUCKETS", "METRICS", "MetricInfo", "metric"]

Kind = Literal["counter", "gauge", "histogram"]

ELEMENT_BUCKETS = (
    *(scale * 10.0**power for power in range(-6, 1) for scale in (1.0, 2.5, 5.0)),
    10.0,
)
"""Upper bounds (seconds) of the histograms' buckets: 1 us to 10 s, three per decade."""


@dataclasses.dataclass(frozen=True)
class MetricInfo:
    """One exported metric.

    Attributes:
        name: without `_total` for counters (e.g. `chute_stage_elements`).
        kind: counter, gauge or histogram.
        labels: the labels every sample carries, in order.
        help: what it measures, in one sentence (Prometheus' HELP line).
    """

    name: str
    kind: Kind
    labels: tuple[str, ...]
    help: str

    @property
    def exposed(self) -> str:
        """The name Prometheus shows (`_total` added to counters)."""
        return f"{self.name}_total" if self.kind == "counter" else self.name


_STAGE = ("pipeline", "stage")

METRICS: tuple[MetricInfo, ...] = (
    MetricInfo(
        "chute_stage_elements",
        "counter",
        _STAGE,
        "Elements a stage produced (in worker processes too, summed over the workers).",
    ),
    MetricInfo(
        "chute_stage_seconds",
        "counter",
        _STAGE,
        "Seconds a stage spent on its own work, not waiting for its inputs (summed over workers).",
    ),
    MetricInfo(
        "chute_stage_element_seconds",
        "histogram",
        _STAGE,
        "A stage's own seconds per element (for workers' stages: each chunk's mean, once "
        "per element).",
    ),
    MetricInfo(
        "chute_stage_workers",
        "gauge",
        _STAGE,
        "Worker processes a live iterator runs the stage on (0: the training process).",
    ),
    MetricInfo(
        "chute_input_wait_seconds",
        "histogram",
        ("pipeline",),
        "Seconds each next() on the pipeline kept the training loop waiting.",
    ),
    MetricInfo(
        "chute_input_wait_ratio",
        "gauge",
        ("pipeline",),
        "Share of wall time since their first element that the live iterators' next() "
        "calls kept the training loop waiting (0 to 1).",
    ),
    MetricInfo(
        "chute_buffer_elements",
        "gauge",
        _STAGE,
        "What a prefetching stage holds ready or on its way: elements (a thread) or "
        "chunks (workers).",
    ),
    MetricInfo(
        "chute_buffer_capacity",
        "gauge",
        _STAGE,
        "How many elements or chunks a prefetching stage keeps at most.",
    ),
    MetricInfo(
        "chute_workers_alive",
        "gauge",
        _STAGE,
        "Worker processes of a live iterator that are running now.",
    ),
    MetricInfo(
        "chute_worker_pool_starts",
        "gauge",
        _STAGE,
        "Times a live iterator started its worker processes (above 1: started again "
        "after a worker died or a restore).",
    ),
    MetricInfo(
        "chute_workers_parked",
        "gauge",
        (),
        "Worker processes of ended iterators, parked for the next iterator to take over.",
    ),
    MetricInfo(
        "chute_skipped_elements",
        "counter",
        ("pipeline",),
        "Elements left out because they failed, under a skip_errors budget.",
    ),
    MetricInfo(
        "chute_shm_bytes",
        "gauge",
        (),
        "Bytes of shared-memory files this process and its workers hold now.",
    ),
    MetricInfo(
        "chute_shm_written_bytes",
        "counter",
        (),
        "Bytes written into shared memory to carry elements from workers.",
    ),
    MetricInfo(
        "chute_storage_requests",
        "counter",
        ("op",),
        "Requests made to object storage (op: get, head, list, put, delete).",
    ),
    MetricInfo(
        "chute_storage_read_bytes",
        "counter",
        (),
        "Bytes of object bodies read from object storage.",
    ),
    MetricInfo(
        "chute_storage_retries",
        "counter",
        (),
        "Requests to object storage tried again after a transient failure.",
    ),
    MetricInfo(
        "chute_cache_hits",
        "counter",
        ("cache",),
        "Lookups a cache answered (cache: which one).",
    ),
    MetricInfo(
        "chute_cache_misses",
        "counter",
        ("cache",),
        "Lookups a cache could not answer (cache: which one).",
    ),
    MetricInfo(
        "chute_device_put_bytes",
        "counter",
        (),
        "Bytes of arrays prefetched onto accelerators.",
    ),
)
"""Every metric, in the order the exporters list them."""

_BY_NAME = {info.name: info for info in METRICS}


def metric(name: str) -> MetricInfo:
    """The metric called `name` (without `_total`).

    Example:
        >>> metric("chute_stage_elements").exposed
        'chute_stage_elements_total'
    """
    return _BY_NAME[name]
