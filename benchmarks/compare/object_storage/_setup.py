"""The servers, the objects and the reads the comparison uses."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
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
