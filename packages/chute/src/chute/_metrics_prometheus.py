"""chute's metrics for Prometheus: a collector for `prometheus_client`, and an endpoint.

The collector builds the families from `STORE` when Prometheus scrapes, so metering
costs nothing in `prometheus_client` per element. `prometheus-client` is an optional
dependency (`pip install 'chute[metrics]'`), imported when first asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

from chute_core import ChuteError

from ._metrics_endpoint import Endpoint
from ._metrics_names import ELEMENT_BUCKETS
from ._metrics_store import STORE

__all__ = ["MetricsServer", "collector", "prometheus_text", "serve_http"]


def _client() -> Any:
    try:
        return importlib.import_module("prometheus_client")
    except ImportError as error:
        raise ChuteError(
            "chute.metrics: exporting to Prometheus needs prometheus-client: "
            "pip install 'chute[metrics]'"
        ) from error


class _Collector:
    """A `prometheus_client` collector of `STORE` (its `collect` runs at each scrape)."""

    def collect(self) -> Iterator[Any]:
        core = importlib.import_module("prometheus_client.core")
        bounds = [_bound(b) for b in ELEMENT_BUCKETS] + ["+Inf"]
        for family in STORE.families():
            info = family.info
            labels = list(info.labels)
            if info.kind == "histogram":
                made = core.HistogramMetricFamily(info.name, info.help, labels=labels)
                for series in family.histograms:
                    buckets = list(zip(bounds, series.cumulative, strict=True))
                    made.add_metric(list(series.labels), buckets, series.sum)
            elif info.kind == "counter":
                made = core.CounterMetricFamily(info.name, info.help, labels=labels)
                for values, value in family.samples:
                    made.add_metric(list(values), value)
            else:
                made = core.GaugeMetricFamily(info.name, info.help, labels=labels)
                for values, value in family.samples:
                    made.add_metric(list(values), value)
            yield made

    def describe(self) -> list[Any]:
        """Nothing: registering must not scrape (the families are built on demand)."""
        return []


def _bound(value: float) -> str:
    return f"{value:.10g}"


def collector() -> Any:
    """A `prometheus_client` collector of chute's metrics, to register where you like.

    Example:
        >>> import prometheus_client
        >>> registry = prometheus_client.CollectorRegistry()
        >>> registry.register(collector())
        >>> registry.get_sample_value("chute_workers_parked") is not None
        True
    """
    _client()
    return _Collector()


def prometheus_text() -> str:
    """Chute's metrics now, in Prometheus' text format (what the endpoint serves)."""
    client = _client()
    registry = client.CollectorRegistry()
    registry.register(_Collector())
    return str(client.generate_latest(registry).decode())


class MetricsServer:
    """An HTTP endpoint serving chute's metrics at `/metrics`; `close()` stops it.

    Its thread steps aside while chute forks worker processes (see `_metrics_endpoint`),
    so serving metrics keeps the fast way of starting them.
    """

    def __init__(self, host: str, endpoint: Endpoint) -> None:
        self.host = host
        self.port = endpoint.port
        self._endpoint = endpoint

    @property
    def url(self) -> str:
        """Where Prometheus (or `chute top`) reads the metrics."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stops serving (the metrics themselves go on being counted)."""
        self._endpoint.close()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MetricsServer({self.url!r})"


def serve_http(port: int, host: str) -> MetricsServer:
    """Serves a registry holding only chute's collector, on a thread of its own."""
    client = _client()
    registry = client.CollectorRegistry()
    registry.register(_Collector())
    try:
        endpoint = Endpoint(client.make_wsgi_app(registry), host, port)
    except OSError as error:
        raise ChuteError(
            f"chute.metrics.serve: cannot listen on {host}:{port}: {error.strerror or error}"
        ) from error
    return MetricsServer(host, endpoint)
