"""Checkpoints written by earlier chute versions restore, and continue exactly.

Each folder here beside `pipelines.py` holds, per pipeline, a checkpoint that the chute
of its date wrote mid-stream and the elements that followed it. Restoring it into the
same pipeline built by today's chute must pass the fingerprint check and give those
elements: code may move between modules and packages, checkpoints stay valid.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from chute_checkpoint import restore

sys.path.insert(0, str(Path(__file__).parent))
import pipelines  # The pipelines that wrote the checkpoints, beside this file.

HERE = Path(__file__).parent
CASES = sorted(
    (folder.name, name)
    for folder in HERE.iterdir()
    if folder.is_dir() and folder.name.startswith("written_")
    for name in sorted(p.name for p in folder.iterdir() if p.is_dir())
)


def test_every_pipeline_has_a_checkpoint_of_today():
    newest = max(version for version, _ in CASES)
    assert {name for version, name in CASES if version == newest} == set(pipelines.PIPELINES)


@pytest.mark.parametrize(("version", "name"), CASES)
def test_an_earlier_checkpoint_restores_and_continues_exactly(version, name):
    folder = HERE / version / name
    expected = json.loads((folder / "next.json").read_text())
    it = restore(iter(pipelines.PIPELINES[name]()), folder, process_index=0, process_count=1)
    assert [pipelines.plain(next(it)) for _ in range(len(expected))] == expected
