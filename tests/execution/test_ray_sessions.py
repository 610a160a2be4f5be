"""Ray shut down and started again in one process (a notebook, a test suite): chute goes on.

The first job of every new Ray cluster has the same job id, so a `Board` actor handle
kept by job id from the cluster that was shut down used to be taken for the new one's:
Ray then aborted the whole process ("Cannot find an actor handle"). Run in a child
process, since that failure kills the process it happens in.
"""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("ray")  # An extra: the chute layer's own environment lacks it.

pytestmark = pytest.mark.slow  # Two Ray clusters, one after the other.

SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import ray

    import chute


    def row(x):
        return np.full(4, x)


    for session in range(2):
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        ds = chute.MapDataset.range(40).to_iter_dataset().map(row)
        ds = ds.ray_prefetch(chute.RayOptions(num_workers=2), chunk_size=10)
        print(session, sum(int(r[0]) for r in ds), flush=True)
        ray.shutdown()
    """
)


def test_a_second_ray_session_in_one_process_runs_pipelines_again(tmp_path):
    (tmp_path / "sessions.py").write_text(SCRIPT)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "sessions.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:2] == ["0 780", "1 780"]
