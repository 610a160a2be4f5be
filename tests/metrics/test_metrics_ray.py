"""Metrics of a pipeline whose stages run as Ray tasks, on a local Ray cluster.

The tasks run the plan in Ray's worker processes; their stage times and counters come
back with each result and are counted in the driver, as for local worker processes.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

ray = pytest.importorskip("ray")  # An extra: the chute layer's own environment lacks it.

import chute  # noqa: E402
from chute.metrics import value  # noqa: E402

pytestmark = pytest.mark.slow  # A Ray cluster takes seconds to start.

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@pytest.fixture(scope="module", autouse=True)
def cluster():
    started = not ray.is_initialized()
    if started:
        with warnings.catch_warnings():  # Ray forks to exec its processes: jax's warning.
            warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


def _row(x):
    return np.full(64, x, np.int64)


def test_stages_in_ray_tasks_are_counted_in_the_driver():
    chute.metrics.reset()
    ds = chute.MapDataset.range(120).to_iter_dataset().map(_row)
    ds = ds.ray_prefetch(chute.RayOptions(num_workers=2), chunk_size=10)
    it = ds.iter(metrics="ray")
    got = [int(row[0]) for row in it]
    assert got == list(range(120))
    assert value("chute_stage_elements", pipeline="ray", stage="map(fn=_row)") == 120
    assert value("chute_stage_elements", pipeline="ray", stage="to_iter_dataset()") == 120
    assert value("chute_stage_elements", pipeline="ray", stage="ray_prefetch(num_workers=2)") == 120
    seconds = value("chute_stage_seconds", pipeline="ray", stage="map(fn=_row)")
    assert seconds is not None and seconds > 0
    text = chute.metrics.prometheus_text()
    assert 'chute_stage_workers{pipeline="ray",stage="map(fn=_row)"} 2.0' in text.splitlines()
