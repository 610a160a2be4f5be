"""Object-storage libraries for chute's `s3://` and `gs://` URLs, measured side by side.

Run: `uv run --frozen python -m benchmarks.compare.object_storage [--markdown FILE]`
(options: `--repeats 5`, `--reads 512`, `--range-mib 16`, `--no-features`; ~8 minutes on
2 cores).

Starts a moto S3 server itself (a subprocess on a free loopback port), uploads random
objects, and measures obstore, s3fs (fsspec) and pyarrow.fs against it, together with two
references measured in the same run: raw `http.client` GETs with no library (what the
server itself costs) and `os.pread` of local copies of the same objects (a yardstick that
does not depend on the server, so that figures of noisy runs can be compared):

1. random range reads (16 KiB and 256 KiB, from one object and from 16 objects), each
   library with its idiomatic concurrency;
2. whole-object reads (1, 16 and 64 MiB; 8 objects one after another, and 8 at once);
3. time to first byte (HEAD + the first 16 KiB) with a fresh client, in this process and
   in a fresh process (imports included);
4. process CPU seconds (`time.process_time`, all threads) per GiB delivered, for 1 and 2;
5. the GIL: how much a CPU-bound Python thread slows the reads, and the reads slow it.

Every figure is the median of `--repeats` runs, the libraries taking turns in an order
rotated from run to run. Feature checks follow: conditional reads (an object replaced
mid-read), retries and timeouts (against a local endpoint that fails or stalls on
purpose), credentials and endpoint from the environment, fork safety, and which libraries
work as-is against the GCS emulator (gcp-storage-emulator).

moto is slow, and every range GET costs it a copy of the whole object, so its cost per
request grows with the object's size (the "server" table shows it); that is why the range
reads use 16 MiB objects by default (`--range-mib 64` works, at ~35 ms a request). The
`http.client` column is the server's share; what a library adds is the rest, and its
CPU seconds per GiB, which the server does not affect.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import http.server
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUCKET = "chute-bench"
KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
FIRST = 16 * KIB  # bytes read by "time to first byte"
KEY_ID, SECRET, REGION = "testing", "testing", "us-east-1"
CHILD_TIMEOUT = 20.0  # seconds a feature check may take before it counts as a hang


# --------------------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_http(url: str, deadline: float = 30.0) -> None:
    start = time.monotonic()
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            if time.monotonic() - start > deadline:
                raise
            time.sleep(0.1)


@contextlib.contextmanager
def serve(argv: list[str], probe: str) -> Iterator[int]:
    """Runs a server subprocess until the block ends; yields its pid."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_http(probe)
        yield proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) of another process so far (Linux; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


@dataclass
class Endpoint:
    port: int
    root: str  # local copies of the objects, for os.pread
    server_pid: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


# --------------------------------------------------------------------------- data


@dataclass
class Reads:
    """Range reads: (key, start, length) in order, and the same grouped by key."""

    items: list[tuple[str, int, int]]
    by_key: dict[str, tuple[list[int], list[int], list[int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for position, (key, start, length) in enumerate(self.items):
            positions, starts, lengths = self.by_key.setdefault(key, ([], [], []))
            positions.append(position)
            starts.append(start)
            lengths.append(length)

    @property
    def nbytes(self) -> int:
        return sum(length for _, _, length in self.items)


GAP = 4 * KIB  # the least space between two reads of one object


def slots(size: int, length: int) -> int:
    """How many disjoint reads of `length` fit in an object, `GAP` apart."""
    return (size + GAP) // (length + GAP)


def random_reads(keys: Sequence[str], size: int, count: int, length: int, seed: int) -> Reads:
    """`count` reads like a loader's random record reads: disjoint, never touching.

    Records do not overlap, and ranges that touch or overlap would share one request in
    obstore even with coalescing off; so each object is cut into slots (`length` + `GAP`)
    and the reads take distinct slots at random, in random order.
    """
    rng = random.Random(seed)
    per_key = [count // len(keys) + (i < count % len(keys)) for i in range(len(keys))]
    items = []
    for key, n in zip(keys, per_key, strict=True):
        chosen = rng.sample(range(slots(size, length)), n)
        items += [(key, slot * (length + GAP), length) for slot in chosen]
    rng.shuffle(items)
    return Reads(items)


def coalesced(reads: Reads, gap: int) -> tuple[int, int]:
    """Requests and bytes after merging ranges less than `gap` apart (object_store's rule)."""
    requests = fetched = 0
    for _, starts, lengths in reads.by_key.values():
        spans = sorted((s, s + n) for s, n in zip(starts, lengths, strict=True))
        begin, end = spans[0]
        for s, e in spans[1:]:
            if s - end <= gap:
                end = max(end, e)
            else:
                requests, fetched = requests + 1, fetched + end - begin
                begin, end = s, e
        requests, fetched = requests + 1, fetched + end - begin
    return requests, fetched


def upload(endpoint: Endpoint, objects: dict[str, int]) -> None:
    """Puts random objects (public-read, so that unsigned requests may read them)."""
    import boto3
    import numpy as np

    client = boto3.client(
        "s3",
        endpoint_url=endpoint.url,
        region_name=REGION,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
    )
    client.create_bucket(Bucket=BUCKET)

    def put(item: tuple[int, tuple[str, int]]) -> None:
        seed, (key, size) = item
        data = np.random.default_rng(seed).bytes(size)
        path = os.path.join(endpoint.root, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as file:
            file.write(data)
        client.put_object(Bucket=BUCKET, Key=key, Body=data, ACL="public-read")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(put, enumerate(objects.items())))


# --------------------------------------------------------------------------- libraries


class Library:
    """One way of reading the objects; `ranges` and `whole` are what gets timed."""

    name = ""
    label = ""  # the name in tables

    def __init__(self, endpoint: Endpoint, threads: int) -> None:
        self.endpoint = endpoint
        self.pool = ThreadPoolExecutor(threads)
        self.pool8 = ThreadPoolExecutor(8)

    def path(self, key: str) -> str:
        return f"{BUCKET}/{key}"

    def ranges(self, reads: Reads) -> list[Any]:
        raise NotImplementedError

    def read(self, key: str) -> Any:
        raise NotImplementedError

    def whole(self, keys: Sequence[str], at_once: bool) -> list[Any]:
        if at_once:
            return list(self.pool8.map(self.read, keys))
        return [self.read(key) for key in keys]

    @staticmethod
    def first_byte(endpoint: Endpoint, key: str) -> bytes:
        """HEAD and the first FIRST bytes, with a client made for this call."""
        raise NotImplementedError

    def close(self) -> None:
        self.pool.shutdown()
        self.pool8.shutdown()


class LocalPread(Library):
    name, label = "pread", "os.pread (local file)"

    def __init__(self, endpoint: Endpoint, threads: int) -> None:
        super().__init__(endpoint, threads)
        self.fds: dict[str, int] = {}

    def _fd(self, key: str) -> int:
        if key not in self.fds:
            self.fds[key] = os.open(os.path.join(self.endpoint.root, key), os.O_RDONLY)
        return self.fds[key]

    def ranges(self, reads: Reads) -> list[Any]:
        return [os.pread(self._fd(key), length, start) for key, start, length in reads.items]

    def read(self, key: str) -> Any:
        fd = self._fd(key)
        return os.pread(fd, os.fstat(fd).st_size, 0)

    @staticmethod
    def first_byte(endpoint: Endpoint, key: str) -> bytes:
        path = os.path.join(endpoint.root, key)
        os.stat(path)
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.pread(fd, FIRST, 0)
        finally:
            os.close(fd)

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        super().close()


def _http(port: int, method: str, path: str, headers: dict[str, str]) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(method, path, headers=headers)
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    if response.status not in (200, 206):
        raise OSError(f"{method} {path}: HTTP {response.status}")
    return body


class RawHttp(Library):
    """Unsigned GETs with the standard library: the server's own cost, nearly no client's."""

    name, label = "http", "http.client (no library)"

    def get(self, key: str, start: int, length: int) -> bytes:
        rng = {"Range": f"bytes={start}-{start + length - 1}"}
        return _http(self.endpoint.port, "GET", "/" + self.path(key), rng)

    def ranges(self, reads: Reads) -> list[Any]:
        return list(self.pool.map(lambda r: self.get(*r), reads.items))

    def read(self, key: str) -> Any:
        return _http(self.endpoint.port, "GET", "/" + self.path(key), {})

    @staticmethod
    def first_byte(endpoint: Endpoint, key: str) -> bytes:
        _http(endpoint.port, "HEAD", f"/{BUCKET}/{key}", {})
        return _http(endpoint.port, "GET", f"/{BUCKET}/{key}", {"Range": f"bytes=0-{FIRST - 1}"})


def obstore_s3(endpoint: Endpoint, **options: Any) -> Any:
    from obstore.store import S3Store

    client_options = {"allow_http": True, **options.pop("client_options", {})}
    return S3Store(
        BUCKET,
        endpoint=endpoint.url,
        region=REGION,
        access_key_id=KEY_ID,
        secret_access_key=SECRET,
        client_options=client_options,
        **options,
    )


class Obstore(Library):
    """`get_ranges` per object (no coalescing: one request per read, as the others make)."""

    name, label = "obstore", "obstore"
    coalesce = 0

    def __init__(self, endpoint: Endpoint, threads: int) -> None:
        super().__init__(endpoint, threads)
        self.store = obstore_s3(endpoint)

    def ranges(self, reads: Reads) -> list[Any]:
        import obstore

        out: list[Any] = [None] * len(reads.items)

        def one(key: str) -> None:
            positions, starts, lengths = reads.by_key[key]
            got = obstore.get_ranges(
                self.store, key, starts=starts, lengths=lengths, coalesce=self.coalesce
            )
            for position, buffer in zip(positions, got, strict=True):
                out[position] = buffer

        # One call per object; calls for several objects run side by side in threads
        # (each call releases the GIL and runs up to 10 requests at once).
        list(self.pool.map(one, reads.by_key))
        return out

    def read(self, key: str) -> Any:
        import obstore

        return obstore.get(self.store, key).bytes()

    @staticmethod
    def first_byte(endpoint: Endpoint, key: str) -> bytes:
        import obstore

        store = obstore_s3(endpoint)
        obstore.head(store, key)
        return bytes(obstore.get_range(store, key, start=0, length=FIRST))


class ObstoreCoalesced(Obstore):
    """`get_ranges` with its default: ranges less than 1 MiB apart share a request."""

    name, label = "obstore-c", "obstore, coalescing"
    coalesce = MIB


class ObstoreConditional(Obstore):
    """A HEAD per object, then one `get` per read with its ETag as If-Match, from threads.

    What a reader that must notice a replaced object does: `get_ranges` and `get_range`
    take no If-Match, `get` does (one range per call).
    """

    name, label = "obstore-m", "obstore, get + If-Match x threads"

    def ranges(self, reads: Reads) -> list[Any]:
        import obstore

        keys = list(reads.by_key)
        heads = self.pool.map(lambda key: obstore.head(self.store, key)["e_tag"], keys)
        etags = dict(zip(keys, heads, strict=True))

        def one(read: tuple[str, int, int]) -> Any:
            key, start, length = read
            options = {"range": (start, start + length), "if_match": etags[key]}
            return obstore.get(self.store, key, options=options).bytes()

        return list(self.pool.map(one, reads.items))


def s3fs_fs(endpoint: Endpoint, **options: Any) -> Any:
    import s3fs

    return s3fs.S3FileSystem(
        key=KEY_ID,
        secret=SECRET,
        endpoint_url=endpoint.url,
        client_kwargs={"region_name": REGION},
        skip_instance_cache=True,
        **options,
    )


class S3fs(Library):
    """`cat_ranges` (asyncio underneath, in fsspec's I/O thread) and `cat`."""

    name, label = "s3fs", "s3fs (fsspec)"

    def __init__(self, endpoint: Endpoint, threads: int) -> None:
        super().__init__(endpoint, threads)
        self.fs = s3fs_fs(endpoint)

    def ranges(self, reads: Reads) -> list[Any]:
        paths = [self.path(key) for key, _, _ in reads.items]
        starts = [start for _, start, _ in reads.items]
        ends = [start + length for _, start, length in reads.items]
        return list(self.fs.cat_ranges(paths, starts, ends, on_error="raise"))

    def read(self, key: str) -> Any:
        return self.fs.cat_file(self.path(key))

    def whole(self, keys: Sequence[str], at_once: bool) -> list[Any]:
        if at_once:
            paths = [self.path(key) for key in keys]
            got = self.fs.cat(paths, on_error="raise")
            return [got[path] for path in paths]
        return super().whole(keys, at_once)

    @staticmethod
    def first_byte(endpoint: Endpoint, key: str) -> bytes:
        fs = s3fs_fs(endpoint)
        fs.info(f"{BUCKET}/{key}")
        return bytes(fs.cat_file(f"{BUCKET}/{key}", start=0, end=FIRST))


def arrow_s3(endpoint: Endpoint, **options: Any) -> Any:
    import pyarrow.fs

    return pyarrow.fs.S3FileSystem(
        access_key=KEY_ID,
        secret_key=SECRET,
        region=REGION,
        scheme="http",
        endpoint_override=f"127.0.0.1:{endpoint.port}",
        **options,
    )


class PyArrow(Library):
    """`open_input_file` per object (a HEAD each), then `read_at` from a thread pool."""

    name, label = "pyarrow", "pyarrow.fs"

    def __init__(self, endpoint: Endpoint, threads: int) -> None:
        super().__init__(endpoint, threads)
        self.fs = arrow_s3(endpoint)

    def ranges(self, reads: Reads) -> list[Any]:
        keys = list(reads.by_key)
        opened = self.pool.map(self.fs.open_input_file, map(self.path, keys))
        files = dict(zip(keys, opened, strict=True))
        return list(self.pool.map(lambda r: files[r[0]].read_at(r[2], r[1]), reads.items))

    def read(self, key: str) -> Any:
        with self.fs.open_input_file(self.path(key)) as file:
            return file.read()

    @staticmethod
    def first_byte(endpoint: Endpoint, key: str) -> bytes:
        fs = arrow_s3(endpoint)
        with fs.open_input_file(f"{BUCKET}/{key}") as file:  # HEAD
            return bytes(file.read_at(FIRST, 0))


LIBRARIES: dict[str, type[Library]] = {
    cls.name: cls
    for cls in (LocalPread, RawHttp, Obstore, ObstoreCoalesced, ObstoreConditional, S3fs, PyArrow)
}
REFERENCES = ("pread", "http")  # not candidates: never "the best library"


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


def conditional_reads(endpoint: Endpoint) -> dict[str, str]:
    """Reads 16 KiB, replaces the object (same size), reads the next 16 KiB: detected?"""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=endpoint.url,
        region_name=REGION,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
    )
    old, new = b"a" * MIB, b"b" * MIB

    def replace(key: str) -> None:
        client.put_object(Bucket=BUCKET, Key=key, Body=new, ACL="public-read")

    def verdict(second: Any) -> str:
        data = bytes(second)
        return (
            "not detected: returned the new object's bytes"
            if data == new[:16384]
            else ("not detected: returned the old bytes" if data == old[:16384] else "?")
        )

    results: dict[str, str] = {}

    def try_it(name: str, first: Callable[[str], Any], then: Callable[[Any], Any]) -> None:
        key = f"cond/{name}"
        client.put_object(Bucket=BUCKET, Key=key, Body=old, ACL="public-read")
        try:
            handle = first(key)
            replace(key)
            results[name] = verdict(then(handle))
        except Exception as error:
            results[name] = f"detected: {type(error).__name__}"

    import obstore

    store = obstore_s3(endpoint)

    def ob_first(key: str) -> Any:
        etag = obstore.head(store, key)["e_tag"]
        obstore.get(store, key, options={"range": (0, 16384), "if_match": etag}).bytes()
        return key, etag

    def ob_then(handle: Any) -> Any:
        key, etag = handle
        return obstore.get(store, key, options={"range": (16384, 32768), "if_match": etag}).bytes()

    try_it("obstore", ob_first, ob_then)

    def ob_batch_first(key: str) -> str:
        obstore.get_ranges(store, key, starts=[0], lengths=[16384])
        return key

    try_it(
        "obstore get_ranges",
        ob_batch_first,
        lambda key: obstore.get_ranges(store, key, starts=[16384], lengths=[16384])[0],
    )
    fs = s3fs_fs(endpoint)

    def fs_first(key: str) -> Any:
        file = fs.open(f"{BUCKET}/{key}", "rb", block_size=16384, cache_type="none")
        file.read(16384)
        return file

    try_it("s3fs", fs_first, lambda file: file.read(16384))

    def fs_batch_first(key: str) -> str:
        fs.cat_ranges([f"{BUCKET}/{key}"], [0], [16384])
        return key

    try_it(
        "s3fs cat_ranges",
        fs_batch_first,
        lambda key: fs.cat_ranges([f"{BUCKET}/{key}"], [16384], [32768])[0],
    )
    arrow = arrow_s3(endpoint)

    def pa_first(key: str) -> Any:
        file = arrow.open_input_file(f"{BUCKET}/{key}")
        file.read_at(16384, 0)
        return file

    try_it("pyarrow", pa_first, lambda file: file.read_at(16384, 16384))
    try:
        _http(endpoint.port, "GET", f"/{BUCKET}/cond/obstore", {"If-Match": '"stale"'})
        results["server"] = "moto ignored a stale If-Match"
    except OSError as error:
        results["server"] = f"moto honours If-Match ({error})"
    return results


class _Flaky(http.server.BaseHTTPRequestHandler):
    """A tiny S3 look-alike serving 1 MiB at any path.

    A path with "flaky" in it answers 503 twice, then the data; one with "stall" never
    answers (until the check ends).
    """

    protocol_version = "HTTP/1.1"
    counts: dict[str, int] = {}  # noqa: RUF012
    body = bytes(range(256)) * 4096  # 1 MiB
    release = threading.Event()

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, send_body: bool) -> None:
        path = self.path.split("?")[0]
        self.counts[path] = self.counts.get(path, 0) + 1
        if "stall" in path:
            self.release.wait(60)
            return
        if "flaky" in path and self.counts[path] <= 2:
            error = b"<Error><Code>ServiceUnavailable</Code><Message>x</Message></Error>"
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(error)))
            self.end_headers()
            self.wfile.write(error)
            return
        start, end = 0, len(self.body) - 1
        if self.headers.get("Range"):
            first, last = self.headers["Range"].split("=")[1].split("-")
            start, end = int(first), min(int(last), end)
        data = self.body[start : end + 1]
        self.send_response(206 if self.headers.get("Range") else 200)
        self.send_header("Content-Length", str(len(data)))
        if self.headers.get("Range"):
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(self.body)}")
        self.send_header("ETag", '"fixed"')
        self.send_header("Last-Modified", "Wed, 01 Jan 2025 00:00:00 GMT")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if send_body:
            self.wfile.write(data)

    def do_GET(self) -> None:
        with contextlib.suppress(OSError):
            self._answer(True)

    def do_HEAD(self) -> None:
        with contextlib.suppress(OSError):
            self._answer(False)


def retry_check(name: str, port: int, key: str) -> None:
    """Prints how a read of `key` ends against `_Flaky` (in a child).

    Configured: 3 retries with short backoff for "flaky" keys; a 1 s timeout and 1 retry
    for "stall" keys.
    """
    stall = "stall" in key
    if name == "obstore":
        options: dict[str, Any] = (
            {
                "client_options": {"timeout": "1s", "connect_timeout": "1s"},
                "retry_config": {"max_retries": 1, "retry_timeout": timedelta(seconds=5)},
            }
            if stall
            else {
                "retry_config": {
                    "max_retries": 3,
                    "backoff": {
                        "init_backoff": timedelta(milliseconds=20),
                        "max_backoff": timedelta(seconds=1),
                    },
                }
            }
        )
    elif name == "s3fs":
        botocore = {"retries": {"max_attempts": 2 if stall else 4, "mode": "standard"}}
        if stall:
            botocore |= {"read_timeout": 1, "connect_timeout": 1}
        options = {"config_kwargs": botocore}
    else:
        import pyarrow.fs

        strategy = pyarrow.fs.AwsStandardS3RetryStrategy(max_attempts=2 if stall else 4)
        options = {"retry_strategy": strategy}
        if stall:
            options |= {"request_timeout": 1, "connect_timeout": 1}
    start = time.perf_counter()
    try:
        client = make_client(name, Endpoint(port, ""), **options)
        if name == "s3fs" and stall:
            client.retries = 1  # s3fs's own retry loop, around botocore's (default 5)
        read_first(name, client, key, 16)
        print(f"reads after {time.perf_counter() - start:.1f} s")
    except Exception as error:
        print(f"{type(error).__name__} after {time.perf_counter() - start:.1f} s")


def retries_and_timeouts(names: list[str]) -> dict[str, dict[str, str]]:
    """Two 503s then success (retries), and a server that never answers (1 s timeout)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    server.daemon_threads = True
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out: dict[str, dict[str, str]] = {}
    try:
        for name in names:
            flaky, stall = f"flaky-{name}", f"stall-{name}"
            result = _child(f"m.retry_check({name!r}, {port}, {flaky!r})")
            tries = sum(n for path, n in _Flaky.counts.items() if flaky in path)
            out[name] = {"retry": f"{result} ({tries} requests)"}
            result = _child(f"m.retry_check({name!r}, {port}, {stall!r})", timeout=30)
            tries = sum(n for path, n in _Flaky.counts.items() if stall in path)
            out[name]["timeout"] = f"{result} ({tries} requests)"
    finally:
        _Flaky.release.set()
        server.shutdown()
        server.server_close()
    return out


def make_client(name: str, endpoint: Endpoint | None, **options: Any) -> Any:
    """obstore's S3Store, s3fs's S3FileSystem or pyarrow's S3FileSystem.

    With `endpoint=None`, nothing but the bucket is given: keys, region and endpoint
    come from the environment.
    """
    if endpoint is not None:
        return {"obstore": obstore_s3, "s3fs": s3fs_fs, "pyarrow": arrow_s3}[name](
            endpoint, **options
        )
    if name == "obstore":
        from obstore.store import S3Store

        return S3Store(BUCKET, **options)
    if name == "s3fs":
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **options)
    import pyarrow.fs

    return pyarrow.fs.S3FileSystem(**options)


def read_first(name: str, client: Any, key: str, length: int = FIRST) -> bytes:
    if name == "obstore":
        import obstore

        return bytes(obstore.get_range(client, key, start=0, length=length))
    if name == "s3fs":
        return bytes(client.cat_file(f"{BUCKET}/{key}", start=0, end=length))
    with client.open_input_file(f"{BUCKET}/{key}") as file:
        return bytes(file.read_at(length, 0))


def _child(
    call: str,
    env: dict[str, str] | None = None,
    timeout: float = CHILD_TIMEOUT,
    replace: bool = False,
) -> str:
    """Runs `call` (an expression on this module, as `m`) in a fresh interpreter."""
    code = f"import benchmarks.compare.object_storage as m; {call}"
    return in_child(code, env, timeout, replace)


def env_check(name: str, port: int, key: str, endpoint_from_env: bool) -> None:
    """Prints whether a client with no keys given reads a private object (in a child)."""
    endpoint = None if endpoint_from_env else Endpoint(port, "")
    if endpoint is not None and name == "obstore":
        from obstore.store import S3Store

        client = S3Store(BUCKET, endpoint=endpoint.url, client_options={"allow_http": True})
    elif endpoint is not None and name == "s3fs":
        import s3fs

        client = s3fs.S3FileSystem(endpoint_url=endpoint.url, skip_instance_cache=True)
    elif endpoint is not None:
        import pyarrow.fs

        client = pyarrow.fs.S3FileSystem(scheme="http", endpoint_override=f"127.0.0.1:{port}")
    else:
        client = make_client(name, None)
    try:
        print("reads" if len(read_first(name, client, key, 16)) == 16 else "short read")
    except Exception as error:
        print(f"fails: {type(error).__name__}: {str(error).splitlines()[0][:100]}")


def environment_credentials(endpoint: Endpoint, names: list[str]) -> dict[str, list[str]]:
    """Keys from AWS_* variables (endpoint in code), then the endpoint too (AWS_ENDPOINT_URL).

    The object is private, so an unsigned request fails (moto answers 403 to anonymous
    requests): "reads" means the library signed with the variables' keys. Without keys,
    each library's fallback shows (anonymous, or an error).
    """
    import boto3

    boto3.client(
        "s3",
        endpoint_url=endpoint.url,
        region_name=REGION,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
    ).put_object(Bucket=BUCKET, Key="private/env", Body=b"x" * 1024)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BOTO"))}
    base |= {
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
    }
    keys = {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET}
    url = {"AWS_ENDPOINT_URL": endpoint.url, "AWS_ALLOW_HTTP": "true"}
    out = {}
    for name in names:
        call = f"m.env_check({name!r}, {endpoint.port}, 'private/env', " + "{})"
        out[name] = [
            _child(call.format(False), {**base, **keys}, replace=True),
            _child(call.format(False), base, replace=True),
            _child(call.format(True), {**base, **keys, **url}, replace=True),
        ]
    return out


def _fork_worker(name: str, client: Any, key: str, conn: Any) -> None:
    try:
        conn.send("works" if len(read_first(name, client, key)) == FIRST else "short read")
    except Exception as error:
        conn.send(f"fails: {type(error).__name__}: {str(error).splitlines()[0][:80]}")


def fork_check(name: str, port: int, key: str, mode: str) -> None:
    """Prints what a child process gets from a client made before it (in a child)."""
    import multiprocessing
    import signal

    endpoint = Endpoint(port, "")
    if mode == "forkserver":
        # chute's way: the parent used the client; a worker forked from a fresh fork
        # server (which imported the library) gets it pickled.
        context = multiprocessing.get_context("forkserver")
        module = {"obstore": "obstore", "s3fs": "s3fs", "pyarrow": "pyarrow.fs"}[name]
        context.set_forkserver_preload([module, __name__])
        client = make_client(name, endpoint)
        read_first(name, client, key)
        mine, theirs = context.Pipe()
        worker = context.Process(target=_fork_worker, args=(name, client, key, theirs))
        worker.start()
        print(mine.recv() if mine.poll(15) else "hangs (no answer in 15 s)", flush=True)
        worker.kill()
        worker.join()
        return
    client = make_client(name, endpoint)
    if mode != "unused":
        read_first(name, client, key)
    pid = os.fork()
    if pid == 0:
        signal.alarm(10)
        try:
            if mode == "rebuilt":
                client = make_client(name, endpoint)
            os._exit(0 if len(read_first(name, client, key)) == FIRST else 3)
        except BaseException as error:
            print(f"fails: {type(error).__name__}: {str(error).splitlines()[0][:80]}", flush=True)
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        killed = os.WTERMSIG(status) == signal.SIGALRM
        print("hangs (killed after 10 s)" if killed else f"dies: signal {os.WTERMSIG(status)}")
    elif os.WEXITSTATUS(status) == 0:
        print("works")
    elif os.WEXITSTATUS(status) == 3:
        print("short read")


FORK_MODES = {
    "used": "made and used before fork; same client in the child",
    "rebuilt": "made and used before fork; a new client in the child",
    "unused": "made (no request) before fork; used in the child",
    "forkserver": "used in the parent, pickled to a forkserver worker (chute's way)",
}


def fork_safety(endpoint: Endpoint, names: list[str], key: str) -> dict[str, list[str]]:
    return {
        name: [
            _child(f"m.fork_check({name!r}, {endpoint.port}, {key!r}, {mode!r})", timeout=40)
            for mode in FORK_MODES
        ]
        for name in names
    }


GCS_BUCKET = "gcsbench"


def gcs_check(port: int, which: str) -> None:
    """Prints whether one library/configuration reads 16 bytes from the emulator."""
    base = f"http://127.0.0.1:{port}"
    start = time.perf_counter()
    try:
        if which == "obstore":
            import obstore
            from obstore.store import GCSStore

            store = GCSStore(
                GCS_BUCKET,
                base_url=base,
                skip_signature=True,
                client_options={"allow_http": True},
                retry_config={"max_retries": 1},
            )
            data = bytes(obstore.get_range(store, "obj", start=100, length=16))
        elif which in ("gcsfs", "gcsfs-core"):
            if which == "gcsfs":
                from gcsfs import GCSFileSystem
            else:
                from gcsfs.core import GCSFileSystem
            fs = GCSFileSystem(token="anon", endpoint_url=base)
            data = fs.cat_ranges([f"{GCS_BUCKET}/obj"], [100], [116], on_error="raise")[0]
        elif which == "gcsfs-env":
            import gcsfs

            data = gcsfs.GCSFileSystem().cat_file(f"{GCS_BUCKET}/obj", start=100, end=116)
        else:
            import pyarrow.fs

            if which == "pyarrow":
                fs = pyarrow.fs.GcsFileSystem(
                    anonymous=True, scheme="http", endpoint_override=f"127.0.0.1:{port}"
                )
            else:
                fs = pyarrow.fs.GcsFileSystem(anonymous=which == "pyarrow-env-anon")
            data = fs.open_input_file(f"{GCS_BUCKET}/obj").read_at(16, 100)
        assert data == bytes(range(100, 116)), data
        print(f"works ({time.perf_counter() - start:.1f} s)")
    except Exception as error:
        message = str(error).splitlines()[0][:110] if str(error) else ""
        print(f"fails after {time.perf_counter() - start:.1f} s: {type(error).__name__}: {message}")


def gcs_emulator() -> dict[str, str]:
    """Which libraries read a range from gcp-storage-emulator, configured or from env."""
    port = free_port()
    argv = [sys.executable, "-c", "from gcp_storage_emulator.__main__ import main; main()"]
    argv += ["start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"]
    base = f"http://127.0.0.1:{port}"
    with serve(argv, base + "/storage/v1/b?project=x"):
        bucket = json.dumps({"name": GCS_BUCKET}).encode()
        for url, data, kind in (
            (f"{base}/storage/v1/b?project=test", bucket, "application/json"),
            (
                f"{base}/upload/storage/v1/b/{GCS_BUCKET}/o?uploadType=media&name=obj",
                bytes(range(256)) * 4096,
                "application/octet-stream",
            ),
        ):
            request = urllib.request.Request(
                url, data=data, method="POST", headers={"Content-Type": kind}
            )
            urllib.request.urlopen(request).close()
        host = {"STORAGE_EMULATOR_HOST": base}
        off = {**host, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
        cpp = {"CLOUD_STORAGE_EMULATOR_ENDPOINT": base}
        runs = {
            "obstore: GCSStore(base_url=..., skip_signature=True)": ("obstore", {}),
            "gcsfs: GCSFileSystem(token='anon', endpoint_url=...), as installed": ("gcsfs", {}),
            "gcsfs: the same, GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false": ("gcsfs", off),
            "gcsfs: gcsfs.core.GCSFileSystem(token='anon', endpoint_url=...)": ("gcsfs-core", {}),
            "gcsfs: GCSFileSystem(), STORAGE_EMULATOR_HOST (+ the switch above)": (
                "gcsfs-env",
                off,
            ),
            "pyarrow: GcsFileSystem(anonymous=True, scheme='http', endpoint_override=...)": (
                "pyarrow",
                {},
            ),
            "pyarrow: GcsFileSystem(), STORAGE_EMULATOR_HOST": ("pyarrow-env", host),
            "pyarrow: GcsFileSystem(anonymous=True), STORAGE_EMULATOR_HOST": (
                "pyarrow-env-anon",
                host,
            ),
            "pyarrow: GcsFileSystem(anonymous=True), CLOUD_STORAGE_EMULATOR_ENDPOINT": (
                "pyarrow-env-anon",
                cpp,
            ),
        }
        out = {}
        # No metadata server to ask for credentials: fail fast instead of waiting.
        quiet = {"GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9"}
        for label, (which, env) in runs.items():
            out[label] = _child(f"m.gcs_check({port}, {which!r})", {**quiet, **env}, timeout=15)
    return out


# --------------------------------------------------------------------------- tables


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def throughput_tables(cases: list[Case], names: list[str]) -> str:
    header = ["workload", *(LIBRARIES[n].label for n in names)]
    speed, best, base, cpu, server = [], [], [], [], []
    for case in cases:
        rate = {n: case.mb_per_s(n) for n in case.libraries}
        top = max(v for n, v in rate.items() if n not in (*REFERENCES, "obstore-c"))
        speed.append([case.label, *(fmt(rate[n]) if n in rate else "" for n in names)])
        best.append([case.label, *(f"{rate[n] / top:.2f}" if n in rate else "" for n in names)])
        base.append(
            [case.label, *(f"{rate[n] / rate['pread']:.4f}" if n in rate else "" for n in names)]
        )
        cpu.append([case.label, *(fmt(case.cpu_per_gib(n)) if n in rate else "" for n in names)])
        server.append(
            [
                case.label,
                *(fmt(case.cpu_per_gib(n, "server_cpu")) if n in rate else "" for n in names),
            ]
        )
    return "\n\n".join(
        [
            "Throughput, MB/s (bytes delivered / wall time; median):\n\n" + table(header, speed),
            "Throughput as a ratio to the best library in this run (1.00 = best of those "
            "making one request per read; the references and coalescing obstore may exceed "
            "1):\n\n" + table(header, best),
            "Throughput as a ratio to os.pread of a local copy in this run:\n\n"
            + table(header, base),
            "Client CPU seconds per GiB delivered (process CPU time, all threads):\n\n"
            + table(header, cpu),
            "Server (moto) CPU seconds per GiB delivered:\n\n" + table(header, server),
        ]
    )


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reads", type=int, default=512, help="range reads per workload")
    parser.add_argument("--range-mib", type=int, default=16, help="size of the range objects")
    parser.add_argument("--objects", type=int, default=16, help="objects in the multi-object case")
    parser.add_argument("--threads", type=int, default=16, help="thread pools' size")
    parser.add_argument("--markdown", default=None, help="also write the report here")
    parser.add_argument("--no-features", action="store_true", help="skip the feature checks")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    report: list[str] = []

    def say(text: str) -> None:
        print(text + "\n", flush=True)
        report.append(text)

    def progress(what: str) -> None:
        print(f"[{time.perf_counter() - began:4.0f} s] {what}", file=sys.stderr, flush=True)

    with (
        open("/proc/loadavg") if os.path.exists("/proc/loadavg") else contextlib.nullcontext() as f
    ):
        load = f.read().split()[:3] if f else ["?"] * 3
    versions = {}
    for module in ("obstore", "s3fs", "fsspec", "gcsfs", "pyarrow", "moto"):
        versions[module] = __import__(module).__version__
    say(
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average at start "
        f"{' '.join(load)}; " + ", ".join(f"{m} {v}" for m, v in versions.items())
    )

    port = free_port()
    moto = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with (
        tempfile.TemporaryDirectory(prefix="chute-object-storage-") as folder,
        serve(moto, f"http://127.0.0.1:{port}/") as pid,
    ):
        endpoint = Endpoint(port, folder, pid)
        size = args.range_mib * MIB
        range_keys = [f"range/{i:02d}" for i in range(args.objects)]
        whole_sizes = [1, 16, 64]
        objects = {key: size for key in range_keys}
        objects |= {f"whole/{m}/{i}": m * MIB for m in whole_sizes for i in range(8)}
        objects |= {f"sizes/{m}": m * MIB for m in (1, 4, 16, 64)}
        started = time.perf_counter()
        upload(endpoint, objects)
        print(
            f"uploaded {sum(objects.values()) / GIB:.2f} GiB in "
            f"{time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )

        progress("server cost")
        cost = server_cost(endpoint, {m * MIB: f"sizes/{m}" for m in (1, 4, 16, 64)})
        say(
            "Server cost: one unsigned 16 KiB range GET with http.client (no library), "
            "median of 15, by object size:\n\n"
            + table(
                ["object size", "ms per request"],
                [[f"{s // MIB} MiB", f"{t * 1000:.1f}"] for s, t in cost.items()],
            )
        )

        range_names = ["pread", "http", "obstore", "obstore-c", "obstore-m", "s3fs", "pyarrow"]
        whole_names = ["pread", "http", "obstore", "s3fs", "pyarrow"]
        cases: list[Case] = []
        notes = []
        for length in (16 * KIB, 256 * KIB):
            for keys in (range_keys[:1], range_keys):
                count = min(args.reads, slots(size, length) * len(keys))
                reads = random_reads(keys, size, count, length, seed=length + len(keys))
                where = "1 object" if len(keys) == 1 else f"{len(keys)} objects"
                label = f"{count} x {length // KIB} KiB, {where} of {args.range_mib} MiB"
                cases.append(
                    Case(
                        "ranges",
                        label,
                        range_names,
                        lambda lib, r=reads: lib.ranges(r),
                        lambda local, r=reads: local.ranges(r),
                        reads.nbytes,
                    )
                )
                merged = [coalesced(reads, gap) for gap in (0, MIB)]
                notes.append(
                    f"{label}: {reads.nbytes / MIB:.0f} MiB asked; obstore makes "
                    f"{merged[0][0]} requests with coalesce=0, {merged[1][0]} requests "
                    f"for {merged[1][1] / MIB:.0f} MiB with its default coalesce=1 MiB"
                )
        for mib in whole_sizes:
            keys = [f"whole/{mib}/{i}" for i in range(8)]
            for at_once in (False, True):
                how = "8 at once" if at_once else "8 one after another"
                cases.append(
                    Case(
                        "whole",
                        f"whole {mib} MiB objects, {how}",
                        whole_names,
                        lambda lib, k=keys, a=at_once: lib.whole(k, a),
                        lambda local, k=keys: local.whole(k, False),
                        8 * mib * MIB,
                    )
                )
        libs = {name: LIBRARIES[name](endpoint, args.threads) for name in range_names}
        for lib in libs.values():  # warm up: clients, credentials, pools
            lib.ranges(Reads([(range_keys[0], 0, FIRST)]))
        progress("range and whole-object reads")
        run_cases(cases, libs, endpoint, args.repeats)
        say(throughput_tables(cases, range_names))
        say(
            "Requests that obstore's get_ranges makes (every other reader: one per read):\n\n"
            + "\n".join(f"- {n}" for n in notes)
        )

        progress("time to first byte")
        in_process = first_byte_in_process(endpoint, whole_names, "whole/1/0", args.repeats)
        fresh = first_byte_fresh_process(endpoint, whole_names, "whole/1/0", args.repeats)
        say(
            "Time to first byte: HEAD + first 16 KiB of a 1 MiB object, ms (median):\n\n"
            + table(
                ["", *(LIBRARIES[n].label for n in whole_names)],
                [
                    [
                        "new client, this process",
                        *(f"{in_process[n] * 1000:.1f}" for n in whole_names),
                    ],
                    [
                        "new process (imports + client)",
                        *(f"{fresh[n] * 1000:.0f}" for n in whole_names),
                    ],
                ],
            )
        )

        gil_names = ["http", "obstore", "s3fs", "pyarrow"]
        gil_count = max(1, args.reads // 2)  # half: the probe runs each library twice
        gil_reads = random_reads(range_keys, size, gil_count, 16 * KIB, seed=7)
        progress("GIL")
        gil = gil_probe(libs, gil_names, gil_reads, args.repeats)
        say(
            f"GIL: {gil_count} x 16 KiB reads from {len(range_keys)} objects with a CPU-bound "
            "Python thread running alongside (median):\n\n"
            + table(
                ["library", "read time with the thread / without", "thread's speed / alone"],
                [[LIBRARIES[n].label, f"{gil[n][0]:.2f}", f"{gil[n][1]:.2f}"] for n in gil_names],
            )
        )
        for lib in libs.values():
            lib.close()

        if not args.no_features:
            candidates = ["obstore", "s3fs", "pyarrow"]
            progress("feature checks")
            rows = [[k, v] for k, v in conditional_reads(endpoint).items()]
            say(
                "Conditional reads: read 16 KiB, replace the object (same size), read the "
                "next 16 KiB with the same handle:\n\n" + table(["library", "outcome"], rows)
            )
            rows = [[n, *v] for n, v in environment_credentials(endpoint, candidates).items()]
            say(
                "Credentials from the environment, reading a private object (an unsigned "
                "request gets 403):\n\n"
                + table(
                    [
                        "library",
                        "AWS_ACCESS_KEY_ID/SECRET set, endpoint in code",
                        "no keys anywhere",
                        "no arguments at all (AWS_ENDPOINT_URL too)",
                    ],
                    rows,
                )
            )
            rows = [[n, *v] for n, v in fork_safety(endpoint, candidates, "whole/1/0").items()]
            say(
                "Fork safety: a client made before os.fork() (16 KiB read in the child):\n\n"
                + table(["library", *FORK_MODES.values()], rows)
            )
    if not args.no_features:
        progress("retries, timeouts, GCS emulator")
        checks = retries_and_timeouts(candidates)
        say(
            "Retries and timeouts, against a local endpoint that answers 503 twice "
            "(retries configured: 3) or never answers (timeout configured: 1 s, 1 retry):\n\n"
            + table(
                ["library", "503, 503, then data", "no answer"],
                [[n, v["retry"], v["timeout"]] for n, v in checks.items()],
            )
        )
        rows = [[k, v] for k, v in gcs_emulator().items()]
        say(
            "GCS emulator (gcp-storage-emulator, in memory), 16 bytes at offset 100:\n\n"
            + table(["library and configuration", "outcome"], rows)
        )
    with (
        open("/proc/loadavg") if os.path.exists("/proc/loadavg") else contextlib.nullcontext() as f
    ):
        load = f.read().split()[:3] if f else ["?"] * 3
    say(f"Total {time.perf_counter() - began:.0f} s; load average at the end {' '.join(load)}.")
    if args.markdown:
        with open(args.markdown, "w") as file:
            file.write("\n\n".join(report) + "\n")


if __name__ == "__main__":
    main()
