"""The soak script runs and judges its bounds: a few seconds of it, so that it cannot rot.

The soak itself (minutes) is not part of the test run: `tests/soak/soak.py --minutes 10`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).with_name("soak.py")
BOUND = 120  # Seconds for a 3-second soak: more means a hang.
_SUMMARY = re.compile(
    r"after warm-up: RSS drift [+-]\d+\.\d MiB \(bound (\S+)\), /dev/shm drift [+-]\d+\.\d "
    r"MiB \(bound (\S+)\), [\d,]+ elements/s"
)


def _soak(minutes: float, *options: str) -> tuple[int, list[str]]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--minutes", str(minutes), "--every", "0.5", *options],
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert done.stderr == "", done.stderr
    return done.returncode, done.stdout.splitlines()


def test_a_short_soak_samples_its_processes_and_passes_within_its_bounds():
    code, lines = _soak(0.05)
    assert code == 0, "\n".join(lines)
    assert lines[0].split() == ["seconds", "elements", "rss_MiB", "shm_MiB"]
    samples = [[float(x) for x in line.split()] for line in lines[1:-2]]
    assert len(samples) >= 4  # Every 0.5 s for 3 s.
    elements = [sample[1] for sample in samples]
    assert elements == sorted(elements) and elements[-1] > elements[0]
    # The consumer, the fork server and 2 workers; the workers' slabs (16 KiB elements
    # in 4 MiB slabs: at least one per worker).
    assert all(sample[2] > 0 and sample[3] >= 8.0 for sample in samples[1:])
    summary = _SUMMARY.fullmatch(lines[-2])
    assert summary and summary.groups() == ("64.0", "1.0"), lines[-2]
    assert lines[-1] == "PASS"


def test_a_soak_past_its_bound_says_fail_and_exits_1():
    code, lines = _soak(0.02, "--rss-bound-mib", "-1")  # Drift is max - first: never below 0.
    assert code == 1, "\n".join(lines)
    assert lines[-1] == "FAIL"
    summary = _SUMMARY.fullmatch(lines[-2])
    assert summary and summary.groups() == ("-1.0", "1.0"), lines[-2]
