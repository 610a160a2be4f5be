"""chute's metrics for OpenTelemetry: observable instruments read at each collection.

OpenTelemetry has no asynchronous histogram, so each histogram goes out as two
observable counters, `<name>_sum` and `<name>_count` (the mean per element is their
ratio); Prometheus gets the buckets. Only `opentelemetry-api` is needed here
(`pip install 'chute[otel]'`); the SDK and exporter are the application's.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from chute_core import ChuteError

from ._metrics_names import METRICS, MetricInfo
from ._metrics_store import STORE, Family

__all__ = ["instrument", "unit_of"]

_FRESH_SECONDS = 0.25  # One snapshot serves every instrument of one collection.


def unit_of(name: str) -> str:
    """The UCUM unit OpenTelemetry wants for the metric `name`.

    Example:
        >>> unit_of("chute_stage_seconds"), unit_of("chute_shm_bytes"), unit_of("chute_cache_hits")
        ('s', 'By', '1')
    """
    if name.endswith("_seconds"):
        return "s"
    if name.endswith("_bytes"):
        return "By"
    return "1"


class _Snapshot:
    """`STORE.families()`, taken at most once per collection."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken = -1.0
        self._families: dict[str, Family] = {}

    def family(self, name: str) -> Family:
        with self._lock:
            now = time.monotonic()
            if now - self._taken > _FRESH_SECONDS:
                self._families = {f.info.name: f for f in STORE.families()}
                self._taken = now
            return self._families[name]


def instrument(meter_provider: Any = None) -> None:
    """Exports chute's metrics through OpenTelemetry, and turns metrics on.

    Args:
        meter_provider: the `MeterProvider` to make chute's meter with; None: the
            global one (`opentelemetry.metrics.get_meter_provider()`).

    Raises:
        ChuteError: opentelemetry-api is not installed.

    Example:
        >>> from opentelemetry.sdk.metrics import MeterProvider
        >>> from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        >>> reader = InMemoryMetricReader()
        >>> instrument(MeterProvider(metric_readers=[reader]))
        >>> names = {m.name for r in reader.get_metrics_data().resource_metrics
        ...          for s in r.scope_metrics for m in s.metrics}
        >>> "chute_workers_parked" in names
        True
        >>> STORE.enabled = False  # Instrumenting turned metrics on: off again.
    """
    try:
        api = importlib.import_module("opentelemetry.metrics")
    except ImportError as error:
        raise ChuteError(
            "chute.metrics.instrument: OpenTelemetry needs opentelemetry-api: "
            "pip install 'chute[otel]'"
        ) from error
    provider = meter_provider if meter_provider is not None else api.get_meter_provider()
    meter = provider.get_meter("chute")
    snapshot = _Snapshot()
    for info in METRICS:
        if info.kind == "histogram":
            for part in ("sum", "count"):
                meter.create_observable_counter(
                    f"{info.name}_{part}",
                    callbacks=[_observer(api, snapshot, info, part)],
                    unit=unit_of(info.name) if part == "sum" else "1",
                    description=f"{info.help} ({part} of the histogram)",
                )
            continue
        make = meter.create_observable_counter
        if info.kind == "gauge":
            make = meter.create_observable_gauge
        make(
            info.name,
            callbacks=[_observer(api, snapshot, info, "value")],
            unit=unit_of(info.name),
            description=info.help,
        )
    STORE.enabled = True


def _observer(
    api: Any, snapshot: _Snapshot, info: MetricInfo, part: str
) -> Callable[[Any], Iterable[Any]]:
    """The callback of one instrument: the series of `info` now."""

    def observe(options: Any) -> Iterable[Any]:
        family = snapshot.family(info.name)
        if part == "value":
            for values, value in family.samples:
                yield api.Observation(value, dict(zip(info.labels, values, strict=True)))
            return
        for series in family.histograms:
            found = series.sum if part == "sum" else series.count
            yield api.Observation(found, dict(zip(info.labels, series.labels, strict=True)))

    return observe
