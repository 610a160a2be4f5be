"""Mutated `chute convert` inputs give clear data errors only: no other error, crash or hang.

The readers' own fuzz test is `tests/faults/test_fuzz_readers.py`; this one reads the
JSON Lines and image-folder inputs as `chute convert` opens them, and converts them.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

CLI_SCRIPT = Path(__file__).with_name("fuzz_cli_inputs_run.py")
CLI_MUTATIONS = {"jsonl": 100, "images": 40}  # Each is also converted: fewer than the readers'.
BOUND = 120  # Seconds for all mutations of one format and seed: more means a hang.


@pytest.mark.parametrize("kind", ["jsonl", "images"])
@pytest.mark.parametrize("seed", [0, 1])
def test_mutated_convert_inputs_raise_only_clear_data_errors(kind, seed, tmp_path):
    # The JSON Lines and image-folder readers of `chute convert`, and convert itself.
    count = CLI_MUTATIONS[kind]
    done = subprocess.run(
        [sys.executable, str(CLI_SCRIPT), kind, str(seed), str(count), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert done.returncode == 0, f"the reader crashed (exit {done.returncode}): {done.stderr}"
    unexpected = [line for line in done.stdout.splitlines() if line.startswith("UNEXPECTED")]
    assert unexpected == []
    (summary,) = [line for line in done.stdout.splitlines() if line.startswith("OUTCOMES")]
    outcomes = json.loads(summary.removeprefix("OUTCOMES "))
    assert outcomes["read"] + outcomes["read error"] == count
    assert outcomes["converted"] + outcomes["convert error"] == count
    assert outcomes["read error"] > 0  # The mutations did reach the readers.
    assert outcomes["converted"] <= outcomes["read"]  # What cannot be read is not converted.
