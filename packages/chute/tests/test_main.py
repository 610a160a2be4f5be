import subprocess
import sys

# `python -m chute` with the arguments of a command: what it prints and which modules it loaded.
_RUN_AS_MAIN = """
import runpy, sys
sys.argv = ["chute", "demo", "--text"]
try:
    runpy.run_module("chute", run_name="__main__", alter_sys=True)
except SystemExit as exit:
    print(exit.code, "chute_cli" in sys.modules)
"""


def test_python_m_chute_says_how_to_run_the_command_line_without_importing_it():
    done = subprocess.run(
        [sys.executable, "-c", _RUN_AS_MAIN], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.split() == ["2", "False"], done.stderr
    assert "run `chute demo --text` or `python -m chute_cli demo --text`" in done.stderr
