"""Measures the fault scenarios of `test_faults.py` over 5 seeds; prints a Markdown table.

Run it as

    uv run --frozen python tests/faults/measure_faults.py

For each scenario and seed it records the seconds from the fault to the error (see
`fault_scenarios.py` for where each clock starts), whether the error was the expected
one, the elements yielded before the error that were wrong, the good elements before the
fault that were not yielded before the error, the elements lost or repeated when the
stream is resumed from `get_state()` after the error (in a pipeline without the fault),
and the chute segments left in `/dev/shm`. It is a measurement, not a test: it exits 0
whatever it finds.

Scenario 6 (Ctrl-C caught in `next()`, then reading on) times the SIGINT to the
`KeyboardInterrupt`, and counts what the same iterator then lost or repeated. Scenario 8
(`/dev/shm` nearly full) runs in a private 64 MiB tmpfs (it needs root, or user
namespaces) and times the last element received to the error; "not yielded" there is
the elements of the chunks before the failing one that did not come. For both, a second
table gives the seconds until the workers were gone: after the program's exit (6), after
`close()` (8).
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import budget_scenarios as bs
import fault_scenarios as fs

import chute

SEEDS = [0, 1, 2, 3, 4]


def _resumed(dataset: chute.IterDataset, state: Any, count: int | None = None) -> list[Any]:
    it = iter(dataset)
    it.set_state(state)
    if count is None:
        return list(it)
    out = [next(it) for _ in range(count)]
    it.close()
    return out


def _lost_and_repeated(expected: list[Any], got: list[Any]) -> tuple[int, int]:
    """Elements of `expected` missing from `got`, and elements of `got` seen twice."""
    keys = [repr(x) for x in got]
    missing = len({repr(x) for x in expected} - set(keys))
    return missing, len(keys) - len(set(keys))


def killed(batch: str) -> Callable[[int], dict[str, Any]]:
    def run(seed: int) -> dict[str, Any]:
        outcome = fs.run_worker_killed(seed, batch)
        expected = [list(range(i, i + fs.BATCH)) for i in range(0, 400, fs.BATCH)]
        got = [np.asarray(b).tolist() for b in outcome.got]
        fault_batch = outcome.fault_at if batch == "before" else outcome.fault_at // fs.BATCH
        rest = [
            np.asarray(b).tolist()
            for b in _resumed(fs.killed_pipeline(batch, -1), outcome.extra["state"])
        ]
        lost, repeated = _lost_and_repeated(expected, got + rest)
        return {
            "outcome": outcome,
            "ok": isinstance(outcome.error, chute.WorkerDiedError)
            and "SIGKILL" in str(outcome.error),
            "wrong": sum(g != e for g, e in zip(got, expected, strict=False)),
            "not_yielded": fault_batch - len(got),
            "lost": lost + repeated,
        }

    return run


def hangs(seed: int) -> dict[str, Any]:
    outcome = fs.run_worker_hangs(seed, 2.0)
    plain = chute.MapDataset.range(400).to_iter_dataset().mp_prefetch(fs.options(), chunk_size=8)
    rest = _resumed(plain, outcome.extra["state"])
    lost, repeated = _lost_and_repeated(list(range(400)), outcome.got + rest)
    return {
        "outcome": outcome,
        "ok": isinstance(outcome.error, chute.WorkerTimeoutError),
        "wrong": sum(g != k for k, g in enumerate(outcome.got)),
        "not_yielded": outcome.fault_at - len(outcome.got),
        "lost": lost + repeated,
    }


def truncated(decode: Any) -> Callable[[int], dict[str, Any]]:
    def run(seed: int) -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as folder:
            outcome = fs.run_truncated_file(seed, folder, decode)
        error = outcome.error
        if isinstance(error, chute.WorkerError) and error.__cause__ is not None:
            error = error.__cause__
        return {
            "outcome": outcome,
            "ok": isinstance(error, chute.SourceFileError | chute.CorruptRecordError)
            and os.path.basename(outcome.extra["path"]) in str(error),
            "wrong": len(outcome.extra["bad"]),
            "not_yielded": None,
            "lost": None,
        }

    return run


def corrupt(seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        outcome = fs.run_corrupt_record(seed, folder)
    found = fs.notes(outcome.error) if outcome.error else ""
    return {
        "outcome": outcome,
        "ok": isinstance(outcome.error, chute.CorruptRecordError)
        and f"map(decode_record) on the element at position {outcome.fault_at}" in found,
        "wrong": sum(not fs.is_record(g, k) for k, g in enumerate(outcome.got)),
        "not_yielded": outcome.fault_at - len(outcome.got),
        "lost": None,
    }


def million(seed: int) -> dict[str, Any]:
    outcome = fs.run_one_in_a_million(seed)
    got = outcome.got
    rest = _resumed(
        fs.million_pipeline(-1), outcome.extra["state"], outcome.fault_at + 10 - len(got)
    )
    expected = list(range(outcome.fault_at + 10))
    return {
        "outcome": outcome,
        "ok": isinstance(outcome.error, ValueError)
        and f"on the element at position {outcome.fault_at}" in fs.notes(outcome.error),
        "wrong": int(np.count_nonzero(np.asarray(got) != np.arange(len(got)))),
        "not_yielded": outcome.fault_at - len(got),
        "lost": 0 if got + rest == expected else len(set(expected) ^ set(got + rest)),
    }


def caught_ctrl_c(seed: int) -> dict[str, Any]:
    result = fs.run_caught_ctrl_c(seed)
    got = result.get("got", [])
    interrupted = result.get("interrupted_s") is not None
    outcome = fs.Outcome(
        got=got,
        error=KeyboardInterrupt() if interrupted else None,
        seconds=result["interrupted_s"] if interrupted else float("nan"),
        fault_at=result["stuck"],
        workers=result.get("workers", []),
        leftovers=result["leftovers"],
    )
    lost, repeated = _lost_and_repeated(list(range(100)), got)
    return {
        "outcome": outcome,
        "ok": result["returncode"] == 0 and interrupted and result["same_state"],
        "wrong": sum(g != k for k, g in enumerate(got)),
        "not_yielded": None,
        "lost": lost + repeated,
        "gone_s": result["workers_gone_s"],
    }


def shm_full(seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        found = fs.run_shm_full([seed], folder)
    if isinstance(found, str):
        raise SystemExit(f"scenario 8 cannot run here: {found}")
    (result,) = found
    named = "MiB free and this needs" in result["message"]
    outcome = fs.Outcome(
        got=list(range(result["got"])),
        error=chute.SharedMemoryError(result["message"]) if result["error_type"] else None,
        seconds=result["error_s"],
        fault_at=result["failed_chunk_start"],
        workers=result["workers"],
        leftovers=result["leftovers"],
    )
    space_back = abs(result["free_after_close_mib"] - result["free_before_mib"]) < 0.1
    return {
        "outcome": outcome,
        "ok": result["error_type"] == "SharedMemoryError" and named and space_back,
        "wrong": result["wrong"] + int(not result["in_order"]),
        "not_yielded": result["failed_chunk_start"] - result["got"],
        "lost": None,
        "gone_s": result["workers_gone_s"],
    }


SCENARIOS: list[tuple[str, str, str, Callable[[int], dict[str, Any]]]] = [
    (
        "1a. worker SIGKILLed, batch before mp_prefetch",
        "WorkerDiedError naming worker and SIGKILL",
        "≤ 5 s",
        killed("before"),
    ),
    (
        "1b. worker SIGKILLed, batch after mp_prefetch",
        "WorkerDiedError naming worker and SIGKILL",
        "≤ 5 s",
        killed("after"),
    ),
    ("2. worker hangs, worker_timeout=2", "WorkerTimeoutError", "≤ 5 s (timeout + 3)", hangs),
    (
        "3a. file truncated mid-epoch, decode=True",
        "chute error naming the file",
        "≤ 10 s",
        truncated(True),
    ),
    (
        "3b. file truncated mid-epoch, decode='auto'",
        "chute error naming the file",
        "≤ 10 s",
        truncated("auto"),
    ),
    ("4. one corrupt record of 200", "CorruptRecordError, stage and position", "≤ 10 s", corrupt),
    (
        "5. map raises on 1 element of 1,000,000",
        "the ValueError, stage and position",
        "≤ 10 s",
        million,
    ),
    (
        "6. Ctrl-C caught in next(), the same iterator goes on",
        "KeyboardInterrupt, then the full stream",
        "≤ 10 s",
        caught_ctrl_c,
    ),
    (
        "8. /dev/shm nearly full (64 MiB tmpfs), 1-2 MiB arrays",
        "SharedMemoryError naming free and needed space",
        "≤ 10 s",
        shm_full,
    ),
]


def budget_million(seed: int) -> dict[str, Any]:
    outcome = bs.run_one_in_a_million(seed)
    (fault,) = outcome.faults
    expected = [x for x in range(bs.MILLION) if x != fault]
    return {
        "outcome": outcome,
        "ok": outcome.error is None and outcome.got == expected and outcome.stats_skipped == 1,
        "lost": 0 if outcome.got == expected else len(set(expected) ^ set(outcome.got)),
    }


def budget_corrupt(seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        outcome = bs.run_corrupt_records(seed, folder)
    good = [i for i in range(200) if i not in outcome.faults]
    exact = len(outcome.got) == len(good) and all(
        bs.is_record(g, i) for g, i in zip(outcome.got, good, strict=False)
    )
    return {
        "outcome": outcome,
        "ok": outcome.error is None and exact and outcome.stats_skipped == 3,
        "lost": len(good)
        - sum(bs.is_record(g, i) for g, i in zip(outcome.got, good, strict=False)),
    }


def budget_truncated(seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        outcome = bs.run_truncated_file(seed, folder)
    return {
        "outcome": outcome,
        "ok": isinstance(outcome.error, chute.ErrorBudgetExceededError)
        and os.path.basename(outcome.extra["path"]) in str(outcome.error),
        "lost": sum(not bs.is_record(g, i) for i, g in enumerate(outcome.got)),
    }


BUDGET_SCENARIOS: list[tuple[str, str, Callable[[int], dict[str, Any]]]] = [
    (
        "B1. map raises on 1 element of 1,000,000, skip_errors(max_failures=1)",
        "that element skipped, 999,999 in order",
        budget_million,
    ),
    (
        "B2. 3 corrupt records of 200, skip_errors(max_failures=5)",
        "those 3 skipped, 197 exact",
        budget_corrupt,
    ),
    (
        "B3. file truncated mid-epoch, skip_errors(3, max_failure_rate=0.001)",
        "budget used up: ErrorBudgetExceededError naming the file",
        budget_truncated,
    ),
]


def budget_table() -> None:
    print(
        "\n| scenario | expected | as expected | skipped, per run | run or error in s, median "
        "(max) | wrong or lost elements |"
    )
    print("|---|---|---|---|---|---|")
    for name, expected, run in BUDGET_SCENARIOS:
        rows = [run(seed) for seed in SEEDS]
        outcomes = [row["outcome"] for row in rows]
        seconds = [o.seconds for o in outcomes]
        skipped = sorted({o.stats_skipped for o in outcomes})
        print(
            f"| {name} | {expected} | {sum(row['ok'] for row in rows)}/{len(rows)} "
            f"| {', '.join(map(str, skipped))} "
            f"| {statistics.median(seconds):.2f} ({max(seconds):.2f}) "
            f"| {sum(row['lost'] for row in rows)} |"
        )


def main() -> None:
    print(f"Python {platform.python_version()}, {os.cpu_count()} cores, seeds {SEEDS}\n")
    print(
        "| scenario | expected | bound | as expected | error in s, median (max) "
        "| wrong elements yielded | good elements before the fault not yielded "
        "| lost or repeated after resume | segments left |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    processes: list[str] = []
    for name, expected, bound, run in SCENARIOS:
        rows = [run(seed) for seed in SEEDS]
        outcomes = [row["outcome"] for row in rows]
        seconds = [o.seconds if o.error is not None else float("nan") for o in outcomes]
        raised = [s for s in seconds if s == s]
        timing = f"{statistics.median(raised):.2f} ({max(raised):.2f})" if raised else "no error"
        if len(raised) < len(seconds):
            timing += f", no error in {len(seconds) - len(raised)} runs"
        errors = sorted({type(o.error).__name__ if o.error else "none" for o in outcomes})
        as_expected = f"{sum(row['ok'] for row in rows)}/{len(rows)} ({', '.join(errors)})"
        not_yielded = [row["not_yielded"] for row in rows]
        lost = [row["lost"] for row in rows]
        print(
            f"| {name} | {expected} | {bound} | {as_expected} | {timing} "
            f"| {sum(row['wrong'] for row in rows)} "
            f"| {'n/a' if None in not_yielded else f'{min(not_yielded)}-{max(not_yielded)}'} "
            f"| {'n/a' if None in lost else sum(lost)} "
            f"| {sum(len(o.leftovers) for o in outcomes)} |"
        )
        if "gone_s" in rows[0]:
            gone = [row["gone_s"] for row in rows]
            processes.append(f"| {name} | {statistics.median(gone):.2f} ({max(gone):.2f}) |")
    print("\nColumns other than the time sum over the 5 seeds; 'not yielded' is a range.")
    print("\n| scenario | workers gone in s, median (max) |\n|---|---|")
    print("\n".join(processes))
    budget_table()


if __name__ == "__main__":
    main()
