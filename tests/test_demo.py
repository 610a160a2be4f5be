"""`chute demo` end to end: the preempted and resumed run matches the uninterrupted one."""

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_demo_resumes_exactly(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "chute",
            "demo",
            "--steps",
            "60",
            "--save-every",
            "10",
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "batches and losses identical" in done.stdout
    assert "preempted at step 38; the new process restored the checkpoint of step" in done.stdout
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The resumed run logged every step from its checkpoint to the end.
    log = (tmp_path / "preempted" / "log.jsonl").read_text().splitlines()
    assert len(log) > 60
