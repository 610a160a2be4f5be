"""Reading `TFRecordSource` records against a plain Python loop over the same file."""

import os
import shutil
import statistics
import struct
import tempfile
import timeit

import numpy as np

from chute_sources import TFRecordSource, write_tfrecord

NUM_RECORDS = 50_000
BATCH = 1000
REPEATS = 5
_LENGTH = struct.Struct("<Q")


def _records() -> list[bytes]:
    rng = np.random.default_rng(0)
    sizes = rng.integers(50, 400, NUM_RECORDS)
    return [rng.bytes(int(size)) for size in sizes]


def _plain_loop(path: str) -> list[bytes]:
    """Every record, in file order, the way a hand-written reader would: no CRC checks."""
    records = []
    with open(path, "rb") as file:
        while header := file.read(12):
            (length,) = _LENGTH.unpack_from(header)
            records.append(file.read(length))
            file.read(4)
    return records


class TFRecordRead:
    """50k records of 50-400 bytes (11 MB), page-cached: every record in batches of 1000."""

    timer = timeit.default_timer
    number = 1
    repeat = 5
    warmup_time = 0.0

    def setup(self):
        self.folder = tempfile.mkdtemp(prefix="chute-bench-tfrecord-")
        self.path = os.path.join(self.folder, "data.tfrecord")
        self.records = _records()
        write_tfrecord(self.path, self.records)
        self.source = TFRecordSource(self.path)
        self.shuffled = np.random.default_rng(1).permutation(NUM_RECORDS)

    def teardown(self):
        self.source.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def time_open_and_index(self):
        TFRecordSource(self.path).close()

    def time_read_shuffled(self):
        for start in range(0, NUM_RECORDS, BATCH):
            self.source.__getitems__(self.shuffled[start : start + BATCH])

    def track_records_per_s_ratio_to_plain_loop(self):
        """Shuffled batched reads with CRC checks, over a sequential loop without them."""
        ours, theirs = [], []
        for _ in range(REPEATS):
            start = timeit.default_timer()
            got = [
                record
                for first in range(0, NUM_RECORDS, BATCH)
                for record in self.source.__getitems__(self.shuffled[first : first + BATCH])
            ]
            ours.append(timeit.default_timer() - start)
            start = timeit.default_timer()
            want = _plain_loop(self.path)
            theirs.append(timeit.default_timer() - start)
        assert got == [want[k] for k in self.shuffled.tolist()]
        # records/s of chute divided by records/s of the loop = time of the loop / chute's
        return statistics.median(theirs) / statistics.median(ours)

    track_records_per_s_ratio_to_plain_loop.unit = "ratio"
