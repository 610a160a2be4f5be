"""`HuggingFaceStreamSource` against iterating the `datasets.IterableDataset` it reads.

The same local files, loaded with `datasets.load_dataset(..., streaming=True)`, read
from start to end both ways: chute in batches of 1000 positions (`__getitems__`, as a
pipeline's chunks read them), `datasets` by iterating the stream. Skipped where
`datasets` is not installed (it is the extra `chute-sources[huggingface]`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import timeit
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from chute_sources import HuggingFaceStreamSource

from ._timing import median_ratio

NUM_ROWS = 50_000
FILES = 4
ROW_GROUP_ROWS = 5_000
BATCH = 1000
REPEATS = 5


def _datasets():
    try:
        import datasets
    except ImportError:  # asv skips a benchmark whose setup raises NotImplementedError.
        raise NotImplementedError("datasets is not installed") from None
    datasets.disable_progress_bars()
    return datasets


def _write(folder: str, form: str) -> list[str]:
    """NUM_ROWS rows of an id, a text, a label and a list of ints in FILES files."""
    rng = np.random.default_rng(0)
    paths = []
    per_file = NUM_ROWS // FILES
    for number in range(FILES):
        ids = range(number * per_file, (number + 1) * per_file)
        rows = [
            {
                "id": i,
                "text": f"record {i} " + "x" * int(rng.integers(10, 80)),
                "label": i % 10,
                "tokens": list(range(i % 16)),
            }
            for i in ids
        ]
        path = os.path.join(folder, f"part-{number}.{'parquet' if form == 'parquet' else 'jsonl'}")
        if form == "parquet":
            pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=ROW_GROUP_ROWS)
        else:
            with open(path, "w", encoding="utf-8") as file:
                file.writelines(json.dumps(row) + "\n" for row in rows)
        paths.append(path)
    return paths


def _read_all(source: HuggingFaceStreamSource) -> int:
    count = 0
    for start in range(0, len(source), BATCH):
        count += len(source.__getitems__(range(start, min(start + BATCH, len(source)))))
    return count


def _iterate(stream) -> int:
    return sum(1 for _ in stream)


class HuggingFaceStreamRead:
    """50k rows in 4 local files, page-cached: every row, in order, chute vs datasets."""

    params: ClassVar = ["parquet", "json"]
    param_names: ClassVar = ["format"]
    timer = timeit.default_timer
    number = 1
    repeat = 5
    warmup_time = 0.0

    def setup(self, form):
        datasets = _datasets()
        self.folder = tempfile.mkdtemp(prefix="chute-bench-hf-stream-")
        self.paths = _write(self.folder, form)
        self.stream = datasets.load_dataset(
            form, data_files=self.paths, split="train", streaming=True
        )
        self.source = HuggingFaceStreamSource(self.stream)

    def teardown(self, form):
        self.source.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def time_open(self, form):
        HuggingFaceStreamSource(self.stream).close()

    def time_read_all(self, form):
        _read_all(self.source)

    def track_rows_per_s_ratio_to_datasets(self, form):
        """Rows/s of chute over rows/s of iterating the IterableDataset (above 1: faster)."""
        assert _read_all(self.source) == _iterate(self.stream) == NUM_ROWS
        return median_ratio(lambda: _read_all(self.source), lambda: _iterate(self.stream), REPEATS)

    track_rows_per_s_ratio_to_datasets.unit = "ratio"
