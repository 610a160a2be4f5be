"""`ParquetStream.origin`: each record's number in the stream, over row groups and files,
as a `MapDataset` read in order numbers its elements (what resharding names them by)."""

import pyarrow as pa
import pyarrow.parquet as pq

from chute_sources import ParquetStream


def _files(folder, sizes, row_group_size=2):
    paths = []
    for number, size in enumerate(sizes):
        path = folder / f"{number:02d}.parquet"
        table = pa.table({"x": pa.array(range(size), pa.int64())})
        pq.write_table(table, path, row_group_size=row_group_size)
        paths.append(str(path))
    return paths


def test_origins_number_the_records_over_row_groups_and_files(tmp_path):
    paths = _files(tmp_path, [5, 0, 3, 4])  # An empty file among them.
    stream = ParquetStream(paths, batch_rows=3)  # Batches cut row groups differently.
    assert stream.origin is None  # Before any record.
    origins = [stream.origin for _ in stream]
    assert origins == [(n,) for n in range(12)]
    assert stream.origin is None  # After the end.


def test_an_origin_after_a_restore_is_the_records_number(tmp_path):
    stream = ParquetStream(_files(tmp_path, [5, 3]), batch_rows=2)
    for _ in range(6):
        next(stream)
    state = stream.get_state()  # Record 6: file 1, row group 0, row 1.
    assert state == {"file": 1, "row_group": 0, "row": 1}
    resumed = ParquetStream(stream.files, batch_rows=2)
    resumed.set_state(state)
    assert resumed.origin is None
    assert [(r["x"], resumed.origin) for r in resumed] == [(1, (6,)), (2, (7,))]


def test_the_stream_says_its_origins_are_positions():
    assert ParquetStream.origins_are_positions is True
