"""The process's metrics: running totals per pipeline and stage, and what exporters read.

Metered iterators (see `_metrics_meter`) add to cells here as they run; the cells
outlive the iterators, so a pipeline's counters keep growing across epochs (a new
iterator of the same pipeline adds to the same cells). Gauges (buffers, workers, input
wait share) are read from the iterators still alive. `STORE.families()` gives
everything as plain data, in `_metrics_names.METRICS` order, for any exporter.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import os
import threading
import weakref
from typing import Any

from chute_core.internal import COUNTERS, SHM_PREFIX, shm_dir
from chute_execution.internal import parked_workers

from ._metrics_names import ELEMENT_BUCKETS, METRICS, MetricInfo

__all__ = [
    "STORE",
    "Family",
    "Histogram",
    "PipelineCell",
    "Sample",
    "Series",
    "StageCell",
    "Store",
    "default_label",
]

Sample = tuple[tuple[str, ...], float]
"""Label values (in the metric's label order) and the value."""


@dataclasses.dataclass(frozen=True)
class Histogram:
    """One histogram series: label values, cumulative counts per bucket bound, sum."""

    labels: tuple[str, ...]
    cumulative: tuple[int, ...]  # One per `ELEMENT_BUCKETS` bound, then +Inf.
    sum: float

    @property
    def count(self) -> int:
        """Observations in all (the +Inf bucket)."""
        return self.cumulative[-1]


@dataclasses.dataclass(frozen=True)
class Family:
    """A metric and its series now."""

    info: MetricInfo
    samples: tuple[Sample, ...] = ()
    histograms: tuple[Histogram, ...] = ()


class StageCell:
    """Running totals of one stage of one pipeline (or one pipeline's input wait)."""

    __slots__ = ("counts", "elements", "seconds")

    def __init__(self) -> None:
        self.elements = 0
        self.seconds = 0.0
        self.counts = [0] * (len(ELEMENT_BUCKETS) + 1)

    def observe(self, seconds: float, elements: int = 1) -> None:
        """Adds `elements` that took `seconds` of own time in all."""
        self.seconds += seconds
        if elements > 0:
            self.elements += elements
            self.counts[bisect.bisect_left(ELEMENT_BUCKETS, seconds / elements)] += elements

    def add(self, other: StageCell) -> None:
        """Adds another cell's totals to this one."""
        self.elements += other.elements
        self.seconds += other.seconds
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]

    def histogram(self, labels: tuple[str, ...]) -> Histogram:
        """The cell as a histogram series."""
        total, cumulative = 0, []
        for count in list(self.counts):
            total += count
            cumulative.append(total)
        return Histogram(labels, tuple(cumulative), self.seconds)


class Series:
    """One series' totals: a cell per live iterator, and what ended iterators left.

    Each iterator writes to a cell of its own (no other iterator's figures in the way
    of its `stats()`); when it goes, its cell is folded into `retired`, so the series
    only grows.
    """

    __slots__ = ("live", "retired")

    def __init__(self) -> None:
        self.live: list[StageCell] = []
        self.retired = StageCell()

    def total(self) -> StageCell:
        """The series' totals now."""
        total = StageCell()
        total.add(self.retired)
        for cell in list(self.live):
            total.add(cell)
        return total


class PipelineCell:
    """What one pipeline's iterators share: elements skipped under `skip_errors`."""

    __slots__ = ("skipped",)

    def __init__(self) -> None:
        self.skipped = 0


def default_label(description: str) -> str:
    """The `pipeline` label of an unnamed pipeline: the same for the same pipeline.

    Derived from the pipeline's description (`repr(ds)`), so each epoch's iterator
    and a restarted job's label the same series.

    Example:
        >>> default_label("IterDataset(...)") == default_label("IterDataset(...)")
        True
    """
    return "pipeline-" + hashlib.sha1(description.encode()).hexdigest()[:8]


class Store:
    """Every pipeline's cells, and the live meters (see `_metrics_meter.Meter`)."""

    def __init__(self) -> None:
        self.enabled = False
        """Whether iterators are metered unless they say otherwise (`chute.metrics`)."""
        self.stages: dict[tuple[str, str], Series] = {}
        self.waits: dict[str, Series] = {}  # The consumer's waits: a cell's elements are calls.
        self.pipelines: dict[str, PipelineCell] = {}
        self.meters: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()

    def stage(self, pipeline: str, stage: str, owner: object) -> StageCell:
        """A new cell of `stage` of `pipeline`, for `owner`: folded in when it goes."""
        with self._lock:
            series = self.stages.setdefault((pipeline, stage), Series())
        return self._cell(series, owner)

    def wait(self, pipeline: str, owner: object) -> StageCell:
        """A new cell of `pipeline`'s input waits, for `owner`."""
        with self._lock:
            series = self.waits.setdefault(pipeline, Series())
        return self._cell(series, owner)

    def _cell(self, series: Series, owner: object) -> StageCell:
        cell = StageCell()
        with self._lock:
            series.live.append(cell)
        weakref.finalize(owner, self._retire, series, cell)
        return cell

    def _retire(self, series: Series, cell: StageCell) -> None:
        with self._lock:
            series.live.remove(cell)
            series.retired.add(cell)

    def pipeline(self, pipeline: str) -> PipelineCell:
        """The cell of `pipeline` (made on first use)."""
        with self._lock:
            return self.pipelines.setdefault(pipeline, PipelineCell())

    def clear(self) -> None:
        """Forgets every total (tests; a process that starts measuring afresh)."""
        with self._lock:
            self.stages.clear()
            self.waits.clear()
            self.pipelines.clear()

    def families(self) -> list[Family]:
        """Every metric's series now, in `METRICS` order."""
        with self._lock:
            stages = {key: series.total() for key, series in self.stages.items()}
            wait_totals = {key: series.total() for key, series in self.waits.items()}
            pipelines = dict(self.pipelines)
        meters = list(self.meters)
        found: dict[str, list[Sample]] = {info.name: [] for info in METRICS}
        histograms: dict[str, list[Histogram]] = {info.name: [] for info in METRICS}
        for (pipeline, stage), cell in stages.items():  # In the order the stages run.
            found["chute_stage_elements"].append(((pipeline, stage), float(cell.elements)))
            found["chute_stage_seconds"].append(((pipeline, stage), cell.seconds))
            histograms["chute_stage_element_seconds"].append(cell.histogram((pipeline, stage)))
        for pipeline, calls in sorted(wait_totals.items()):
            histograms["chute_input_wait_seconds"].append(calls.histogram((pipeline,)))
        for pipeline, totals in sorted(pipelines.items()):
            found["chute_skipped_elements"].append(((pipeline,), float(totals.skipped)))
        pids, waits = {os.getpid()}, dict[str, tuple[float, float]]()
        for meter in meters:
            for name, samples in meter.gauges().items():
                found[name].extend(samples)
            pids.update(meter.worker_pids())
            wait, wall = meter.waited()
            if wall > 0:
                before = waits.get(meter.pipeline, (0.0, 0.0))
                waits[meter.pipeline] = (before[0] + wait, before[1] + wall)
        for pipeline, (wait, wall) in sorted(waits.items()):
            found["chute_input_wait_ratio"].append(((pipeline,), min(1.0, wait / wall)))
        found["chute_workers_parked"].append(((), float(parked_workers())))
        found["chute_shm_bytes"].append(((), float(_shm_bytes(pids))))
        for (name, labels), total in sorted(COUNTERS.snapshot().items()):
            metric = f"chute_{name}"
            if metric in found:
                found[metric].append((tuple(value for _, value in labels), total))
        for info in METRICS:  # Unlabelled counters read 0 before their first event.
            if info.kind == "counter" and not info.labels and not found[info.name]:
                found[info.name].append(((), 0.0))
        return [
            Family(info, _summed(found[info.name]), tuple(histograms[info.name]))
            for info in METRICS
        ]


def _summed(samples: list[Sample]) -> tuple[Sample, ...]:
    """One sample per label values: live iterators of one pipeline add up."""
    totals: dict[tuple[str, ...], float] = {}
    for labels, value in samples:
        totals[labels] = totals.get(labels, 0.0) + value
    return tuple(totals.items())


def _shm_bytes(pids: set[int]) -> int:
    """Bytes of chute's shared-memory files owned by the processes `pids`."""
    folder, total = shm_dir(), 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        if not name.startswith(SHM_PREFIX):
            continue
        owner = name[len(SHM_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and int(owner) in pids:
            try:
                total += os.stat(folder / name).st_size
            except OSError:
                continue  # Removed meanwhile.
    return total


STORE = Store()
"""This process's metrics."""
