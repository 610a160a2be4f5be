"""A local Ray cluster that the asv Ray benchmarks share, kept by a process of its own.

asv runs each benchmark in a process of its own, and a cluster started there (`ray.init`)
stops with it: each benchmark paid ~6 s to start one. Instead, a benchmark class's
`setup_cache` calls `shared_cluster()`, which starts a *keeper*: `python _ray_cluster.py
PID [DIR]` starts a 2-CPU cluster, prints its address, and keeps it until process `PID`
has exited, folder `DIR` is gone (asv deletes a class's `setup_cache` folder after the
class's last benchmark), it is sent SIGTERM (`stop`), or `LIFETIME` seconds have passed;
then it shuts the cluster down. Each benchmark connects to it (`connect`) and disconnects
in its teardown.

The keeper runs in a session of its own, so that neither the end of the `setup_cache`
process nor a signal asv sends to that process's group stops it; the cluster's processes
(raylet, workers) are under it, so `bench_ray.tree_cpu_seconds(keeper)` counts them.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any

__all__ = ["LIFETIME", "STARTUP", "connect", "init_ray", "shared_cluster", "stop"]

AUTH = "RAY_AUTH_MODE"
LIFETIME = 3 * 3600.0
"""Seconds a keeper keeps its cluster at most, if what it watches stays."""
STARTUP = 180.0
"""Seconds `shared_cluster` waits for the keeper's cluster to start."""

_keepers: dict[int, subprocess.Popen[bytes]] = {}  # Started here, to be waited for.
_MARK = b"chute-ray-cluster "  # Begins the keeper's line with the address.


def shared_cluster(watched: int | None = None, folder: str | None = None) -> dict[str, Any]:
    """Starts a keeper of a cluster: `{address, auth, keeper}`.

    It keeps the cluster while process `watched` lives (by default this process's
    parent: asv's run, which calls `setup_cache` in a process of its own) and, if
    `folder` is given, while that folder exists, or until `stop` is called.

    Raises:
        RuntimeError: the keeper exited, or gave no address within `STARTUP` seconds,
            without starting a cluster (its log is quoted).
    """
    command = [sys.executable, os.path.abspath(__file__), str(watched or os.getppid())]
    # Not asv's cache folder, which asv deletes; and an empty one, since Ray packs the
    # working folder of a driver run by `uv run` for its workers (the keeper removes it).
    home = tempfile.mkdtemp(prefix="chute-ray-keeper-")
    with tempfile.TemporaryFile(prefix="chute-ray-keeper-") as log:
        keeper = subprocess.Popen(
            [*command, *([folder] if folder is not None else [])],
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=home,
            start_new_session=True,  # Outlives this process (asv's setup_cache).
        )
        assert keeper.stdout is not None
        try:
            line = _first_line(keeper.stdout.fileno(), time.monotonic() + STARTUP)
            found = None if line is None else json.loads(line.removeprefix(_MARK))
        except BaseException:
            _kill(keeper, home)
            raise
        finally:
            keeper.stdout.close()
        if found is None:
            _kill(keeper, home)
            log.seek(0)
            error = log.read().decode(errors="replace")
            raise RuntimeError(
                f"the Ray cluster keeper gave no address in {STARTUP:g} s "
                f"(exit status {keeper.returncode}): {error}"
            )
    _keepers[keeper.pid] = keeper
    return {**found, "keeper": keeper.pid}


def _kill(keeper: subprocess.Popen[bytes], home: str) -> None:
    """Kills a keeper that failed, with its session (the cluster's processes), and its folder."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(keeper.pid, signal.SIGKILL)
    keeper.wait()
    shutil.rmtree(home, ignore_errors=True)


def stop(cluster: dict[str, Any], timeout: float = 60.0) -> None:
    """Stops the keeper of `cluster` (it shuts the cluster down) and waits for it to exit.

    A keeper still running after `timeout` seconds is killed with its session (the
    cluster's processes).
    """
    pid = int(cluster["keeper"])
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    keeper = _keepers.pop(pid, None)
    deadline = time.monotonic() + timeout
    if keeper is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            keeper.wait(timeout)
            return
    else:
        while _alive(pid) and time.monotonic() < deadline:  # Not a child of this process.
            time.sleep(0.1)
        if not _alive(pid):
            return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    if keeper is not None:
        keeper.wait()


def _first_line(fd: int, deadline: float) -> bytes | None:
    """The first line starting with `_MARK` written to `fd` before `deadline`.

    None if `fd` closes or time runs out first; other lines (a library's) are skipped.
    """
    read = b""
    while True:
        lines = read.split(b"\n")
        for line in lines[:-1]:
            if line.startswith(_MARK):
                return line
        read = lines[-1]
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        read += chunk


def connect(cluster: dict[str, Any]) -> None:
    """Connects this process to the shared cluster (`init_ray(address=...)`).

    Call it before anything imports `ray` here: Ray reads its authentication mode once.
    """
    if cluster["auth"] is not None:
        if "ray" in sys.modules and os.environ.get(AUTH) != cluster["auth"]:
            raise RuntimeError(
                f"connect: ray was imported before {AUTH}={cluster['auth']} could be set, so it "
                "cannot join the shared cluster; connect before importing ray."
            )
        os.environ[AUTH] = cluster["auth"]
    init_ray(address=cluster["address"])


def init_ray(**options: Any) -> None:
    """`ray.init(**options)`, with `benchmarks` importable in the workers and no driver logs."""
    import ray

    path = os.pathsep.join(entry for entry in sys.path if entry)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        ray.init(log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}}, **options)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _keep(watched: int, folder: str | None) -> None:
    """The keeper: starts the cluster, prints its address, keeps it while told to."""
    import ray

    home = os.getcwd()  # The folder `shared_cluster` made for it.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)  # Stops with shutdown().
    stopped: list[int] = []  # A signal handler only appends here (no lock is taken).
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(1))  # After ray.init's own.
    # A new local cluster takes token authentication (`~/.ray/auth_token`) unless told
    # otherwise; a driver that connects by address must be told which (`connect`).
    address = ray.get_runtime_context().gcs_address
    found = {"address": address, "auth": os.environ.get(AUTH)}
    print(_MARK.decode() + json.dumps(found), flush=True)
    # Nobody reads further (the process that asked may be gone): later output goes nowhere.
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (kept open for the process's life)
    os.dup2(sys.stdout.fileno(), 1)
    deadline = time.monotonic() + LIFETIME
    while (
        not stopped
        and _alive(watched)
        and (folder is None or os.path.isdir(folder))
        and time.monotonic() < deadline
    ):
        time.sleep(0.5)
    ray.shutdown()
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    _keep(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
