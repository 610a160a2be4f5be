"""Helpers of the command-line tests: run `python -m chute_cli`, make small input files,
read converted shards back."""

import os
import subprocess
import sys

import pytest

import chute
from chute_cli._common import first_difference
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


def read_shards(paths):
    """Every record of the ArrayRecord shards at `paths`, in order."""
    return list(chute.ArrayRecordSource([str(p) for p in paths]))


def assert_same_records(expected, actual):
    """`expected` and `actual` hold the same records, in order (naming the first that differs)."""
    assert len(expected) == len(actual)
    for index, (a, b) in enumerate(zip(expected, actual, strict=True)):
        assert first_difference(a, b) is None, (index, first_difference(a, b))


@pytest.fixture(name="read_shards", scope="session")
def _read_shards():
    return read_shards


@pytest.fixture(name="assert_same_records", scope="session")
def _assert_same_records():
    return assert_same_records


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
