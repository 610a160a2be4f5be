"""Two JAX processes (4 CPU devices each) load as one: global batches equal one process's.

Each scenario starts `multihost_run.py` as two processes joined by
`jax.distributed.initialize` over localhost, and compares what they yield with the
same script run as one process with 8 devices.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("multihost_run.py")
TIMEOUT = 180  # Seconds for a whole run; a hang fails the test instead of the suite.


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(tmp_path: Path, processes: int, *args: str) -> list[dict]:
    out = tmp_path / f"run{processes}"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # The script sets its own device count.
    port = str(free_port())
    children = [
        subprocess.Popen(
            [
                sys.executable,
                str(SCRIPT),
                "--num-processes",
                str(processes),
                "--process-id",
                str(i),
                "--port",
                port,
                "--out",
                str(out),
                *args,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(processes)
    ]
    try:
        outputs = [child.communicate(timeout=TIMEOUT)[0] for child in children]
    finally:
        for child in children:
            child.kill()
    for child, output in zip(children, outputs, strict=True):
        assert child.returncode == 0, output[-3000:]
    return [json.loads(Path(f"{out}.{i}").read_text()) for i in range(processes)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    (result,) = run(tmp_path_factory.mktemp("reference"), 1)
    return result


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mesh", "workers", "rows", "shards"),
    [
        ("1d", 0, [[0, 8], [8, 16]], [[0, 2, False], [1, 2, False]]),
        ("1d", 2, [[0, 8], [8, 16]], [[0, 2, False], [1, 2, False]]),
        ("2d", 0, [[0, 8], [8, 16]], [[0, 2, False], [1, 2, False]]),
        # Both hosts hold every replica: the same rows, the same (only) shard.
        ("2d-shared", 0, [[0, 16], [0, 16]], [[0, 1, False], [0, 1, False]]),
    ],
)
def test_two_processes_yield_the_global_batches_of_one(
    tmp_path, reference, mesh, workers, rows, shards
):
    results = run(tmp_path, 2, "--mesh", mesh, "--workers", str(workers))
    assert len(reference["batches"]) == 203 // 16
    assert [r["rows"] for r in results] == rows
    assert [r["shard"] for r in results] == shards
    for result in results:
        assert result["batches"] == reference["batches"]
        # Resumed after five batches on two processes: the same continuation. The
        # state is the one process's state, so it restores on either process count.
        assert result["continuation"] == reference["batches"][5:]
        if not workers:  # (With workers the state is mp_prefetch's {chunk, offset}.)
            assert result["state"] == reference["state"]
    assert reference["continuation"] == reference["batches"][5:]


@pytest.mark.slow
def test_uneven_shards_stop_together(tmp_path):
    first, second = run(tmp_path, 2, "--pipeline", "uneven-drop")
    # Process 0 could make 5 batches, process 1 only 2: both yield exactly 2.
    assert len(first["batches"]) == len(second["batches"]) == 2
    assert first["batches"] == second["batches"]
    assert "error" not in first


@pytest.mark.slow
def test_mismatched_local_batches_raise_on_every_process(tmp_path):
    results = run(tmp_path, 2, "--pipeline", "uneven-mismatch")
    for result in results:
        assert len(result["batches"]) == 2
        assert "different sizes ({0: 4, 1: 2} rows by process)" in result["error"]
