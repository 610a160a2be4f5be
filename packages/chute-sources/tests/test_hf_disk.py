"""`HuggingFaceDiskSource` against folders written by the real `datasets` package.

Tests that need `datasets` take the `hf` fixture and are skipped where it is not
installed (a layer's own environment); the others build save_to_disk folders with
pyarrow alone.
"""

import json
import operator
import os
import pickle
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from chute_core import (
    ChuteError,
    CorruptRecordError,
    InvalidArgumentError,
    RandomAccessDataSource,
    RecordIndexError,
    SourceClosedError,
    SourceFileError,
    SourceFileNotFoundError,
    SupportsGetItems,
)
from chute_sources import HuggingFaceDiskSource

ROWS = 3500  # save_to_disk writes batches of at most 1,000 rows: 2 batches in each of 3 files.


def _columns(count: int) -> dict[str, list[Any]]:
    return {
        "text": [f"row {i} é{'x' * (i % 7)}" for i in range(count)],
        "id": [None if i % 97 == 5 else i * 3 - 7 for i in range(count)],
        "tokens": [list(range(i % 9, 2 * (i % 9))) for i in range(count)],
        "score": [i / 7 - 100.0 for i in range(count)],
    }


@pytest.fixture(scope="module")
def hf() -> Any:
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    return datasets


@pytest.fixture(scope="module")
def sharded(hf: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3,500 rows of string, int (with nulls), list-of-int and float columns in 3 files."""
    path = tmp_path_factory.mktemp("hf") / "sharded"
    hf.Dataset.from_dict(_columns(ROWS)).save_to_disk(str(path), num_shards=3)
    return path


@pytest.fixture(scope="module")
def splits(hf: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hf") / "dict"
    features = hf.Features(
        {
            "text": hf.Value("string"),
            "label": hf.ClassLabel(names=["neg", "pos"]),
            "vector": hf.List(hf.Value("float32"), length=3),
        }
    )
    train = {"text": ["good", "bad", "fine"], "label": [1, 0, 1], "vector": [[1, 2, 3]] * 3}
    test = {"text": ["meh"], "label": [0], "vector": [[0.5, -1.25, 1e-3]]}
    hf.DatasetDict(
        {
            "train": hf.Dataset.from_dict(train, features=features),
            "test": hf.Dataset.from_dict(test, features=features),
        }
    ).save_to_disk(str(path))
    return path


def _write_stream(path: Path, table: pa.Table, max_chunksize: int | None = None) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=max_chunksize)


def _saved(folder: Path, *tables: pa.Table, **state: Any) -> Path:
    """A save_to_disk folder written with pyarrow: one data file per table."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"data-{i:05d}-of-{len(tables):05d}.arrow" for i in range(len(tables))]
    for name, table in zip(names, tables, strict=True):
        _write_stream(folder / name, table, max_chunksize=2)
    state = {"_data_files": [{"filename": name} for name in names], **state}
    (folder / "state.json").write_text(json.dumps(state))
    return folder


# Records ----------------------------------------------------------------------------------


def test_every_row_equals_load_from_disk(hf: Any, sharded: Path) -> None:
    expected = hf.load_from_disk(str(sharded))
    source = HuggingFaceDiskSource(sharded)
    assert len(source) == ROWS
    assert [len(rows) for rows in source._batch_rows] == [2, 2, 2]
    assert source.file_records == (1167, 1167, 1166)
    assert [os.path.basename(f) for f in source.files] == [
        f"data-0000{i}-of-00003.arrow" for i in range(3)
    ]
    for i in range(ROWS):
        assert source[i] == expected[i], i
    assert source.fingerprint == json.loads((sharded / "state.json").read_text())["_fingerprint"]
    assert source[4] == {
        "text": "row 4 éxxxx",
        "id": 5,
        "tokens": [4, 5, 6, 7],
        "score": 4 / 7 - 100,
    }
    assert source[5]["id"] is None


def test_batched_reads_in_any_order_equal_single_reads(sharded: Path) -> None:
    source = HuggingFaceDiskSource(sharded)
    keys = [ROWS - 1, 0, 1166, 1167, 999, 1000, 0, -1, 2333, 2334, 1500]
    expected = [source[key] for key in keys]
    assert source.__getitems__(keys) == expected
    assert source.__getitems__(np.asarray(keys, np.int32)) == expected
    assert source.__getitems__([]) == []
    rng = np.random.default_rng(0)
    shuffled = rng.permutation(ROWS)
    assert source.__getitems__(shuffled) == [source[int(i)] for i in shuffled]


def test_columns_reads_only_the_columns_asked_for(hf: Any, sharded: Path) -> None:
    source = HuggingFaceDiskSource(sharded, columns=["tokens", "text"])
    expected = hf.load_from_disk(str(sharded))
    assert source.columns == ("tokens", "text")
    assert source.schema.names == ["tokens", "text"]
    assert list(source[2]) == ["tokens", "text"]
    for i in (0, 1166, 1167, ROWS - 1):
        assert source[i] == {"tokens": expected[i]["tokens"], "text": expected[i]["text"]}
    assert source.__getitems__([3, 2]) == [source[3], source[2]]


def test_dataset_dict_split_equals_load_from_disk(hf: Any, splits: Path) -> None:
    expected = hf.load_from_disk(str(splits))
    for split in ("train", "test"):
        source = HuggingFaceDiskSource(splits, split=split)
        assert source.split == split
        assert len(source) == len(expected[split])
        assert list(source) == [expected[split][i] for i in range(len(source))]
    test = HuggingFaceDiskSource(splits, split="test")
    assert test[0] == {"text": "meh", "label": 0, "vector": [0.5, -1.25, np.float32(1e-3).item()]}
    assert str(test.schema.field("vector").type) == "fixed_size_list<item: float>[3]"


def test_an_empty_data_set_has_no_records(hf: Any, tmp_path: Path) -> None:
    hf.Dataset.from_dict({"text": ["a"]}).select([]).save_to_disk(str(tmp_path / "e"))
    source = HuggingFaceDiskSource(tmp_path / "e", columns=["text"])
    assert len(source) == 0
    assert source.__getitems__([]) == []
    assert source.schema is None
    message = r"column 'txt' is not in .*; its columns are \['text'\]"
    with pytest.raises(SourceFileError, match=message):
        HuggingFaceDiskSource(tmp_path / "e", columns=["txt"])


def test_it_is_a_random_access_source_and_repr_names_path_and_fingerprint(
    sharded: Path,
) -> None:
    source = HuggingFaceDiskSource(sharded, columns=["text"])
    assert isinstance(source, RandomAccessDataSource)
    assert isinstance(source, SupportsGetItems)
    fingerprint = json.loads((sharded / "state.json").read_text())["_fingerprint"]
    assert repr(source) == (
        f"HuggingFaceDiskSource(path={str(sharded)!r}, columns=['text'], num_rows=3500, "
        f"fingerprint={fingerprint!r})"
    )


def test_repr_names_the_split(splits: Path) -> None:
    assert repr(HuggingFaceDiskSource(str(splits), "test")).startswith(
        f"HuggingFaceDiskSource(path={str(splits)!r}, split='test', columns=None, num_rows=1,"
    )


# Errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [3, -4, 10**20])
def test_out_of_range_keys_raise_record_index_error(tmp_path: Path, key: int) -> None:
    source = HuggingFaceDiskSource(_saved(tmp_path / "d", pa.table({"x": [1, 2, 3]})))
    message = (
        rf"record key {key} is out of range; this source has 3 records \(valid keys are 0..2, "
        r"or negative from the end\)\."
    )
    with pytest.raises(RecordIndexError, match=message):
        source[key]
    with pytest.raises(IndexError, match=message):
        source.__getitems__([0, key])


def test_a_missing_folder_is_source_file_not_found(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    with pytest.raises(SourceFileNotFoundError) as caught:
        HuggingFaceDiskSource(missing)
    assert str(caught.value) == (
        f"HuggingFaceDiskSource: the folder {missing!r} does not exist "
        f"(working directory {os.getcwd()!r})."
    )
    assert isinstance(caught.value, FileNotFoundError)


def test_a_folder_without_state_json_says_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "data-00000-of-00001.arrow").write_bytes(b"")
    with pytest.raises(SourceFileNotFoundError) as caught:
        HuggingFaceDiskSource(tmp_path)
    assert str(caught.value) == (
        f"HuggingFaceDiskSource: {str(tmp_path)!r} is not a folder written by "
        "Dataset.save_to_disk: it has no state.json (such a folder holds state.json, "
        "dataset_info.json and data-*.arrow files)."
    )


def test_a_file_instead_of_the_folder_is_a_source_file_error(tmp_path: Path) -> None:
    folder = _saved(tmp_path / "d", pa.table({"x": [1]}))
    with pytest.raises(SourceFileError, match=r"is a file; pass the folder that Dataset.save_to"):
        HuggingFaceDiskSource(folder / "state.json")


def test_a_data_file_listed_in_state_json_but_missing_is_named(tmp_path: Path) -> None:
    folder = _saved(tmp_path / "d", pa.table({"x": [1]}), pa.table({"x": [2]}))
    os.unlink(folder / "data-00001-of-00002.arrow")
    with pytest.raises(SourceFileNotFoundError) as caught:
        HuggingFaceDiskSource(folder)
    assert str(caught.value) == (
        f"HuggingFaceDiskSource: {folder / 'state.json'} lists the data file "
        f"'data-00001-of-00002.arrow', which is missing from {str(folder)!r}; copy the whole "
        "folder again."
    )


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ("{not json", r"state.json is not valid JSON"),
        ('{"_fingerprint": "x"}', r'state.json does not list the data files as "_data_files"'),
        ('{"_data_files": [{"name": "a.arrow"}]}', r"does not list the data files"),
    ],
)
def test_a_damaged_state_json_is_a_source_file_error(
    tmp_path: Path, state: str, message: str
) -> None:
    (tmp_path / "state.json").write_text(state)
    with pytest.raises(SourceFileError, match=message):
        HuggingFaceDiskSource(tmp_path)


def test_a_file_that_is_not_an_arrow_stream_is_a_source_file_error(tmp_path: Path) -> None:
    folder = _saved(tmp_path / "d", pa.table({"x": [1]}))
    (folder / "data-00000-of-00001.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(SourceFileError, match=r"is not an Arrow IPC stream as save_to_disk"):
        HuggingFaceDiskSource(folder)


def test_files_with_different_schemas_are_refused(tmp_path: Path) -> None:
    folder = _saved(tmp_path / "d", pa.table({"x": [1]}), pa.table({"x": ["one"]}))
    with pytest.raises(SourceFileError, match=r"does not have the schema of .*data-00000"):
        HuggingFaceDiskSource(folder)


def test_an_indices_mapping_is_refused_with_the_fix(tmp_path: Path) -> None:
    indices = [{"filename": "indices.arrow"}]
    folder = _saved(tmp_path / "d", pa.table({"x": [1, 2]}), _indices_data_files=indices)
    with pytest.raises(SourceFileError) as caught:
        HuggingFaceDiskSource(folder)
    assert str(caught.value) == (
        f"HuggingFaceDiskSource: {str(folder)!r} was saved with an indices mapping "
        "(_indices_data_files in state.json, from select, shuffle, sort or train_test_split "
        "without flattening). Load it with datasets, call dataset.flatten_indices() and "
        "save_to_disk again."
    )


def test_a_missing_column_lists_the_columns(tmp_path: Path) -> None:
    folder = _saved(tmp_path / "d", pa.table({"text": ["a"], "id": [1]}))
    with pytest.raises(SourceFileError) as caught:
        HuggingFaceDiskSource(folder, columns=["text", "Id"])
    assert str(caught.value) == (
        f"HuggingFaceDiskSource: column 'Id' is not in {str(folder)!r}; its columns are "
        "['text', 'id']. Fix `columns=` (names are case-sensitive)."
    )


@pytest.mark.parametrize(
    ("columns", "error", "message"),
    [
        ("text", TypeError, r"columns must be a list of column names, got the string 'text'"),
        ([], ValueError, r"columns is empty; pass None to read every column"),
        (["a", "a"], ValueError, r"columns lists \['a'\] more than once"),
    ],
)
def test_bad_columns_arguments(tmp_path: Path, columns: Any, error: type, message: str) -> None:
    folder = _saved(tmp_path / "d", pa.table({"a": [1]}))
    with pytest.raises(error, match=message):
        HuggingFaceDiskSource(folder, columns=columns)


def test_split_errors_name_the_splits(splits: Path) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        HuggingFaceDiskSource(splits)
    assert str(caught.value) == (
        f"HuggingFaceDiskSource: {str(splits)!r} holds a DatasetDict with the splits "
        f"['train', 'test']; choose one with split=, e.g. "
        f"HuggingFaceDiskSource({str(splits)!r}, split='train')."
    )
    with pytest.raises(InvalidArgumentError, match=r"has no split 'dev'; its splits are \['train'"):
        HuggingFaceDiskSource(splits, split="dev")
    with pytest.raises(InvalidArgumentError, match=r"split='train' was given, but .* holds one"):
        HuggingFaceDiskSource(splits / "test", split="train")


def test_a_path_that_is_not_text_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"path must be a str or os.PathLike"):
        HuggingFaceDiskSource(3)  # type: ignore[arg-type]


def test_invalid_utf8_in_a_string_column_names_file_and_row(tmp_path: Path) -> None:
    text = pa.array([b"ok", b"fine", b"\xff bad", b"good"], pa.binary()).view(pa.string())
    folder = _saved(tmp_path / "d", pa.table({"text": text}))
    source = HuggingFaceDiskSource(folder)
    assert source[3] == {"text": "good"}
    with pytest.raises(CorruptRecordError) as caught:
        source.__getitems__([3, 2])
    file = str(folder / "data-00000-of-00001.arrow")
    assert str(caught.value).endswith(
        f"; in record 2 of the Arrow file {file!r} (record key 2 of the source)"
    )
    with pytest.raises(ChuteError, match=r"record 2 of the Arrow file"):
        source[-2]


# Pickling, threads, closing ---------------------------------------------------------------


def test_pickling_sends_the_index_not_the_data(sharded: Path) -> None:
    source = HuggingFaceDiskSource(sharded)
    payload = pickle.dumps(source)
    assert b"row 17 " not in payload
    assert len(payload) < 10_000
    copy = pickle.loads(payload)
    assert len(copy) == ROWS
    assert repr(copy) == repr(source)
    keys = [ROWS - 1, 0, 1200, 7]
    assert copy.__getitems__(keys) == source.__getitems__(keys)


def test_read_in_a_spawned_process(sharded: Path, spawn_pool: Callable[..., Any]) -> None:
    source = HuggingFaceDiskSource(sharded, columns=["text"])
    assert spawn_pool(operator.getitem, source, 2400) == source[2400]  # see conftest.py
    assert spawn_pool(HuggingFaceDiskSource.__getitems__, source, [3, 0]) == [source[3], source[0]]


def test_unpickled_source_fails_clearly_when_the_files_changed(tmp_path: Path) -> None:
    folder = _saved(tmp_path / "d", pa.table({"x": [1, 2, 3]}))
    payload = pickle.dumps(HuggingFaceDiskSource(folder))
    _write_stream(folder / "data-00000-of-00001.arrow", pa.table({"x": [1, 2, 3, 4]}))
    copy = pickle.loads(payload)
    assert len(copy) == 3
    with pytest.raises(SourceFileError, match=r"changed since the source was created .*now hold 4"):
        copy[0]


def test_reads_from_many_threads_equal_reads_from_one(sharded: Path) -> None:
    source = pickle.loads(pickle.dumps(HuggingFaceDiskSource(sharded)))  # Maps on first read.
    expected = [source.__getitems__(range(i, ROWS, 8)) for i in range(8)]
    copy = pickle.loads(pickle.dumps(source))
    found: list[Any] = [None] * 8

    def read(i: int) -> None:
        found[i] = copy.__getitems__(range(i, ROWS, 8))

    threads = [threading.Thread(target=read, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == expected


def test_close_and_context_manager(tmp_path: Path) -> None:
    folder = _saved(tmp_path / "d", pa.table({"x": [1, 2, 3]}))
    with HuggingFaceDiskSource(folder) as source:
        payload = pickle.dumps(source)
        assert source[1] == {"x": 2}
    with pytest.raises(SourceClosedError, match=r"was closed; create a new source"):
        source[0]
    source.close()  # Idempotent.
    assert pickle.loads(payload)[2] == {"x": 3}


def test_a_moved_folder_read_by_a_copy_that_was_pickled_before(tmp_path: Path) -> None:
    folder = _saved(tmp_path / "d", pa.table({"x": [1]}))
    payload = pickle.dumps(HuggingFaceDiskSource(folder))
    shutil.move(folder, tmp_path / "moved")
    with pytest.raises(SourceFileNotFoundError, match=r"no longer exists"):
        pickle.loads(payload)[0]
