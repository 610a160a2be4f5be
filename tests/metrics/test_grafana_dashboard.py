"""The Grafana dashboard in the docs is tidy and cannot drift from the metrics chute exports.

It is not loaded into a Grafana here: the test checks its layout, that every metric
its queries name is one `chute.metrics.METRICS` exports (under the name Prometheus
shows) and that every metric has a panel, and that every query is valid PromQL as
Prometheus' own `promtool` parses it. `promtool` comes with Debian's `prometheus`
package, which `.ci/run` installs (and sets `CHUTE_REQUIRE_PROMETHEUS=1`, so a missing
`promtool` fails there rather than skips).
"""

import itertools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import chute

DASHBOARD = (
    Path(__file__).resolve().parents[2]
    / "docs"
    / "pages"
    / "guides"
    / "chute-grafana-dashboard.json"
)
METRIC_NAME = re.compile(r"chute_[a-z_]+")
# What Grafana replaces before a query reaches Prometheus, as a value it could take.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$pipeline": ".*"}


def _exposed_names() -> dict[str, str]:
    """Each series name Prometheus shows for chute's metrics, to the metric's name."""
    suffixes = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}
    return {
        info.name + suffix: info.name
        for info in chute.metrics.METRICS
        for suffix in suffixes[info.kind]
    }


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def _panels(dashboard: dict) -> list[dict]:
    """Every panel, rows and the panels of collapsed rows included."""
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def _queries(dashboard: dict) -> list[tuple[str, str]]:
    """`(where, expr)` of every panel's query."""
    return [
        (f"panel {panel['id']} ({panel['title']}) {target['refId']}", target["expr"])
        for panel in _panels(dashboard)
        for target in panel.get("targets", [])
    ]


def test_the_dashboard_is_an_importable_grafana_dashboard(dashboard):
    assert dashboard["uid"] == "chute-pipelines"
    assert dashboard["title"] == "chute: input pipelines"
    assert dashboard["schemaVersion"] == 39
    assert dashboard["refresh"] == "10s"
    assert dashboard["time"] == {"from": "now-30m", "to": "now"}
    assert [(i["name"], i["pluginId"]) for i in dashboard["__inputs"]] == [
        ("DS_PROMETHEUS", "prometheus")
    ]
    required = {(r["type"], r["id"]) for r in dashboard["__requires"]}
    kinds = {p["type"] for p in _panels(dashboard)} - {"row"}
    assert {("grafana", "grafana"), ("datasource", "prometheus")} <= required
    assert {("panel", kind) for kind in kinds} <= required
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    pipeline = variables["pipeline"]
    assert pipeline["multi"] and pipeline["includeAll"]
    assert pipeline["definition"] == "label_values(chute_stage_elements_total, pipeline)"
    # Every query asks the data source the variable picks.
    for panel in _panels(dashboard):
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


def test_panels_have_unique_ids_descriptions_and_do_not_overlap(dashboard):
    panels = _panels(dashboard)
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["y"] >= 0 and grid["w"] > 0 and grid["h"] > 0
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["description"].strip(), panel["title"]
            assert panel["targets"], panel["title"]
    for one, other in itertools.combinations(panels, 2):
        a, b = one["gridPos"], other["gridPos"]
        apart = (
            a["x"] + a["w"] <= b["x"]
            or b["x"] + b["w"] <= a["x"]
            or a["y"] + a["h"] <= b["y"]
            or b["y"] + b["h"] <= a["y"]
        )
        assert apart, f"{one['title']!r} overlaps {other['title']!r}"


def test_every_query_names_exported_metrics_and_every_metric_has_a_panel(dashboard):
    exposed = _exposed_names()
    used = set()
    for where, expr in _queries(dashboard):
        names = METRIC_NAME.findall(expr)
        assert names, where
        for name in names:
            assert name in exposed, f"{where}: {name} is not a series chute exports"
            used.add(exposed[name])
    unused = {info.name for info in chute.metrics.METRICS} - used
    assert not unused, f"metrics without a panel: {sorted(unused)}"


def test_every_query_is_valid_promql(dashboard, tmp_path):
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CHUTE_REQUIRE_PROMETHEUS"):
            pytest.fail("promtool is missing (Debian's prometheus package)")
        pytest.skip("promtool is missing (Debian's prometheus package)")
    rules = []
    for number, (where, expr) in enumerate(_queries(dashboard)):
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, f"{where}: a Grafana variable the test does not know"
        rules.append({"record": f"dashboard:query_{number}", "expr": expr})
    # JSON is YAML: a rules file with one recording rule per query.
    path = tmp_path / "rules.yml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=30
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules)} rules found" in checked.stdout
