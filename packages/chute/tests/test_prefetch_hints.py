"""Plan-aware prefetch: a source hears which records come next, before it is asked for them.

The source here logs its `prefetch` hints and its reads, per process, to files; the
test reads the logs after the run. Hints never change the elements.
"""

from __future__ import annotations

import json
import os

import pytest

import chute
from chute_testing import assert_resumes


class LoggingSource:
    """Records `i` is `i * 10`; every hint and read is appended to `<folder>/<pid>.log`."""

    def __init__(self, folder: str, size: int) -> None:
        self.folder = folder
        self.size = size

    def __len__(self) -> int:
        return self.size

    def _log(self, kind: str, keys) -> None:
        with open(os.path.join(self.folder, f"{os.getpid()}.log"), "a") as file:
            file.write(json.dumps([kind, [int(k) for k in keys]]) + "\n")

    def prefetch(self, keys) -> None:
        self._log("P", keys)

    def __getitem__(self, key: int) -> int:
        self._log("R", [key])
        return int(key) * 10

    def __getitems__(self, keys):
        self._log("R", keys)
        return [int(k) * 10 for k in keys]


def _logs(folder):
    logs = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as file:
            logs[name] = [json.loads(line) for line in file]
    return logs


def _pipeline(source, workers):
    ds = chute.MapDataset.source(source).seed(3).shuffle().map(lambda x: x + 1)
    return ds.to_iter_dataset().mp_prefetch(num_workers=workers, chunk_size=16)


@pytest.mark.parametrize("workers", [0, 2])
def test_every_read_was_hinted_before_it_and_elements_do_not_change(tmp_path, workers):
    source = LoggingSource(str(tmp_path), 200)
    got = list(_pipeline(source, workers))
    plain = list(
        chute.MapDataset.source(list(range(0, 2000, 10))).seed(3).shuffle().map(lambda x: x + 1)
    )
    assert got == plain
    logs = _logs(str(tmp_path))
    hinted_everywhere = set()
    for entries in logs.values():
        hinted: set[int] = set()
        reads = 0
        for kind, keys in entries:
            if kind == "P":
                hinted.update(keys)
                continue
            reads += 1
            missing = set(keys) - hinted
            # In-process, the first read comes before any hint; every later one was hinted.
            assert not missing or (workers == 0 and reads == 1), (
                f"read {sorted(missing)[:5]} before any hint for them"
            )
        hinted_everywhere |= hinted
    if workers:
        assert hinted_everywhere == set(range(200))


def test_hints_do_not_change_resume(tmp_path):
    source = LoggingSource(str(tmp_path), 90)
    assert_resumes(
        lambda: iter(_pipeline(source, 2)),
        every=15,
        make_restored=[lambda: iter(_pipeline(source, 0))],
        expected=list(
            chute.MapDataset.source(list(range(0, 900, 10))).seed(3).shuffle().map(lambda x: x + 1)
        ),
    )
