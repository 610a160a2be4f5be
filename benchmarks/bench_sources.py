"""asv benchmarks of the ArrayRecord and shared-memory sources and the record codec.

Each `track_*_ratio_*` divides chute's throughput by a plain baseline doing the same
work in the same call (alternating, median of 7), so it means something on a noisy
machine: 1.0 is parity, above 1 chute is faster.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile

import numpy as np
from array_record.python.array_record_module import ArrayRecordReader

from chute_sources import (
    ArrayRecordSource,
    SharedMemorySource,
    decode_record,
    encode_record,
    write_array_record,
)

from ._timing import median_ratio

RECORDS = 4096
BATCH = 256


def _image_record(index: int) -> dict[str, object]:
    image = np.random.default_rng(index).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    return {"image": image, "label": index % 10}


class ArrayRecordRandomReads:
    """Batches of 256 random 3 KiB image records from 4 ArrayRecord files."""

    def setup(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="chute-bench-ar-")
        records = [_image_record(i) for i in range(RECORDS)]
        self.paths = write_array_record(records, os.path.join(self.folder, "d"), num_shards=4)
        self.source = ArrayRecordSource(self.paths)
        self.keys = np.random.default_rng(0).integers(0, RECORDS, BATCH)
        self.readers = [ArrayRecordReader(p, "readahead_buffer_size:0") for p in self.paths]
        per_file = RECORDS // len(self.paths)
        self.split = [
            (self.readers[f], (self.keys[self.keys // per_file == f] % per_file).tolist())
            for f in range(len(self.paths))
        ]

    def teardown(self) -> None:
        self.source.close()
        for reader in self.readers:
            reader.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def time_random_read_batch(self) -> None:
        self.source.__getitems__(self.keys)

    def _baseline_raw(self) -> None:
        for reader, positions in self.split:
            reader.read(positions)

    def _baseline_raw_then_decode(self) -> None:
        for reader, positions in self.split:
            for data in reader.read(positions):
                decode_record(data)

    def track_ratio_to_array_record_reader_raw(self) -> float:
        """Decoded records/s over array_record's own reader returning raw bytes."""
        return median_ratio(lambda: self.source.__getitems__(self.keys), self._baseline_raw)

    track_ratio_to_array_record_reader_raw.unit = "ratio"  # type: ignore[attr-defined]

    def track_ratio_to_array_record_reader_decoded(self) -> float:
        """Records/s over array_record's reader plus decoding, hand-written (overhead)."""
        return median_ratio(
            lambda: self.source.__getitems__(self.keys), self._baseline_raw_then_decode
        )

    track_ratio_to_array_record_reader_decoded.unit = "ratio"  # type: ignore[attr-defined]


class SharedMemoryRandomReads:
    """Batches of 256 random image records from a `SharedMemorySource`."""

    def setup(self) -> None:
        self.records = [_image_record(i) for i in range(RECORDS)]
        self.source = SharedMemorySource(self.records)
        self.keys = np.random.default_rng(0).integers(0, RECORDS, BATCH).tolist()
        self.pickled = [pickle.dumps(r) for r in self.records]

    def teardown(self) -> None:
        self.source.close()

    def time_random_read_batch(self) -> None:
        self.source.__getitems__(self.keys)

    def track_ratio_to_unpickling_records(self) -> float:
        """Records/s over `pickle.loads` of the same records held in a Python list.

        Unpickling from memory is what a multiprocessing-shared list of records would
        cost each reader; above 1 the shared-memory source is cheaper.
        """
        pickled = self.pickled
        return median_ratio(
            lambda: self.source.__getitems__(self.keys),
            lambda: [pickle.loads(pickled[k]) for k in self.keys],
        )

    track_ratio_to_unpickling_records.unit = "ratio"  # type: ignore[attr-defined]


class RecordCodec:
    """Encoding and decoding one 3 KiB image record."""

    def setup(self) -> None:
        self.record = _image_record(0)
        self.encoded = encode_record(self.record)
        self.pickled = pickle.dumps(self.record, protocol=5)

    def time_encode(self) -> None:
        encode_record(self.record)

    def time_decode(self) -> None:
        decode_record(self.encoded)

    def track_decode_ratio_to_pickle_loads(self) -> float:
        """Decodes/s over `pickle.loads` of the same record (which copies the array)."""
        encoded, pickled = self.encoded, self.pickled
        return median_ratio(
            lambda: [decode_record(encoded) for _ in range(1000)],
            lambda: [pickle.loads(pickled) for _ in range(1000)],
        )

    track_decode_ratio_to_pickle_loads.unit = "ratio"  # type: ignore[attr-defined]
