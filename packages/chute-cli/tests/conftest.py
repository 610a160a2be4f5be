"""Helpers of the command-line tests: run `python -m chute_cli`, make small input files."""

import os
import subprocess
import sys

import pytest

from chute_testing import png_bytes


def run_chute(*args, cwd=None, env=None, prefix=()):
    environment = {k: v for k, v in os.environ.items() if k != "CHUTE_TRACEBACK"}
    environment.update(env or {})
    return subprocess.run(
        [*prefix, sys.executable, "-m", "chute_cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=environment,
    )


@pytest.fixture(name="run_chute")
def _run_chute():
    return run_chute


@pytest.fixture(name="png_bytes")
def _png_bytes():
    return png_bytes


@pytest.fixture
def parquet_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 2000
    table = pa.table(
        {
            "id": list(range(n)),
            "text": [f"row {i}" for i in range(n)],
            "vec": [[float(i)] * (i % 3 + 1) for i in range(n)],
            "maybe": [None if i % 7 == 0 else i * 0.5 for i in range(n)],
        }
    )
    path = tmp_path / "data.parquet"
    pq.write_table(table, path, row_group_size=128)
    return path


@pytest.fixture
def image_folder(tmp_path):
    root = tmp_path / "images"
    for label, (name, count) in enumerate([("cat", 3), ("dog", 2), ("eel", 1)]):
        (root / name / "sub").mkdir(parents=True)
        for i in range(count):
            folder = root / name / ("sub" if i == 2 else "")
            (folder / f"{i}.png").write_bytes(png_bytes(3 + i, 2, 10 * label + i))
    (root / "README.txt").write_text("not a class")
    (root / "cat" / "notes.txt").write_text("not an image")
    return root
