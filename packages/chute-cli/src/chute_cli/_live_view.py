"""The live view of `chute top` and `chute bench --live`: metrics text in, a table out.

A `Reading` is one scrape of chute's metrics (Prometheus' text format, from an
endpoint or from `chute.metrics.prometheus_text()` in the same process). `Rates`
compares two readings: per stage, elements per second, own time per element and its
share of the time there was (of N x wall for stages on N workers); per pipeline, the
share of wall time the training loop waited for input, and the bottleneck. `render`
lays them out with `rich`, an optional dependency (`pip install 'chute-cli[top]'`).
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from collections.abc import Iterable
from typing import Any

from ._common import EXIT_USAGE, CliError

__all__ = ["PipelineRates", "Reading", "StageRates", "rates", "read_text", "render", "rich_module"]

_WAITING = ("mp_prefetch(", "ray_prefetch(")  # Stages whose own time waits for workers.


def rich_module(name: str) -> Any:
    """`rich.<name>`, or a usage error naming the extra that installs it."""
    try:
        return importlib.import_module(f"rich.{name}")
    except ImportError:
        raise CliError(
            "the live view needs rich and prometheus-client: pip install 'chute-cli[top]'",
            EXIT_USAGE,
        ) from None


@dataclasses.dataclass(frozen=True)
class Reading:
    """One scrape: each series' value by metric name (as exposed) and label pairs."""

    at: float
    values: dict[tuple[str, frozenset[tuple[str, str]]], float]

    def get(self, name: str, **labels: str) -> float:
        """A series' value, 0 if absent."""
        return self.values.get((name, frozenset(labels.items())), 0.0)

    def series(self, name: str) -> list[tuple[dict[str, str], float]]:
        """Every series of metric `name`, in the order they came."""
        return [(dict(labels), v) for (n, labels), v in self.values.items() if n == name]


def read_text(text: str, at: float | None = None) -> Reading:
    r"""Parses Prometheus' text format (`_bucket` series are left out: not shown).

    Example:
        >>> reading = read_text('chute_workers_parked 2.0\n', at=0.0)
        >>> reading.get("chute_workers_parked")
        2.0
    """
    parser = importlib.import_module("prometheus_client.parser")
    values: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                continue
            values[(sample.name, frozenset(sample.labels.items()))] = float(sample.value)
    return Reading(time.monotonic() if at is None else at, values)


@dataclasses.dataclass(frozen=True)
class StageRates:
    """One stage between two readings."""

    name: str
    elements_per_second: float
    seconds_per_element: float | None
    share: float  # Own time over the time there was (N x wall for N workers).
    workers: int
    total: float  # Elements so far.


@dataclasses.dataclass(frozen=True)
class PipelineRates:
    """One pipeline between two readings."""

    name: str
    stages: tuple[StageRates, ...]
    input_wait: float | None  # Share of wall time next() kept the loop waiting.
    waits_per_second: float
    skipped: float
    workers_alive: int
    workers_asked: int
    pool_starts: int

    @property
    def bottleneck(self) -> StageRates | None:
        """The stage with the largest share; for a wait on workers, the workers' busiest.

        Example:
            >>> fast = StageRates("map", 10.0, 0.01, 0.1, 0, 10)
            >>> slow = StageRates("decode", 10.0, 0.05, 0.5, 0, 10)
            >>> PipelineRates("p", (fast, slow), 0.2, 1.0, 0, 0, 0, 0).bottleneck.name
            'decode'
        """
        top = max(self.stages, key=lambda stage: stage.share, default=None)
        if top is not None and top.name.startswith(_WAITING):
            in_workers = [stage for stage in self.stages if stage.workers]
            return max(in_workers, key=lambda stage: stage.share, default=top)
        return top


def rates(before: Reading, now: Reading) -> list[PipelineRates]:
    r"""What happened between two readings, per pipeline (in the order they appear).

    Example:
        Two seconds apart: the consumer waited 1 s in `next()`, the prefetch's own
        time (1.5 s) is the wait for the workers, and `decode` kept 2 workers 80% busy,
        so `decode` is the bottleneck:

        >>> text = (
        ...     'chute_stage_elements_total{{pipeline="p",stage="mp_prefetch(n=2)"}} {a}\n'
        ...     'chute_stage_seconds_total{{pipeline="p",stage="mp_prefetch(n=2)"}} {b}\n'
        ...     'chute_stage_elements_total{{pipeline="p",stage="decode"}} {c}\n'
        ...     'chute_stage_seconds_total{{pipeline="p",stage="decode"}} {d}\n'
        ...     'chute_stage_workers{{pipeline="p",stage="decode"}} 2\n'
        ...     'chute_input_wait_seconds_sum{{pipeline="p"}} {e}\n'
        ...     'chute_input_wait_seconds_count{{pipeline="p"}} {f}\n'
        ... )
        >>> before = read_text(text.format(a=0, b=0, c=0, d=0, e=0, f=0), at=10.0)
        >>> now = read_text(text.format(a=100, b=1.5, c=3200, d=3.2, e=1, f=100), at=12.0)
        >>> (pipeline,) = rates(before, now)
        >>> waiting, decode = pipeline.stages
        >>> waiting.elements_per_second, waiting.share, pipeline.input_wait
        (50.0, 0.75, 0.5)
        >>> decode.elements_per_second, round(decode.share, 6), decode.seconds_per_element
        (1600.0, 0.8, 0.001)
        >>> pipeline.bottleneck is decode
        True
    """
    wall = max(now.at - before.at, 1e-9)
    pipelines: dict[str, list[StageRates]] = {}
    for labels, total in now.series("chute_stage_elements_total"):
        pipeline, stage = labels.get("pipeline", ""), labels.get("stage", "")
        elements = total - before.get("chute_stage_elements_total", **labels)
        seconds = now.get("chute_stage_seconds_total", **labels) - before.get(
            "chute_stage_seconds_total", **labels
        )
        workers = int(now.get("chute_stage_workers", **labels))
        pipelines.setdefault(pipeline, []).append(
            StageRates(
                name=stage,
                elements_per_second=elements / wall,
                seconds_per_element=seconds / elements if elements > 0 else None,
                share=max(0.0, seconds) / (wall * max(1, workers)),
                workers=workers,
                total=total,
            )
        )
    found = []
    for pipeline, stages in pipelines.items():
        labels = {"pipeline": pipeline}
        waited = now.get("chute_input_wait_seconds_sum", **labels) - before.get(
            "chute_input_wait_seconds_sum", **labels
        )
        calls = now.get("chute_input_wait_seconds_count", **labels) - before.get(
            "chute_input_wait_seconds_count", **labels
        )
        alive = _sum_of(now, "chute_workers_alive", pipeline)
        starts = _sum_of(now, "chute_worker_pool_starts", pipeline)
        found.append(
            PipelineRates(
                name=pipeline,
                stages=tuple(stages),
                input_wait=min(1.0, waited / wall) if calls > 0 else None,
                waits_per_second=calls / wall,
                skipped=now.get("chute_skipped_elements_total", **labels),
                workers_alive=int(alive),
                workers_asked=max((s.workers for s in stages), default=0),
                pool_starts=int(starts),
            )
        )
    return found


def _sum_of(reading: Reading, name: str, pipeline: str) -> float:
    """The sum of a metric's series of one pipeline (over its stages)."""
    return sum(v for labels, v in reading.series(name) if labels.get("pipeline") == pipeline)


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def _bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


def render(source: str, pipelines: Iterable[PipelineRates], before: Reading, now: Reading) -> Any:
    """The view as a `rich` renderable: a title line, then a table per pipeline."""
    table_module, text_module = rich_module("table"), rich_module("text")
    console_module = rich_module("console")
    wall = max(now.at - before.at, 1e-9)
    parts: list[Any] = []
    shm = now.get("chute_shm_bytes")
    storage = now.get("chute_storage_read_bytes_total") - before.get(
        "chute_storage_read_bytes_total"
    )
    header = text_module.Text()
    header.append("chute top", style="bold")
    header.append(f"  {source}  ")
    header.append(f"parked workers {int(now.get('chute_workers_parked'))}  ")
    header.append(f"shared memory {_bytes(shm)}  ")
    header.append(f"object storage {_bytes(storage / wall)}/s")
    parts.append(header)
    shown = False
    for pipeline in pipelines:
        shown = True
        table = table_module.Table(title=_title(pipeline), title_justify="left", expand=False)
        table.add_column("stage", no_wrap=True, overflow="ellipsis", max_width=48)
        for column in ("where", "elements/s", "time/element", "share", "elements"):
            table.add_column(column, justify="left" if column == "where" else "right", no_wrap=True)
        top = pipeline.bottleneck
        for stage in pipeline.stages:
            where = f"{stage.workers} workers" if stage.workers else "this process"
            style = "bold red" if stage is top and stage.share > 0 else None
            table.add_row(
                stage.name,
                where,
                f"{stage.elements_per_second:,.1f}",
                _time(stage.seconds_per_element),
                f"{stage.share:.0%}",
                f"{stage.total:,.0f}",
                style=style,
            )
        parts.append(table)
        line = f"bottleneck: {top.name}" if top is not None and top.share > 0 else "bottleneck: -"
        parts.append(text_module.Text(line, style="bold"))
    if not shown:
        parts.append(text_module.Text("no metered pipeline yet (is it running with metrics on?)"))
    return console_module.Group(*parts)


def _title(pipeline: PipelineRates) -> str:
    wait = "-" if pipeline.input_wait is None else f"{pipeline.input_wait:.0%}"
    title = f"pipeline {pipeline.name}  input wait {wait}  next() {pipeline.waits_per_second:.1f}/s"
    if pipeline.workers_asked:
        title += f"  workers {pipeline.workers_alive}/{pipeline.workers_asked} alive"
        if pipeline.pool_starts > 1:
            title += f" (started {pipeline.pool_starts} times)"
    if pipeline.skipped:
        title += f"  skipped {pipeline.skipped:,.0f}"
    return title
