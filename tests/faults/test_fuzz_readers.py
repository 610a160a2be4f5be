"""Mutated and truncated data files raise chute's errors: never another error, a crash or a hang."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("fuzz_readers_run.py")
MUTATIONS = 150
BOUND = 120  # Seconds for all mutations of one format and seed: more means a hang.


@pytest.mark.parametrize("kind", ["arrayrecord", "parquet", "npy", "npz"])
@pytest.mark.parametrize("seed", [0, 1])
def test_mutated_files_raise_only_chute_errors(kind, seed, tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), kind, str(seed), str(MUTATIONS), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert done.returncode == 0, f"the reader crashed (exit {done.returncode}): {done.stderr}"
    unexpected = [line for line in done.stdout.splitlines() if line.startswith("UNEXPECTED")]
    assert unexpected == []
    (summary,) = [line for line in done.stdout.splitlines() if line.startswith("OUTCOMES")]
    outcomes = eval(summary.removeprefix("OUTCOMES "), {})  # A dict literal we printed.
    assert outcomes["ok"] + outcomes["chute error"] == MUTATIONS
    assert outcomes["chute error"] > 0  # The mutations did reach the readers.
