"""Timing the workloads: samples, rotation, the GIL probe, time to first byte."""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._libraries import LIBRARIES, Library, LocalPread, _http
from ._setup import BUCKET, CHILD_TIMEOUT, FIRST, GIB, KIB, ROOT, Endpoint, Reads, cpu_of

# --------------------------------------------------------------------------- measuring


@dataclass
class Sample:
    wall: float
    cpu: float  # this process, all threads
    server_cpu: float
    nbytes: int


@dataclass
class Case:
    group: str  # "ranges", "whole", ...
    label: str
    libraries: list[str]
    run: Callable[[Library], list[Any]]
    expected: Callable[[LocalPread], list[Any]]
    nbytes: int
    note: str = ""
    samples: dict[str, list[Sample]] = field(default_factory=dict)

    def median(self, name: str, attr: str) -> float:
        return statistics.median(getattr(s, attr) for s in self.samples[name])

    def mb_per_s(self, name: str) -> float:
        return statistics.median(s.nbytes / s.wall / 1e6 for s in self.samples[name])

    def cpu_per_gib(self, name: str, attr: str = "cpu") -> float:
        return statistics.median(getattr(s, attr) / (s.nbytes / GIB) for s in self.samples[name])


def timed(endpoint: Endpoint, fn: Callable[[], list[Any]]) -> tuple[Sample, list[Any]]:
    server = cpu_of(endpoint.server_pid)
    cpu = time.process_time()
    wall = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    return Sample(wall, cpu, cpu_of(endpoint.server_pid) - server, 0), out


def check(case: Case, name: str, got: list[Any], local: LocalPread) -> None:
    want = case.expected(local)
    if len(got) != len(want) or any(bytes(g) != w for g, w in zip(got, want, strict=True)):
        raise AssertionError(f"{name} returned wrong bytes in {case.label!r}")


def rotated(names: Sequence[str], turn: int) -> list[str]:
    turn %= len(names)
    return [*names[turn:], *names[:turn]]


def run_cases(
    cases: list[Case], libs: dict[str, Library], endpoint: Endpoint, repeats: int
) -> None:
    local = libs["pread"]
    assert isinstance(local, LocalPread)
    for turn in range(repeats):
        for case in cases:
            for name in rotated(case.libraries, turn):
                sample, got = timed(endpoint, lambda: case.run(libs[name]))  # noqa: B023
                sample.nbytes = case.nbytes
                case.samples.setdefault(name, []).append(sample)
                if turn == 0:
                    check(case, name, got, local)
                del got
        print(f"  run {turn + 1}/{repeats} done", file=sys.stderr)


def spin(stop: threading.Event, out: list[float]) -> None:
    """A CPU-bound pure-Python loop; appends its rate (loops per second)."""
    start, count = time.perf_counter(), 0
    while not stop.is_set():
        for _ in range(1000):
            count += 1
    out.append(count / (time.perf_counter() - start))


def with_spinner(fn: Callable[[], Any]) -> tuple[float, float]:
    stop, rate = threading.Event(), []
    thread = threading.Thread(target=spin, args=(stop, rate))
    thread.start()
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    stop.set()
    thread.join()
    return seconds, rate[0]


def spin_alone(seconds: float = 0.5) -> float:
    return with_spinner(lambda: time.sleep(seconds))[1]


def gil_probe(
    libs: dict[str, Library], names: list[str], reads: Reads, repeats: int
) -> dict[str, tuple[float, float]]:
    """Per library: (read time with a spinning thread / without, spinner rate / alone)."""
    slow: dict[str, list[float]] = {name: [] for name in names}
    kept: dict[str, list[float]] = {name: [] for name in names}
    for turn in range(repeats):
        alone = spin_alone()
        for name in rotated(names, turn):
            lib = libs[name]
            start = time.perf_counter()
            lib.ranges(reads)
            bare = time.perf_counter() - start
            seconds, rate = with_spinner(lambda: lib.ranges(reads))  # noqa: B023
            slow[name].append(seconds / bare)
            kept[name].append(rate / alone)
    return {n: (statistics.median(slow[n]), statistics.median(kept[n])) for n in names}


def first_byte_in_process(
    endpoint: Endpoint, names: list[str], key: str, repeats: int
) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in names}
    for turn in range(repeats):
        for name in rotated(names, turn):
            start = time.perf_counter()
            got = LIBRARIES[name].first_byte(endpoint, key)
            times[name].append(time.perf_counter() - start)
            assert len(got) == FIRST
    return {name: statistics.median(t) for name, t in times.items()}


FIRST_BYTE_CHILD = """
import json, sys, time
start = time.perf_counter()
from benchmarks.compare.object_storage import LIBRARIES, Endpoint
name, port, root, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
got = LIBRARIES[name].first_byte(Endpoint(port, root), key)
assert len(got) == 16384
print(json.dumps(time.perf_counter() - start))
"""


def first_byte_fresh_process(
    endpoint: Endpoint, names: list[str], key: str, repeats: int
) -> dict[str, float]:
    """Imports, a client and HEAD + first bytes, timed inside a new interpreter."""
    times: dict[str, list[float]] = {name: [] for name in names}
    for turn in range(repeats):
        for name in rotated(names, turn):
            argv = [sys.executable, "-c", FIRST_BYTE_CHILD, name, str(endpoint.port)]
            done = subprocess.run(
                [*argv, endpoint.root, key], capture_output=True, text=True, cwd=ROOT, check=True
            )
            times[name].append(json.loads(done.stdout))
    return {name: statistics.median(t) for name, t in times.items()}


def server_cost(endpoint: Endpoint, keys: dict[int, str], count: int = 15) -> dict[int, float]:
    """Median seconds of one unsigned 16 KiB range GET (no library) by object size."""
    out: dict[int, float] = {}
    rng = random.Random(1)
    for size, key in keys.items():
        times = []
        for _ in range(count):
            start = rng.randrange(size - 16 * KIB)
            began = time.perf_counter()
            _http(
                endpoint.port,
                "GET",
                f"/{BUCKET}/{key}",
                {"Range": f"bytes={start}-{start + 16383}"},
            )
            times.append(time.perf_counter() - began)
        out[size] = statistics.median(times)
    return out


# --------------------------------------------------------------------------- features


def in_child(
    code: str,
    env: dict[str, str] | None = None,
    timeout: float = CHILD_TIMEOUT,
    replace: bool = False,
) -> str:
    """Runs `code` in a fresh interpreter; returns its last output line, or why none.

    `env` adds to this process's environment, or replaces it (`replace=True`).
    """
    full = dict(env or {}) if replace else {**os.environ, **(env or {})}
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=full,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return f"no answer in {timeout:.0f} s"
    lines = (done.stdout.strip() or done.stderr.strip() or f"exit {done.returncode}").splitlines()
    return lines[-1][:160]
