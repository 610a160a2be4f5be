"""Two JAX processes take their rows of the global batches from one Ray cluster.

The cluster is started here (`ray start --head`, as on a real cluster); each process of
`jax.distributed` (`device/multihost_run.py --ray ADDRESS`) joins it, runs its part of
the plan there, and must yield exactly the global batches one process with 8 devices
yields without workers, and resume the same.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("ray")  # An extra: the chute layer's own environment lacks it.

from chute_testing.device import run_processes

SCRIPT = Path(__file__).parent.parent / "device" / "multihost_run.py"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def _stop(temp: str) -> None:
    """Kills the processes of the cluster whose files are in `temp` (and only those)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                command = file.read().decode(errors="replace")
            files = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        if temp in command or any(name.startswith(temp) for name in files):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.slow
def test_two_jax_processes_share_one_ray_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # A private cluster of this test.
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Short: it holds sockets.
    head = [ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2", f"--temp-dir={temp}"]
    subprocess.run([*head, "--include-dashboard=false"], check=True, capture_output=True)
    try:
        (reference,) = run_processes(SCRIPT, 1, tmp_path / "one", timeout=180)
        results = run_processes(
            SCRIPT, 2, tmp_path / "two", "--ray", f"127.0.0.1:{port}", timeout=180
        )
    finally:
        _stop(temp)
        shutil.rmtree(temp, ignore_errors=True)
    assert len(reference["batches"]) == 203 // 16
    assert [r["rows"] for r in results] == [[0, 8], [8, 16]]
    for result in results:
        assert result["batches"] == reference["batches"]
        assert result["continuation"] == reference["batches"][5:]
