"""Fault scenarios under an error budget (`skip_errors`); shared by the tests and the figures.

Each `run_*` function builds a pipeline on two worker processes with
`IterDataset.skip_errors(...)`, injects faults at places chosen by `seed`, iterates to
the end or to the error, and returns a `BudgetOutcome`: what was yielded, what was
skipped (from the iterator and from its statistics), the checkpoint state at the end,
the exception if the budget ran out, and the seconds from the fault to it.
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
from typing import Any

import numpy as np

import chute
from chute_testing.execution import FailOn

MILLION = 1_000_000
NUM_RECORDS = 2000


@dataclasses.dataclass
class BudgetOutcome:
    """What one run of a budget scenario gave."""

    got: list[Any]
    skipped: list[chute.SkippedElement]
    stats_skipped: int
    state: Any
    error: BaseException | None
    seconds: float  # From the fault to the exception (or to the end of the run).
    faults: list[int]  # Where the faults were put (positions).
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


def options() -> chute.MultiprocessingOptions:
    return chute.MultiprocessingOptions(num_workers=2, worker_timeout=30.0)


def _drain(
    it: Any, fault_time: float | None = None
) -> tuple[list[Any], BaseException | None, float]:
    got: list[Any] = []
    start = time.monotonic() if fault_time is None else fault_time
    error: BaseException | None = None
    try:
        for element in it:
            got.append(element)
    except Exception as caught:
        error = caught
    return got, error, time.monotonic() - start


def _outcome(
    it: Any, got: list[Any], error: BaseException | None, seconds: float, faults: list[int]
) -> BudgetOutcome:
    outcome = BudgetOutcome(
        got=got,
        skipped=list(it.skipped),
        stats_skipped=it.stats().skipped,
        state=it.get_state(),
        error=error,
        seconds=seconds,
        faults=faults,
    )
    it.close()
    return outcome


# --- one transform raising on one element in a million --------------------------------


def million_pipeline(fail_at: int, workers: int = 2) -> chute.IterDataset:
    return (
        chute.MapDataset.range(MILLION)
        .to_iter_dataset()
        .map(FailOn({fail_at}))
        .mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=4096)
        .skip_errors(max_failures=1)
    )


def million_fault(seed: int) -> int:
    """The element that fails, for `seed`: at position 100_000 or later."""
    return random.Random(seed).randrange(100_000, MILLION)


def run_one_in_a_million(seed: int) -> BudgetOutcome:
    """`FailOn({fault})` over `range(1_000_000)`, skip up to 1: all but the one come out."""
    fail_at = million_fault(seed)
    it = million_pipeline(fail_at).iter(stats=True)
    got, error, seconds = _drain(it)
    return _outcome(it, got, error, seconds, [fail_at])


# --- records that fail to decode -----------------------------------------------------


def _record(i: int) -> dict[str, Any]:
    return {"i": i, "x": np.random.default_rng(i).integers(0, 2**31, 64, dtype=np.int64)}


def is_record(element: Any, i: int) -> bool:
    return (
        isinstance(element, dict)
        and element.get("i") == i
        and np.array_equal(element.get("x"), _record(i)["x"])
    )


def corrupt_file(seed: int, folder: str, count: int = 3) -> tuple[str, list[int]]:
    """200 records of which `count` (seeded) are junk behind the codec's magic bytes."""
    rng = random.Random(seed)
    bad = sorted(rng.sample(range(200), count))
    records = [chute.encode_record(_record(i)) for i in range(200)]
    for position in bad:
        junk = bytearray(records[position])
        junk[8:24] = rng.randbytes(16)
        records[position] = bytes(junk)
    (path,) = chute.write_array_record(records, os.path.join(folder, f"bad-{seed}"), encode=False)
    return path, bad


def corrupt_pipeline(path: str, max_failures: int) -> chute.IterDataset:
    return (
        chute.MapDataset.source(chute.ArrayRecordSource(path, decode=False))
        .to_iter_dataset()
        .map(chute.decode_record)
        .mp_prefetch(options(), chunk_size=8)
        .skip_errors(max_failures=max_failures)
    )


def run_corrupt_records(seed: int, folder: str, max_failures: int = 5) -> BudgetOutcome:
    """Three corrupt records among 200, skipped: the 197 others come out, in order."""
    path, bad = corrupt_file(seed, folder)
    it = corrupt_pipeline(path, max_failures).iter(stats=True)
    got, error, seconds = _drain(it)
    outcome = _outcome(it, got, error, seconds, bad)
    outcome.extra["path"] = path
    return outcome


# --- a file truncated mid-epoch ------------------------------------------------------


def run_truncated_file(seed: int, folder: str) -> BudgetOutcome:
    """A file cut short mid-epoch: every later record fails, so the budget runs out."""
    rng = random.Random(seed)
    (path,) = chute.write_array_record(
        (_record(i) for i in range(NUM_RECORDS)), os.path.join(folder, f"cut-{seed}")
    )
    keep = rng.uniform(0.3, 0.7)
    read_first = rng.randrange(50, 150)
    ds = (
        chute.MapDataset.source(chute.ArrayRecordSource(path, decode=True))
        .to_iter_dataset()
        .mp_prefetch(options(), chunk_size=16)
        .skip_errors(max_failures=3, max_failure_rate=0.001)
    )
    it = ds.iter(stats=True)
    got = [next(it) for _ in range(read_first)]
    os.truncate(path, int(os.path.getsize(path) * keep))
    rest, error, seconds = _drain(it, time.monotonic())
    outcome = _outcome(it, got + rest, error, seconds, [read_first])
    outcome.extra["path"] = path
    return outcome


# --- two hosts, each skipping in its own share ----------------------------------------


def host_pipeline(host: int, failing: frozenset[int], workers: int = 2) -> chute.IterDataset:
    return (
        chute.MapDataset.range(600)
        .seed(7)
        .shuffle()
        .shard(host, 2)
        .to_iter_dataset()
        .map(FailOn(failing))
        .mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=16)
        .skip_errors(max_failures=10)
        .batch(8)
    )


def failing_elements(seed: int) -> frozenset[int]:
    return frozenset(random.Random(seed).sample(range(600), 8))
