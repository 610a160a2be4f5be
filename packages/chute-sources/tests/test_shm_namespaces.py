"""Shared memory of processes in other PID namespaces sharing the folder (containers).

Docker's `--ipc=host` and pods that share IPC give containers one `/dev/shm` but each
its own PID namespace, where pids repeat and `/proc` shows only the container's own
processes. Each scenario runs real processes in their own namespaces (`unshare --pid
--fork --mount-proc`, which needs root, as CI has) on one shared-memory folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from chute_core.internal import SHM_PREFIX

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="PID namespaces need root and unshare(1) (CI runs as root)",
)

OWNER = textwrap.dedent(
    """
    import sys
    from chute_sources import SharedMemorySource
    source = SharedMemorySource([{"i": i, "text": "x" * i} for i in range(100)])
    print(source.name, flush=True)
    sys.stdin.readline()  # Go on once the other namespace made its segments.
    assert [record["i"] for record in source] == list(range(100))
    print("read all", flush=True)
    source.close()
    """
)

RECLAIM = textwrap.dedent(
    """
    from chute_core.internal import reclaim_orphaned_segments
    print(reclaim_orphaned_segments(), flush=True)
    """
)

OTHER = textwrap.dedent(
    """
    from chute_sources import SharedMemorySource
    from chute_core.internal import reclaim_orphaned_segments
    with SharedMemorySource(list(range(10))) as source:  # Reclaims orphans first.
        print(reclaim_orphaned_segments(), flush=True)
    """
)


def _in_namespace(script: str, *, after: int = 0) -> list[str]:
    """A command running `script` in a new PID namespace; `after` processes start first.

    So the script's pid there is `after + 2` (the shell is pid 1).
    """
    runs = "; ".join(["/bin/true"] * after + [f'"{sys.executable}" -c "$0"'])
    namespace = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
    return [*namespace, "sh", "-c", runs, script]


def _owner(env) -> subprocess.Popen[str]:
    """The owner of a segment, pid 5 in a namespace of its own."""
    return subprocess.Popen(
        _in_namespace(OWNER, after=3),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_a_live_segment_in_another_pid_namespace_is_never_reclaimed(tmp_path):
    env = {**os.environ, "CHUTE_SHM_DIR": str(tmp_path)}
    owner = _owner(env)
    try:
        name = owner.stdout.readline().strip()
        assert name.startswith(SHM_PREFIX), name
        # The other namespace has no process of the owner's pid (5 there; 1 and 2 here).
        other = subprocess.run(
            _in_namespace(OTHER), capture_output=True, text=True, env=env, timeout=60
        )
        assert other.returncode == 0, other.stderr
        assert other.stdout.strip() == "[]"
        assert (tmp_path / name).exists()
        owner.stdin.write("go\n")
        owner.stdin.flush()
        assert owner.stdout.readline().strip() == "read all"
    finally:
        owner.stdin.close()
        owner.wait(timeout=60)
        owner.stdout.close()
    assert owner.returncode == 0
    assert os.listdir(tmp_path) == []  # Both exited normally: nothing left.


def test_a_dead_owners_segment_in_another_namespace_is_reclaimed(tmp_path):
    env = {**os.environ, "CHUTE_SHM_DIR": str(tmp_path)}
    owner = _owner(env)
    name = owner.stdout.readline().strip()
    owner.kill()  # unshare SIGKILLs its child, pid 1 there: every process there dies.
    owner.wait(timeout=60)
    owner.stdin.close()
    owner.stdout.close()
    for _ in range(100):  # The owner (pid 5 there) may outlive unshare by a moment.
        other = subprocess.run(
            _in_namespace(RECLAIM), capture_output=True, text=True, env=env, timeout=60
        )
        assert other.returncode == 0, other.stderr
        if name in other.stdout:
            break
    assert name in other.stdout
    assert os.listdir(tmp_path) == []
