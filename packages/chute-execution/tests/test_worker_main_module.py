"""Workers skip the consumer's main script unless they need something defined in it.

A training script imports jax at the top; if every worker ran it again (as `spawn`
and `forkserver` children do), every worker would import jax.
"""

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = """
import os, sys
if __name__ == "__mp_main__":  # This script, run again inside a worker.
    open(os.path.join({folder!r}, f"imported-by-{{os.getpid()}}"), "w").close()

import chute
from operator import pos

def plus_one(x):
    return x + 1

if __name__ == "__main__":
    fn = plus_one if sys.argv[1] == "main" else pos
    ds = chute.MapDataset.range(200).to_iter_dataset().map(fn)
    ds = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=2), chunk_size=16)
    print(sum(ds), "jax" in sys.modules)
"""


def run(tmp_path: Path, which: str) -> tuple[str, list[str]]:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT.format(folder=str(tmp_path))))
    done = subprocess.run(
        [sys.executable, str(script), which], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip(), sorted(p.name for p in tmp_path.glob("imported-by-*"))


def test_workers_do_not_run_the_main_script_when_transforms_live_in_modules(tmp_path):
    output, imported = run(tmp_path, "module")
    assert output == f"{sum(range(200))} False"
    assert imported == []


def test_workers_run_the_main_script_when_a_transform_lives_there(tmp_path):
    output, imported = run(tmp_path, "main")
    assert output == f"{sum(range(1, 201))} False"
    assert len(imported) == 2  # Each of the two workers imported it to find plus_one.


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
