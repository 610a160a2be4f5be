"""chute's metrics through OpenTelemetry's SDK: the same figures as Prometheus gets."""

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import chute
from chute.metrics import METRICS, value


@pytest.fixture
def reader():
    chute.metrics.reset()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    chute.metrics.instrument(provider)
    yield reader
    chute.metrics.disable()
    provider.shutdown()


def _points(reader):
    """{(metric name, frozenset of attributes): value} of one collection."""
    found = {}
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    found[(metric.name, frozenset(point.attributes.items()))] = point.value
                found.setdefault(metric.name, metric.unit)
    return found


def test_instrumenting_turns_metrics_on_and_exports_every_metric(reader):
    ds = chute.MapDataset.range(40).to_iter_dataset().map(abs).batch(8)
    assert len(list(ds.iter())) == 5  # Metered: instrument() turned metrics on.
    points = _points(reader)
    (label,) = {
        dict(attributes)["pipeline"]
        for key, attributes in [k for k in points if isinstance(k, tuple)]
        if key == "chute_stage_elements"
    }
    stage = frozenset({"pipeline": label, "stage": "map(fn=abs)"}.items())
    assert points[("chute_stage_elements", stage)] == 40
    assert points[("chute_stage_element_seconds_count", stage)] == 40
    assert points[("chute_stage_element_seconds_sum", stage)] == pytest.approx(
        value("chute_stage_seconds", pipeline=label, stage="map(fn=abs)")
    )
    waits = frozenset({"pipeline": label}.items())
    assert points[("chute_input_wait_seconds_count", waits)] == 6
    assert points["chute_stage_seconds"] == "s"
    assert points["chute_shm_bytes"] == "By"
    names = {info.name for info in METRICS if info.kind != "histogram"}
    names |= {f"{i.name}_{p}" for i in METRICS if i.kind == "histogram" for p in ("sum", "count")}
    exported = {key for key in points if isinstance(key, str)}
    # Instruments with no series yet (e.g. no worker running) export no points.
    assert exported <= names
    assert {"chute_stage_elements", "chute_workers_parked", "chute_shm_bytes"} <= exported
