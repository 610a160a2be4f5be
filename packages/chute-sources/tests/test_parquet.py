"""Tests of `ParquetSource` (random access) and `ParquetStream` (sequential, resumable)."""

from __future__ import annotations

import concurrent.futures
import doctest
import json
import multiprocessing
import operator
import os
import pickle
import random
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chute_sources._parquet as parquet_module
import chute_sources._parquet_index as parquet_index_module
import chute_sources._parquet_stream as parquet_stream_module
from chute_core import (
    CheckpointableIterator,
    CorruptRecordError,
    InvalidStateError,
    RandomAccessDataSource,
    RecordIndexError,
    RecordKeyTypeError,
    SourceClosedError,
    SourceFileError,
    SourceFileNotFoundError,
)
from chute_sources._parquet import ParquetSource, ParquetStream
from chute_sources._parquet_index import ParquetIndex

# --------------------------------------------------------------------------------------
# Data


POINT = pa.struct([("x", pa.int32()), ("label", pa.string())])
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("score", pa.float64()),
        ("name", pa.string()),
        ("point", POINT),
        ("tags", pa.list_(pa.int64())),
        ("points", pa.list_(POINT)),
        ("blob", pa.binary()),
        ("nothing", pa.null()),
    ]
)


def make_table(start: int, num_rows: int) -> pa.Table:
    """Rows `start .. start + num_rows` with every kind of value, nulls included."""
    rows = []
    for i in range(start, start + num_rows):
        rows.append(
            {
                "id": None if i % 7 == 3 else i * 1_000_003 - 2**40,
                "score": None if i % 5 == 4 else [0.1 * i, -1e300, float("inf")][i % 3],
                "name": None if i % 6 == 5 else f"näme-{i}-" + "x" * (i % 4),
                "point": None if i % 9 == 8 else {"x": i, "label": None if i % 2 else f"p{i}"},
                "tags": None if i % 8 == 7 else [i, None, -i][: i % 4],
                "points": None
                if i % 10 == 9
                else [{"x": j, "label": str(j)} if j % 3 else None for j in range(i % 3)],
                "blob": None if i % 4 == 1 else bytes([i % 256, 0, 255]) * (i % 3),
                "nothing": None,
            }
        )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def write_files(folder: Path, file_rows: list[int], row_group_size: int) -> list[str]:
    """Writes one Parquet file per entry of `file_rows`; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths, start = [], 0
    for number, num_rows in enumerate(file_rows):
        path = str(folder / f"part-{number:03d}.parquet")
        pq.write_table(make_table(start, num_rows), path, row_group_size=row_group_size)
        paths.append(path)
        start += num_rows
    return paths


def expected_records(paths: list[str], columns: list[str] | None = None) -> list[dict[str, Any]]:
    return [row for path in paths for row in pq.read_table(path, columns=columns).to_pylist()]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Three files of 10, 7 and 13 rows in row groups of 4 (so 3 + 2 + 4 row groups)."""
    return write_files(tmp_path_factory.mktemp("dataset"), [10, 7, 13], row_group_size=4)


@pytest.fixture(scope="module")
def expected(dataset: list[str]) -> list[dict[str, Any]]:
    return expected_records(dataset)


@pytest.fixture
def decode_log(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Records (file, row group) of every row group decoded from now on."""
    log: list[tuple[int, int]] = []
    lock = threading.Lock()
    original = ParquetIndex.read_row_group

    def spy(self: ParquetIndex, handle: Any, file: int, row_group: int, use_threads: bool) -> Any:
        with lock:
            log.append((file, row_group))
        return original(self, handle, file, row_group, use_threads)

    monkeypatch.setattr(ParquetIndex, "read_row_group", spy)
    return log


# --------------------------------------------------------------------------------------
# ParquetSource: values


def test_source_records_equal_pyarrow_to_pylist_exactly(dataset, expected):
    source = ParquetSource(dataset)
    records = [source[i] for i in range(len(source))]
    assert records == expected
    # Exactly: same types too (bytes stay bytes, nested structs are dicts, nulls None).
    for record, reference in zip(records, expected, strict=True):
        assert list(record) == list(reference)
        for column, value in record.items():
            assert type(value) is type(reference[column])


def test_source_length_counts_every_row_of_every_file(dataset):
    assert len(ParquetSource(dataset)) == 30
    assert len(ParquetSource(dataset[1])) == 7


def test_source_is_a_random_access_data_source(dataset):
    assert isinstance(ParquetSource(dataset), RandomAccessDataSource)


def test_source_negative_keys_count_from_the_end(dataset, expected):
    source = ParquetSource(dataset)
    for key in range(-len(expected), 0):
        assert source[key] == expected[key]
    assert source[np.int32(-1)] == expected[-1]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_source_getitems_any_order_with_repeats(dataset, expected, data):
    n = len(expected)
    keys = data.draw(st.lists(st.integers(-n, n - 1), max_size=80))
    cache = data.draw(st.integers(0, 3))
    source = ParquetSource(dataset, cache_row_groups=cache)
    assert source.__getitems__(keys) == [expected[key] for key in keys]
    assert source.__getitems__(np.asarray(keys, dtype=np.int64)) == [expected[k] for k in keys]


def test_source_getitems_returns_distinct_dicts_for_repeated_keys(dataset):
    first, second = ParquetSource(dataset).__getitems__([3, 3])
    assert first == second
    assert first is not second


def test_source_getitems_of_no_keys_is_empty(dataset):
    assert ParquetSource(dataset).__getitems__([]) == []


def test_source_getitems_decodes_each_row_group_once_per_call(dataset, decode_log):
    source = ParquetSource(dataset, cache_row_groups=0)
    keys = [29, 0, 1, 28, 0, 14, 2, 29, 15, 3]
    source.__getitems__(keys)
    assert sorted(decode_log) == sorted(set(decode_log))
    assert sorted(decode_log) == [(0, 0), (1, 1), (2, 2), (2, 3)]


def test_source_cache_hit_does_not_decode_again(dataset, decode_log):
    source = ParquetSource(dataset, cache_row_groups=2)
    source[0]
    source[1]
    source.__getitems__([2, 3, 0])
    assert decode_log == [(0, 0)]


def test_source_cache_is_lru_and_never_exceeds_its_bound(dataset, expected, decode_log):
    source = ParquetSource(dataset, cache_row_groups=2)
    rng = random.Random(0)
    for _ in range(200):
        if rng.random() < 0.5:
            key = rng.randrange(len(expected))
            assert source[key] == expected[key]
        else:
            keys = [rng.randrange(len(expected)) for _ in range(rng.randrange(1, 12))]
            assert source.__getitems__(keys) == [expected[key] for key in keys]
        assert len(source._cache) <= 2
    # LRU: touching row group 0 keeps it while row group 1 is loaded, then 2 evicts 1.
    source = ParquetSource(dataset[0], cache_row_groups=2)
    source[0], source[4], source[0], source[8]
    assert list(source._cache) == [0, 2]


def test_source_reads_from_many_threads(dataset, expected):
    source = ParquetSource(dataset, cache_row_groups=3)
    bound_kept = []

    def work(seed: int) -> bool:
        rng = random.Random(seed)
        for _ in range(100):
            keys = [rng.randrange(len(expected)) for _ in range(rng.randrange(1, 8))]
            if source.__getitems__(keys) != [expected[key] for key in keys]:
                return False
            bound_kept.append(len(source._cache) <= 3)
        return True

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(16)))
    assert all(bound_kept)
    assert len(source._cache) <= 3


def test_source_columns_selects_columns(dataset):
    source = ParquetSource(dataset, columns=["tags", "id", "point"])
    assert source.columns == ("tags", "id", "point")
    assert source.schema.names == ["tags", "id", "point"]
    assert [source[i] for i in range(len(source))] == expected_records(
        dataset, ["tags", "id", "point"]
    )
    assert list(source[0]) == ["tags", "id", "point"]


def test_source_glob_expands_in_sorted_order(dataset, expected):
    folder = Path(dataset[0]).parent
    source = ParquetSource(str(folder / "part-*.parquet"))
    assert source.files == tuple(sorted(dataset))
    assert source.__getitems__(range(len(source))) == expected


def test_source_list_keeps_its_order_and_mixes_paths_and_patterns(dataset, expected):
    folder = Path(dataset[0]).parent
    source = ParquetSource([Path(dataset[2]), str(folder / "part-00[01].parquet")])
    assert source.files == (dataset[2], dataset[0], dataset[1])
    assert [source[i] for i in range(len(source))] == expected[17:] + expected[:17]


def test_source_handles_empty_files_and_row_groups(tmp_path):
    paths = write_files(tmp_path, [5, 0, 3], row_group_size=2)
    source = ParquetSource(paths)
    assert len(source) == 8
    assert source.__getitems__(range(8)) == expected_records(paths)
    assert len(ParquetSource(paths[1])) == 0


def test_source_pickle_round_trip_drops_open_files(dataset, expected):
    source = ParquetSource(dataset, columns=["id", "blob"], cache_row_groups=4)
    source.__getitems__([0, 12, 25])  # opens files and fills the cache
    state = source.__getstate__()
    assert not any(isinstance(value, pq.ParquetFile) for value in state.values())
    assert "_cache" not in state
    restored = pickle.loads(pickle.dumps(source))
    assert len(restored._cache) == 0
    assert len(restored) == len(source)
    assert repr(restored) == repr(source)
    assert restored.__getitems__([25, 0, 12]) == [
        {key: expected[i][key] for key in ("id", "blob")} for i in (25, 0, 12)
    ]


def test_source_reads_in_a_spawned_process(dataset, expected):
    source = ParquetSource(dataset)
    source[0]  # open handles must not travel
    keys = [29, 0, 17, 17, -1]
    # The callable must be importable in the child. A function of this module is not:
    # pytest's importlib mode names it `packages.chute-sources.tests.test_parquet`,
    # which a spawned interpreter cannot import. `operator.methodcaller` pickles by value.
    read = operator.methodcaller("__getitems__", keys)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        assert pool.submit(read, source).result(timeout=120) == [expected[key] for key in keys]


def test_source_detects_a_file_changed_after_pickling(tmp_path):
    path = write_files(tmp_path, [6], row_group_size=3)[0]
    blob = pickle.dumps(ParquetSource(path))
    pq.write_table(make_table(0, 6), path, row_group_size=2)
    with pytest.raises(SourceFileError, match="changed since"):
        pickle.loads(blob)[0]


def test_source_read_after_close_raises(dataset):
    source = ParquetSource(dataset)
    source[0]
    source.close()
    assert len(source._cache) == 0
    assert source._num_idle_handles == 0
    with pytest.raises(SourceClosedError):
        source[0]
    with pytest.raises(SourceClosedError):
        source.__getitems__([0])
    source.close()  # closing twice is fine


def test_source_context_manager_closes(dataset, expected):
    with ParquetSource(dataset) as source:
        assert source[5] == expected[5]
    with pytest.raises(SourceClosedError, match="closed"):
        source[5]


def test_source_repr_names_its_parameters(dataset):
    text = repr(ParquetSource(dataset[0], columns=["id"], cache_row_groups=3))
    assert text == (
        f"ParquetSource(paths={dataset[0]!r}, columns=['id'], cache_row_groups=3, num_rows=10)"
    )
    many = repr(ParquetSource(dataset * 2))
    assert "(6 paths)" in many
    assert "num_rows=60" in many


# --------------------------------------------------------------------------------------
# ParquetSource: bad input


def test_missing_file_raises_file_not_found(tmp_path):
    missing = str(tmp_path / "nope.parquet")
    with pytest.raises(SourceFileNotFoundError, match=r"nope\.parquet") as info:
        ParquetSource(missing)
    assert isinstance(info.value, FileNotFoundError)


def test_empty_glob_names_the_pattern(tmp_path):
    pattern = str(tmp_path / "*.parquet")
    with pytest.raises(SourceFileNotFoundError, match="matches no Parquet file") as info:
        ParquetSource(pattern)
    assert repr(pattern) in str(info.value)


def test_no_paths_raises(tmp_path):
    with pytest.raises(SourceFileNotFoundError, match="no paths"):
        ParquetSource([])


def test_a_folder_reads_its_parquet_files_sorted(tmp_path):
    paths = write_files(tmp_path / "data", [3, 2], row_group_size=2)
    (tmp_path / "data" / "_SUCCESS").write_text("")
    expected = [row for path in sorted(paths) for row in pq.read_table(path).to_pylist()]
    assert list(ParquetSource(tmp_path / "data")) == expected


def test_a_folder_without_parquet_files_raises_with_a_hint(tmp_path):
    with pytest.raises(SourceFileNotFoundError, match=r"holds no Parquet file.*glob pattern"):
        ParquetSource(tmp_path)


@pytest.mark.parametrize("paths", [42, [b"x.parquet"], None])
def test_paths_of_the_wrong_type_raise_type_error(paths):
    with pytest.raises(TypeError, match="path"):
        ParquetSource(paths)


@pytest.mark.parametrize(
    "content", [b"this is not parquet" * 100, b"", b"PAR1"], ids=["garbage", "empty", "magic"]
)
def test_non_parquet_file_raises_source_file_error(tmp_path, content):
    path = tmp_path / "bad.parquet"
    path.write_bytes(content)
    with pytest.raises(SourceFileError, match="not a readable Parquet file") as info:
        ParquetSource(str(path))
    assert str(path) in str(info.value)
    assert info.value.__cause__ is not None


def test_truncated_parquet_file_raises_source_file_error(dataset, tmp_path):
    data = Path(dataset[0]).read_bytes()
    path = tmp_path / "truncated.parquet"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceFileError, match="not a readable Parquet file") as info:
        ParquetSource([dataset[1], str(path)])
    assert str(path) in str(info.value)
    assert info.value.__cause__ is not None


def test_corrupt_row_group_raises_when_read(tmp_path):
    path = tmp_path / "corrupt.parquet"
    table = pa.table({"a": np.arange(2000), "s": [f"v{i}" for i in range(2000)]})
    pq.write_table(table, path, row_group_size=1000)
    column = pq.ParquetFile(path).metadata.row_group(1).column(0)
    data = bytearray(path.read_bytes())
    start, size = column.data_page_offset, column.total_compressed_size
    data[start : start + size] = b"\xff" * size
    path.write_bytes(bytes(data))
    source = ParquetSource(str(path))
    assert source[0] == {"a": 0, "s": "v0"}
    with pytest.raises(SourceFileError, match=r"row group 1 of .*corrupt\.parquet") as info:
        source[1500]
    assert info.value.__cause__ is not None
    with pytest.raises(SourceFileError, match="not a readable Parquet file"):
        list(ParquetStream(str(path)))


@pytest.mark.parametrize("key", [30, -31, 10**12])
def test_key_out_of_range_raises_record_index_error(dataset, key):
    source = ParquetSource(dataset)
    with pytest.raises(RecordIndexError, match="out of range"):
        source[key]
    with pytest.raises(IndexError):
        source.__getitems__([0, key])


@pytest.mark.parametrize("key", [1.0, "1", None])
def test_non_integer_key_raises_record_key_type_error(dataset, key):
    source = ParquetSource(dataset)
    with pytest.raises(RecordKeyTypeError):
        source[key]
    with pytest.raises(TypeError):
        source.__getitems__([0, key])


def test_missing_column_names_column_file_and_available_columns(dataset):
    with pytest.raises(SourceFileError, match="'colour'") as info:
        ParquetSource(dataset, columns=["id", "colour"])
    message = str(info.value)
    assert dataset[0] in message
    assert "'blob'" in message
    assert "'score'" in message


def test_column_missing_only_from_a_later_file_names_that_file(dataset, tmp_path):
    other = str(tmp_path / "other.parquet")
    pq.write_table(pa.table({"id": [1, 2]}), other)
    with pytest.raises(SourceFileError, match=r"'name' is not in .*other\.parquet"):
        ParquetSource([dataset[0], other], columns=["id", "name"])


@pytest.mark.parametrize(
    ("columns", "error"),
    [("id", TypeError), ([], ValueError), (["id", "id"], ValueError), ([1], TypeError)],
)
def test_bad_columns_argument(dataset, columns, error):
    with pytest.raises(error, match="column"):
        ParquetSource(dataset, columns=columns)


@pytest.mark.parametrize(
    ("cache", "kind", "message"),
    [
        (-1, ValueError, "must be >= 0, got -1."),
        (1.5, TypeError, "must be an int, got float 1.5."),
        (True, TypeError, "must be an int, got bool True."),
    ],
)
def test_bad_cache_size(dataset, cache, kind, message):
    with pytest.raises(kind) as caught:
        ParquetSource(dataset, cache_row_groups=cache)
    assert str(caught.value) == f"ParquetSource: cache_row_groups {message}"


def test_schema_mismatch_names_the_first_file_that_differs(dataset, tmp_path):
    retyped = str(tmp_path / "retyped.parquet")
    renamed_later = str(tmp_path / "renamed-later.parquet")
    table = make_table(0, 3)
    pq.write_table(table.rename_columns(["ID", *table.column_names[1:]]), renamed_later)
    pq.write_table(table.set_column(0, "id", pa.array([1.5, 2.5, 3.5])), retyped)
    with pytest.raises(SourceFileError, match=r"retyped\.parquet does not have the schema") as info:
        ParquetSource([dataset[0], dataset[1], retyped, renamed_later])
    assert "'id' has type double there, but int64" in str(info.value)
    renamed = str(tmp_path / "renamed.parquet")
    pq.write_table(table.rename_columns(["ID", *table.column_names[1:]]), renamed)
    with pytest.raises(SourceFileError, match=r"renamed\.parquet does not have the schema"):
        ParquetSource([dataset[0], renamed])
    # Selecting the shared columns makes the files compatible.
    assert len(ParquetSource([dataset[0], retyped], columns=["name", "tags"])) == 13


# --------------------------------------------------------------------------------------
# ParquetStream


@pytest.mark.parametrize("batch_rows", [1, 3, 1024])
def test_stream_yields_every_record_in_order(dataset, expected, batch_rows):
    stream = ParquetStream(dataset, batch_rows=batch_rows)
    assert list(stream) == expected
    with pytest.raises(StopIteration):
        next(stream)
    assert stream.get_state() == {"file": 3, "row_group": 0, "row": 0}


def test_stream_is_a_checkpointable_iterator_and_its_own_iter(dataset):
    stream = ParquetStream(dataset)
    assert isinstance(stream, CheckpointableIterator)
    assert iter(stream) is stream
    assert stream.num_rows == 30
    assert stream.files == tuple(dataset)


def test_stream_columns(dataset):
    assert list(ParquetStream(dataset, columns=["blob", "id"])) == expected_records(
        dataset, ["blob", "id"]
    )


def test_stream_reads_each_row_group_once_in_order(dataset, decode_log):
    list(ParquetStream(dataset, batch_rows=2))
    assert decode_log == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (2, 1), (2, 2), (2, 3)]


@pytest.mark.parametrize("batch_rows", [1, 3, 1024])
def test_stream_resumes_from_every_position(dataset, expected, batch_rows):
    advanced = ParquetStream(dataset, batch_rows=batch_rows)
    next(advanced), next(advanced), next(advanced)
    for position in range(len(expected) + 1):
        stream = ParquetStream(dataset, batch_rows=batch_rows)
        for _ in range(position):
            next(stream)
        state = json.loads(json.dumps(stream.get_state()))
        fresh = ParquetStream(dataset, batch_rows=batch_rows)
        fresh.set_state(state)
        assert list(fresh) == expected[position:]
        advanced.set_state(state)
        assert list(advanced) == expected[position:]
        assert list(stream) == expected[position:]


def test_stream_states_at_the_start_and_after_a_row_group(dataset):
    stream = ParquetStream(dataset)
    assert stream.get_state() == {"file": 0, "row_group": 0, "row": 0}
    for _ in range(4):
        next(stream)
    assert stream.get_state() == {"file": 0, "row_group": 1, "row": 0}
    for _ in range(6):
        next(stream)
    assert stream.get_state() == {"file": 1, "row_group": 0, "row": 0}


def test_stream_set_state_seeks_without_reading_earlier_row_groups(dataset, expected, decode_log):
    stream = ParquetStream(dataset)
    stream.set_state({"file": 2, "row_group": 2, "row": 1})
    assert next(stream) == expected[17 + 9]
    assert decode_log == [(2, 2)]


def test_stream_accepts_positions_at_the_end_of_a_row_group(dataset, expected):
    stream = ParquetStream(dataset)
    stream.set_state({"file": 0, "row_group": 0, "row": 4})
    assert next(stream) == expected[4]
    stream.set_state({"file": 0, "row_group": 3, "row": 0})
    assert next(stream) == expected[10]
    stream.set_state({"file": 3, "row_group": 0, "row": 0})
    assert list(stream) == []


def test_stream_can_be_moved_back_after_the_end(dataset, expected):
    stream = ParquetStream(dataset)
    start = stream.get_state()
    assert list(stream) == expected
    assert list(stream) == []
    stream.set_state(start)
    assert list(stream) == expected


@pytest.mark.parametrize(
    ("state", "match"),
    [
        ([0, 0, 0], "dict"),
        (None, "dict"),
        ({"file": 0, "row_group": 0}, r"missing \['row'\]"),
        ({"file": 0, "row_group": 0, "row": 0, "epoch": 1}, r"unknown \['epoch'\]"),
        ({"file": "0", "row_group": 0, "row": 0}, r"state\['file'\]"),
        ({"file": 0, "row_group": 1.0, "row": 0}, r"state\['row_group'\]"),
        ({"file": 0, "row_group": 0, "row": True}, r"state\['row'\]"),
        ({"file": -1, "row_group": 0, "row": 0}, r"state\['file'\]"),
        ({"file": 4, "row_group": 0, "row": 0}, r"state\['file'\] = 4 is out of range"),
        ({"file": 3, "row_group": 1, "row": 0}, r"state\['row_group'\] = 1"),
        ({"file": 1, "row_group": 3, "row": 0}, r"state\['row_group'\] = 3 .* 2 row groups"),
        ({"file": 0, "row_group": 2, "row": 3}, r"state\['row'\] = 3 .* 2 rows"),
        ({"file": 0, "row_group": 3, "row": 1}, r"state\['row'\] = 1"),
    ],
)
def test_stream_bad_state_raises_invalid_state_error(dataset, expected, state, match):
    stream = ParquetStream(dataset)
    next(stream)
    with pytest.raises(InvalidStateError, match=match):
        stream.set_state(state)
    assert next(stream) == expected[1]  # a rejected state leaves the stream where it was


def test_stream_close_and_context_manager(dataset, expected):
    with ParquetStream(dataset) as stream:
        assert next(stream) == expected[0]
    with pytest.raises(SourceClosedError):
        next(stream)
    with pytest.raises(SourceClosedError):
        stream.set_state({"file": 0, "row_group": 0, "row": 0})
    assert stream.get_state() == {"file": 0, "row_group": 0, "row": 1}
    assert stream._table is None
    assert stream._handle is None


def test_stream_pickles_mid_way_and_continues(dataset, expected):
    stream = ParquetStream(dataset, batch_rows=3)
    for _ in range(5):
        next(stream)
    restored = pickle.loads(pickle.dumps(stream))
    assert restored._handle is None
    assert list(restored) == expected[5:]
    assert list(stream) == expected[5:]


def test_stream_repr_names_its_parameters(dataset):
    assert repr(ParquetStream(dataset[1], columns=["id"], batch_rows=5)) == (
        f"ParquetStream(paths={dataset[1]!r}, columns=['id'], batch_rows=5, num_rows=7)"
    )


def test_stream_bad_input(tmp_path):
    with pytest.raises(SourceFileNotFoundError, match="matches no Parquet file"):
        ParquetStream(str(tmp_path / "*.parquet"))
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"\x00" * 100)
    with pytest.raises(SourceFileError, match="not a readable Parquet file"):
        ParquetStream(str(garbage))
    with pytest.raises(ValueError, match="batch_rows"):
        ParquetStream(str(garbage), batch_rows=0)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    file_rows=st.lists(st.integers(0, 9), min_size=1, max_size=4),
    row_group_size=st.integers(1, 4),
    batch_rows=st.integers(1, 5),
    data=st.data(),
)
def test_stream_and_source_agree_with_pyarrow_on_any_layout(
    file_rows, row_group_size, batch_rows, data
):
    with tempfile.TemporaryDirectory() as folder:
        paths = write_files(Path(folder), file_rows, row_group_size)
        reference = expected_records(paths)
        position = data.draw(st.integers(0, len(reference)))
        stream = ParquetStream(paths, batch_rows=batch_rows)
        for _ in range(position):
            next(stream)
        resumed = ParquetStream(paths, batch_rows=batch_rows)
        resumed.set_state(json.loads(json.dumps(stream.get_state())))
        assert list(resumed) == reference[position:]
        assert list(stream) == reference[position:]
        with ParquetSource(paths, cache_row_groups=1) as source:
            assert len(source) == len(reference)
            keys = data.draw(st.lists(st.integers(0, max(len(reference) - 1, 0))))
            if reference:
                assert source.__getitems__(keys) == [reference[key] for key in keys]


# --------------------------------------------------------------------------------------
# Documentation


@pytest.mark.parametrize(
    "module",
    [parquet_module, parquet_stream_module, parquet_index_module],
    ids=lambda m: m.__name__,
)
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_exports_file_lists_the_public_names():
    listing = Path(parquet_module.__file__).with_name("_parquet_exports.txt").read_text()
    names = [line for line in listing.splitlines() if line and not line.startswith("#")]
    assert names == ["ParquetSource", "ParquetStream"]
    assert all(name in parquet_module.__all__ for name in names)
    assert os.path.basename(parquet_module.__file__) == "_parquet.py"


def test_a_row_that_does_not_convert_names_its_file_and_index_there(tmp_path):
    good = pa.table({"s": ["a", "b", "c"], "i": [0, 1, 2]})
    bad_strings = pa.array([b"d", b"\xff\xfe", b"f"], pa.binary()).view(pa.string())
    first, second = str(tmp_path / "a-0.parquet"), str(tmp_path / "a-1.parquet")
    pq.write_table(good, first)
    pq.write_table(pa.table({"s": bad_strings, "i": [3, 4, 5]}), second, row_group_size=1)
    source = ParquetSource([first, second])
    for read in (lambda: source[4], lambda: source.__getitems__([0, 5, 4])):
        with pytest.raises(CorruptRecordError) as caught:
            read()
        assert str(caught.value).endswith(
            f"; in record 1 of the Parquet file {second!r} (record key 4 of the source)"
        )
        assert str(caught.value).startswith(
            f"ParquetSource: {second}, row group 1: a string column holds bytes"
        )
    assert source.__getitems__([5, 3]) == [{"s": "f", "i": 5}, {"s": "d", "i": 3}]
