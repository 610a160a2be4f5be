"""benchmarks/accelerator: the run's refusals and its report (the dry run itself is a
step of .ci/run, which runs prepare.sh and run.sh --dry-run end to end)."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # benchmarks/ is a folder of the repository, not a package.
    sys.path.insert(0, str(ROOT))
table = importlib.import_module("benchmarks.accelerator.measure").table
HERE = ROOT / "benchmarks" / "accelerator"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A repository with run.sh, stamp.sh and one package source, and no wheels."""
    (tmp_path / "benchmarks" / "accelerator").mkdir(parents=True)
    for name in ("run.sh", "stamp.sh"):
        shutil.copy(HERE / name, tmp_path / "benchmarks" / "accelerator" / name)
    source = tmp_path / "packages" / "chute-core" / "src" / "chute_core"
    source.mkdir(parents=True)
    (source / "__init__.py").write_text("x = 1\n")
    (tmp_path / "packages" / "chute-core" / "pyproject.toml").write_text("[project]\n")
    return tmp_path


def _run(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(tree / "benchmarks" / "accelerator" / "run.sh"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "OUT": str(tree / "out")},
    )


def test_run_without_prepared_wheels_says_to_prepare_them(tree: Path) -> None:
    done = _run(tree, "--dry-run")
    assert done.returncode == 2
    assert "run.sh: no wheels in benchmarks/accelerator/wheels: run 'bash" in done.stderr
    assert "benchmarks/accelerator/prepare.sh' first (where a package index is)" in done.stderr


def test_run_refuses_wheels_built_before_the_sources_changed(tree: Path) -> None:
    wheels = tree / "benchmarks" / "accelerator" / "wheels"
    wheels.mkdir()
    stamp = subprocess.run(
        ["bash", "benchmarks/accelerator/stamp.sh"], cwd=tree, capture_output=True, text=True
    ).stdout
    (wheels / "stamp").write_text(stamp)
    (tree / "packages" / "chute-core" / "src" / "chute_core" / "__init__.py").write_text("x = 2\n")
    done = _run(tree)
    assert done.returncode == 2
    assert "chute's sources changed since prepare.sh built" in done.stderr


def test_stamp_follows_sources_and_pyproject_only(tree: Path) -> None:
    def stamp() -> str:
        return subprocess.run(
            ["bash", "benchmarks/accelerator/stamp.sh"], cwd=tree, capture_output=True, text=True
        ).stdout

    first = stamp()
    assert len(first.strip()) == 64
    (tree / "packages" / "chute-core" / "README.md").write_text("not a source\n")
    assert stamp() == first
    (tree / "packages" / "chute-core" / "pyproject.toml").write_text("[project]\nname='x'\n")
    assert stamp() != first


def test_run_names_an_unknown_argument(tree: Path) -> None:
    done = _run(tree, "--fast")
    assert done.returncode == 2
    assert "run.sh: unknown argument '--fast' (use --dry-run, --out DIR)" in done.stderr


def test_the_report_shows_a_failed_part_with_its_error_and_the_others() -> None:
    results = {
        "dry_run": True,
        "machine": {
            "date": "2026-11-27", "device": "cpu", "backend": "cpu", "cores": 2,
            "python": "3.11.7", "jax": "0.10.2", "numpy": "2.4.6",
        },
        "host_to_device": {"error": "RuntimeError: no transfer"},
        "worker_scaling": {
            "plain_images_per_second": 1000.0,
            "rows": [
                {
                    "workers": 2, "first_batch_s": 0.5, "images_per_second": 1800.0,
                    "ratio_to_plain": 1.8, "efficiency": 0.9, "plain_loops_side_by_side": 2000.0,
                    "ratio_to_side_by_side": 0.9, "consumer_cpu": 0.25,
                }
            ],
        },
        "input_wait": {"error": "ValueError: bad shape"},
    }  # fmt: skip
    report = table(results)
    assert "host_to_device: failed: RuntimeError: no transfer" in report
    assert "input_wait: failed: ValueError: bad shape" in report
    assert "| 2 | 500 ms | 1,800 | 1.80 | 0.90 | 2,000 | 0.90 | 25% |" in report
    assert report.startswith("Dry run (CPU backend, small sizes) 2026-11-27 on cpu (cpu), 2 cores")
