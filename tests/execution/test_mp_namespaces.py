"""Two training processes in separate PID namespaces, sharing one shared-memory folder.

As two containers run with `docker --ipc=host` on one machine: each loads data with
worker processes through shared-memory slabs in the same folder, while `/proc` shows
each only its own processes and pids repeat. Neither may take the other's live slabs
for orphans. Real namespaces (`unshare --pid --fork --mount-proc`, root as in CI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="PID namespaces need root and unshare(1) (CI runs as root)",
)

TRAINER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    import chute

    def features(i):
        return {"i": i, "x": np.full(4096, i % 251, np.uint8)}

    ds = (
        chute.MapDataset.range(600).seed(int(sys.argv[1])).shuffle()
        .to_iter_dataset().map(features)
        .mp_prefetch(num_workers=2, chunk_size=8)
    )
    expected = list(chute.MapDataset.range(600).seed(int(sys.argv[1])).shuffle())
    it = iter(ds)
    seen = [next(it)["i"]]
    if len(sys.argv) > 2:  # Wait with results in slabs this process has not opened yet.
        time.sleep(1.0)
        print("ready", flush=True)
        sys.stdin.readline()
    for element in it:
        assert int(element["x"][0]) == element["i"] % 251
        seen.append(element["i"])
        time.sleep(0.002)  # Slower than the workers: slabs stay live a while.
    assert seen == expected, "the elements differ"
    print("done", len(seen), flush=True)
    """
)


_NAMESPACE = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]


def _trainer(seed: int, *, after: int = 0, pause: bool = False) -> subprocess.Popen[str]:
    """A trainer in its own PID namespace; `after` processes start there before it."""
    command = "; ".join(
        ["/bin/true"] * after + [f'"{sys.executable}" -c "$0" {seed}' + (" pause" if pause else "")]
    )
    return subprocess.Popen(
        [*_NAMESPACE, "sh", "-c", command, TRAINER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_namespaces_load_with_workers_side_by_side_through_one_shm_folder(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("CHUTE_SHM_DIR", str(tmp_path))
    # The first trainer's pids (5 and up: its workers' too) exist in no other namespace.
    first = _trainer(1, after=3, pause=True)
    assert first.stdout.readline().strip() == "ready"  # Its workers' slabs hold results.
    second = _trainer(2)  # Makes slabs, so reclaims what it takes for orphans.
    out, err = second.communicate(timeout=240)
    assert second.returncode == 0, err[-3000:]
    assert out.split() == ["done", "600"]
    out, err = first.communicate("go\n", timeout=240)
    assert first.returncode == 0, err[-3000:]
    assert out.split() == ["done", "600"]
    assert os.listdir(tmp_path) == []  # Both exited normally: nothing left.
