"""Random reads from `ParquetSource` against plain pyarrow on the same rows."""

import os
import shutil
import statistics
import tempfile
import timeit

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from chute_sources import ParquetSource

NUM_ROWS = 100_000
ROW_GROUP_ROWS = 10_000
BATCH = 1000
REPEATS = 5


def _write_table(path: str) -> None:
    ids = np.arange(NUM_ROWS, dtype=np.int64)
    table = pa.table(
        {
            "id": ids,
            "score": np.random.default_rng(0).random(NUM_ROWS),
            "name": [f"record-{i}" for i in range(NUM_ROWS)],
            "tokens": pa.ListArray.from_arrays(
                np.arange(0, 3 * NUM_ROWS + 1, 3, dtype=np.int32), np.repeat(ids, 3)
            ),
        }
    )
    pq.write_table(table, path, row_group_size=ROW_GROUP_ROWS)


def _pyarrow_baseline(path: str, keys: np.ndarray) -> list:
    """Reads the row groups that hold `keys` with pyarrow, converts them, picks the rows.

    It opens the file (one footer parse) like `ParquetSource`'s first read does.
    """
    handle = pq.ParquetFile(path)
    groups = keys // ROW_GROUP_ROWS
    decoded = {
        int(group): handle.read_row_group(int(group), use_threads=False).to_pylist()
        for group in np.unique(groups)
    }
    records = [decoded[int(k // ROW_GROUP_ROWS)][int(k % ROW_GROUP_ROWS)] for k in keys]
    handle.close()
    return records


class ParquetRandomRead:
    """1000 uniformly random keys over 100k rows in 10 row groups, cold cache."""

    timer = timeit.default_timer
    number = 1
    repeat = 5
    warmup_time = 0.0

    def setup(self):
        self.folder = tempfile.mkdtemp(prefix="chute-bench-parquet-")
        self.path = os.path.join(self.folder, "data.parquet")
        _write_table(self.path)
        self.keys = np.random.default_rng(1).integers(0, NUM_ROWS, BATCH)

    def teardown(self):
        shutil.rmtree(self.folder, ignore_errors=True)

    def time_random_read_batch(self):
        # A new source each call: the cache starts cold, as for a fresh shuffled batch.
        with ParquetSource(self.path) as source:
            source.__getitems__(self.keys)

    def track_records_per_s_ratio_to_pyarrow(self):
        ours, theirs = [], []
        for _ in range(REPEATS):
            with ParquetSource(self.path) as source:
                start = timeit.default_timer()
                got = source.__getitems__(self.keys)
                ours.append(timeit.default_timer() - start)
            start = timeit.default_timer()
            want = _pyarrow_baseline(self.path, self.keys)
            theirs.append(timeit.default_timer() - start)
        assert got == want
        # records/s of chute divided by records/s of pyarrow = time of pyarrow / time of chute
        return statistics.median(theirs) / statistics.median(ours)

    track_records_per_s_ratio_to_pyarrow.unit = "ratio"
