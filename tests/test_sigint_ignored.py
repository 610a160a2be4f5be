"""The Ctrl-C tests pass when the test run itself ignores SIGINT (`nohup pytest &`).

Such a run passes SIGINT's "ignored" on to every program it starts; a test of Ctrl-C
must set the disposition its child needs (`chute_testing.execution.answers_ctrl_c`).
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CTRL_C_TESTS = [
    "packages/chute-cli/tests/test_cli_convert_again.py::test_ctrl_c_exits_130_and_the_rerun_resumes",
    "tests/execution/test_mp_faults.py::test_iteration_continues_exactly_after_a_caught_ctrl_c",
    "tests/faults/test_faults.py::test_a_caught_ctrl_c_at_a_seeded_place_leaves_the_stream_"
    "unchanged[0]",
]


# The test run itself ignores SIGINT, as under `nohup ... &`; its children inherit that.
RUN_IGNORING_SIGINT = (
    "import signal, sys, pytest; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', *sys.argv[1:]]))"
)


@pytest.mark.slow
def test_ctrl_c_tests_pass_in_a_run_that_ignores_sigint():
    done = subprocess.run(
        [sys.executable, "-c", RUN_IGNORING_SIGINT, *CTRL_C_TESTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert done.stdout.strip().splitlines()[-1].startswith("3 passed")
