"""Live metrics of running pipelines, for Prometheus and OpenTelemetry.

Off by default. `chute.metrics.serve(port)` turns them on for the iterators made
afterwards and serves them at `http://127.0.0.1:<port>/metrics` (as does the
environment variable `CHUTE_METRICS_PORT`, read at the first `ds.iter()`);
`ds.iter(metrics="train")` meters one iterator under the label `pipeline="train"`
whether or not they are on. Every metric is listed in `METRICS` and in the guide
"Watching a pipeline run". Worker processes' and Ray tasks' figures arrive with their
results and are counted in the training process: one endpoint per process.

A metered iterator is timed as `ds.iter(stats=True)` times it: about 0.2 us per stage
and `next()`, per batch for a pipeline that batches early. Nothing is computed for an
exporter until it asks (a scrape).

Example:
    >>> import chute
    >>> ds = chute.MapDataset.range(8).to_iter_dataset().batch(4)
    >>> _ = list(ds.iter(metrics="doc"))
    >>> chute.metrics.value("chute_stage_elements", pipeline="doc", stage="to_iter_dataset()")
    8.0
"""

from __future__ import annotations

import os
import threading
import warnings

from chute_core import ChuteError, InvalidArgumentError

from ._metrics_names import METRICS, MetricInfo
from ._metrics_otel import instrument
from ._metrics_prometheus import MetricsServer, collector, prometheus_text, serve_http
from ._metrics_store import STORE

__all__ = [
    "METRICS",
    "PORT_ENV",
    "MetricInfo",
    "MetricsServer",
    "collector",
    "disable",
    "enable",
    "enabled",
    "instrument",
    "prometheus_text",
    "reset",
    "serve",
    "value",
]

PORT_ENV = "CHUTE_METRICS_PORT"
"""Set to a port number: the first `ds.iter()` of the process serves metrics there.

If the port is taken (another process of the job serves there), the process warns and
goes on, its iterators metered but not served. `CHUTE_METRICS_HOST` sets the address
to listen on (127.0.0.1 by default).
"""

_FROM_ENV = threading.Lock()
_ENV_READ = threading.Event()  # Set once `$CHUTE_METRICS_PORT` was read (once per process).


def enable() -> None:
    """Meters every iterator made from now on (`ds.iter(metrics=False)` opts one out)."""
    STORE.enabled = True


def disable() -> None:
    """Stops metering iterators made from now on (those running keep their meters)."""
    STORE.enabled = False


def enabled() -> bool:
    """Whether iterators made now are metered by default."""
    return STORE.enabled


def reset() -> None:
    """Forgets every total counted so far (the process's own counters excepted)."""
    STORE.clear()


def serve(port: int = 9464, host: str = "127.0.0.1") -> MetricsServer:
    """Turns metrics on and serves them for Prometheus at `http://host:port/metrics`.

    Args:
        port: the port to listen on (0: any free one; read it from `.port`).
        host: the address to listen on; the default answers this machine only. Use
            "0.0.0.0" for a Prometheus server elsewhere (the metrics hold stage names,
            which may name your functions).

    Returns:
        The running endpoint; `close()` stops it.

    Raises:
        ChuteError: prometheus-client is not installed, or the port is taken.

    Example:
        >>> import urllib.request
        >>> with serve(port=0) as server:
        ...     text = urllib.request.urlopen(server.url).read().decode()
        >>> "chute_workers_parked" in text
        True
        >>> disable()  # Serving turned metrics on for later iterators: off again.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InvalidArgumentError(f"chute.metrics.serve: port must be 0..65535, got {port!r}.")
    server = serve_http(port, host)
    enable()
    return server


def serve_from_environment() -> MetricsServer | None:
    """Serves on `$CHUTE_METRICS_PORT` if it is set, once per process (at first `iter`)."""
    if _ENV_READ.is_set():
        return None
    with _FROM_ENV:
        if _ENV_READ.is_set():
            return None
        _ENV_READ.set()
        text = os.environ.get(PORT_ENV, "").strip()
        if not text:
            return None
        if not text.isdigit():
            raise InvalidArgumentError(f"${PORT_ENV} must be a port number, got {text!r}.")
        try:
            return serve(int(text), os.environ.get("CHUTE_METRICS_HOST", "127.0.0.1"))
        except ChuteError as error:
            # Another process of the job (its launcher, another rank) serves there:
            # training goes on, metered, without an endpoint of its own.
            warnings.warn(f"{error}; this process's metrics are not served", stacklevel=3)
            enable()
            return None


def value(name: str, **labels: str) -> float | None:
    """The value of one series now (a histogram's: its sum), or None if there is none.

    Args:
        name: the metric's name, without `_total` (see `METRICS`).
        labels: every label of the series.

    Example:
        >>> value("chute_workers_parked") is not None
        True
    """
    for family in STORE.families():
        if family.info.name != name:
            continue
        wanted = tuple(labels.get(label, "") for label in family.info.labels)
        for values, found in family.samples:
            if values == wanted:
                return found
        for series in family.histograms:
            if series.labels == wanted:
                return series.sum
    return None
