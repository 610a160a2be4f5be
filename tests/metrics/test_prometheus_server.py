"""A real Prometheus server scrapes a running pipeline's endpoint and finds its series.

Debian's `prometheus` package (`.ci/run` installs it, and sets
`CHUTE_REQUIRE_PROMETHEUS=1` so that a missing server fails rather than skips there).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).parent
PROMETHEUS = shutil.which("prometheus")
WORKERS_STAGE = "map(fn=features)"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _query(api: str, expression: str) -> list[dict]:
    url = f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    with urllib.request.urlopen(url, timeout=10) as answer:
        body = json.load(answer)
    assert body["status"] == "success", body
    return body["data"]["result"]


def _wait_for(api: str, expression: str, deadline: float) -> list[dict]:
    """The query's series, once Prometheus has them (it scrapes every second)."""
    while True:
        try:
            found = _query(api, expression)
        except OSError:
            found = []
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


@pytest.fixture
def training(tmp_path):
    port, log = _free_port(), tmp_path / "training.err"
    with log.open("w") as errors:
        process = subprocess.Popen(
            [sys.executable, str(HERE / "serve_pipeline.py"), str(port)],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    try:
        assert process.stdout.readline().strip() == "ready", log.read_text()
        yield port
    finally:
        process.kill()
        process.wait()
        process.stdout.close()


@pytest.mark.slow
def test_prometheus_scrapes_the_pipeline_and_its_workers(training, tmp_path):
    if PROMETHEUS is None:
        if os.environ.get("CHUTE_REQUIRE_PROMETHEUS"):
            pytest.fail("prometheus is not installed (apt-get install prometheus)")
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n"
        "scrape_configs:\n  - job_name: chute\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{training}']\n"
    )
    web = _free_port()
    with (tmp_path / "prometheus.log").open("w") as log:
        server = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{web}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    api = f"http://127.0.0.1:{web}"
    try:
        deadline = time.monotonic() + 90
        up = _wait_for(api, 'up{job="chute"} == 1', deadline)
        assert up, (tmp_path / "prometheus.log").read_text()[-2000:]
        selector = f'pipeline="train",stage="{WORKERS_STAGE}"'
        # Two scrapes at least, so that a rate is defined and shows the workers' progress.
        rate = _wait_for(api, f"rate(chute_stage_elements_total{{{selector}}}[10s]) > 0", deadline)
        assert rate, "no growing series for the stage that runs in the workers"
        (workers,) = _query(api, f"chute_stage_workers{{{selector}}}")
        assert workers["value"][1] == "2"
        (alive,) = _query(api, 'chute_workers_alive{pipeline="train"}')
        assert alive["value"][1] == "2"
        (elements,) = _query(api, f"chute_stage_elements_total{{{selector}}}")
        (seconds,) = _query(api, f"chute_stage_seconds_total{{{selector}}}")
        # Each record sleeps 0.5 ms in a worker: its own time per element is at least that.
        assert float(seconds["value"][1]) / float(elements["value"][1]) >= 0.0005
        (waits,) = _query(api, 'chute_input_wait_seconds_count{pipeline="train"}')
        assert float(waits["value"][1]) >= 1
        (ratio,) = _query(api, 'chute_input_wait_ratio{pipeline="train"}')
        assert 0 <= float(ratio["value"][1]) <= 1
        (shm,) = _query(api, "chute_shm_written_bytes_total")
        assert float(shm["value"][1]) > 0  # The workers' results, read through shared memory.
        buckets = _query(api, f'chute_stage_element_seconds_bucket{{{selector},le="+Inf"}}')
        assert float(buckets[0]["value"][1]) == float(elements["value"][1])
    finally:
        server.terminate()
        server.wait(timeout=30)
