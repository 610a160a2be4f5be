"""A local Ray cluster that the asv Ray benchmarks share, kept by a process of its own.

asv runs each benchmark in a process of its own, and a cluster started there (`ray.init`)
stops with it: each benchmark paid ~6 s to start one. Instead, a benchmark class's
`setup_cache` calls `shared_cluster()`, which starts a *keeper*: `python _ray_cluster.py
PID` starts a 2-CPU cluster, prints its address, and keeps it until process `PID` (the
asv run that asked for it) has exited, or `LIFETIME` seconds have passed, then shuts it
down. Each benchmark connects to it (`connect`) and disconnects in its teardown.

The keeper runs in a session of its own, so it outlives the `setup_cache` process; the
cluster's processes (raylet, workers) are under it, so `cpu_tree(keeper)` counts them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any

__all__ = ["LIFETIME", "connect", "init_ray", "shared_cluster"]

AUTH = "RAY_AUTH_MODE"
LIFETIME = 3 * 3600.0
"""Seconds a keeper keeps its cluster at most, if the process it watches lives on."""


def shared_cluster(watched: int | None = None) -> dict[str, Any]:
    """Starts a keeper of a cluster while process `watched` lives: `{address, auth, keeper}`.

    By default it watches this process's parent: asv's run, which calls `setup_cache`
    in a process of its own.

    Raises:
        RuntimeError: the keeper exited without starting a cluster (its log is quoted).
    """
    log = tempfile.NamedTemporaryFile(  # noqa: SIM115  (the keeper writes to it after this)
        prefix="chute-ray-keeper-", suffix=".log", delete=False
    )
    keeper = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), str(watched or os.getppid())],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        start_new_session=True,  # Outlives this process (asv's setup_cache).
    )
    assert keeper.stdout is not None
    line = keeper.stdout.readline()
    keeper.stdout.close()
    if not line:
        keeper.wait()
        with open(log.name) as file:
            raise RuntimeError(
                f"the Ray cluster keeper exited ({keeper.returncode}): {file.read()}"
            )
    os.unlink(log.name)  # The keeper's output is of no use once the cluster runs.
    return {**json.loads(line), "keeper": keeper.pid}


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


def _keep(watched: int) -> None:
    """The keeper: starts the cluster, prints its address, keeps it while `watched` lives."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)  # Stops with shutdown().
    # A new local cluster takes token authentication (`~/.ray/auth_token`) unless told
    # otherwise; a driver that connects by address must be told which (`connect`).
    address = ray.get_runtime_context().gcs_address
    print(json.dumps({"address": address, "auth": os.environ.get(AUTH)}), flush=True)
    # Nobody reads further (the process that asked may be gone): later output goes nowhere.
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (kept open for the process's life)
    os.dup2(sys.stdout.fileno(), 1)
    deadline = time.monotonic() + LIFETIME
    while _alive(watched) and time.monotonic() < deadline:
        time.sleep(1.0)
    ray.shutdown()


if __name__ == "__main__":
    _keep(int(sys.argv[1]))
