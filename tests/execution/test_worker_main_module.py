"""Workers never run the consumer's main script, wherever the user's code is written.

A training script imports jax at the top; if every worker ran it again (as `spawn`
and `forkserver` children do), every worker would import jax, and a script without an
`if __name__ == "__main__":` guard would start workers from its workers. Code defined
in the script (or in `python -c`, or read from stdin) travels to the workers by value.
"""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# No main guard, on purpose: a script as a new user writes it.
SCRIPT = """
import dataclasses, os, sys
if __name__ == "__mp_main__":  # This script, run again inside a worker.
    open(os.path.join({folder!r}, f"imported-by-{{os.getpid()}}"), "w").close()

import jax  # A training script: jax first.
import chute


@dataclasses.dataclass
class Scaled:
    value: int
    jax_in_worker: bool


def plus_one(x):
    return x + 1


factor = int(sys.argv[1]) if len(sys.argv) > 1 else 3
scale = lambda x: Scaled(x * factor, "jax" in sys.modules)  # A closure over a global.


def note_start(worker, num_workers):
    if "jax" in sys.modules:
        raise RuntimeError(f"worker {{worker}} has jax loaded")


ds = chute.MapDataset.range(200).to_iter_dataset().map(plus_one).map(scale)
ds = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=2), note_start, chunk_size=16)
out = list(ds)
print(
    sum(x.value for x in out),
    type(out[0]) is Scaled,
    any(x.jax_in_worker for x in out),
    "jax" in sys.modules,
)
"""

EXPECTED = f"{3 * sum(range(1, 201))} True False True"


def _imported(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("imported-by-*"))


def _check(done: subprocess.CompletedProcess[str], folder: Path) -> None:
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == EXPECTED
    assert _imported(folder) == []


@pytest.mark.slow
def test_a_script_without_main_guard_runs_its_own_code_in_workers(tmp_path):
    script = tmp_path / "guide.py"
    script.write_text(textwrap.dedent(SCRIPT.format(folder=str(tmp_path))))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    _check(done, tmp_path)


@pytest.mark.slow
def test_python_dash_c_and_stdin_run_their_own_code_in_workers(tmp_path):
    code = textwrap.dedent(SCRIPT.format(folder=str(tmp_path)))
    for args, stdin in (([sys.executable, "-c", code], None), ([sys.executable, "-"], code)):
        done = subprocess.run(
            args, input=stdin, capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
        _check(done, tmp_path)


PROBE = """
import sys

def jax_in_worker(x):
    return "jax" in sys.modules

def refuse_jax(worker, num_workers):
    if "jax" in sys.modules:
        raise RuntimeError(f"worker {worker} has jax loaded")
"""

JAX_SCRIPT = """
import sys
import jax  # A training script: jax first.
import chute
from probe import jax_in_worker, refuse_jax

if __name__ == "__main__":
    ds = chute.MapDataset.range(64).to_iter_dataset().map(jax_in_worker)
    options = chute.MultiprocessingOptions(num_workers=2)
    print(sorted(set(ds.mp_prefetch(options, refuse_jax, chunk_size=8))), "jax" in sys.modules)
"""


def test_workers_never_import_jax_when_the_consumer_has(tmp_path):
    (tmp_path / "probe.py").write_text(PROBE)
    script = tmp_path / "train.py"
    script.write_text(JAX_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[False] True"  # No worker had it; the consumer did.
