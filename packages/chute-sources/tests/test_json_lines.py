import json
import operator
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute_sources._json_lines as json_lines_module
from chute_core import (
    ChuteError,
    CorruptRecordError,
    RandomAccessDataSource,
    RecordIndexError,
    SourceClosedError,
    SourceFileError,
    SourceFileNotFoundError,
    SupportsGetItems,
)
from chute_sources import JsonLinesSource

PETS = [
    {"name": "cat", "legs": 4, "tags": ["soft", "é"]},
    [1, 2.5, None, True],
    "just a string",
    7,
    {"name": "eel", "legs": 0, "nested": {"deep": [{}]}},
]


@pytest.fixture
def pets(tmp_path: Path) -> Path:
    """PETS, one a line, with blank lines between and no line end after the last."""
    lines = [json.dumps(value, ensure_ascii=False) for value in PETS]
    text = lines[0] + "\n\n" + lines[1] + "\r\n\r\n" + "\n".join(lines[2:])
    path = tmp_path / "pets.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


# Records ---------------------------------------------------------------------------------


def test_records_are_the_non_blank_lines_decoded(pets: Path) -> None:
    source = JsonLinesSource(pets)
    assert len(source) == 5
    assert list(source) == PETS
    assert [source[i] for i in range(-5, 0)] == PETS
    assert source.path == str(pets)


def test_batched_reads_in_any_order_with_repeats_equal_single_reads(pets: Path) -> None:
    source = JsonLinesSource(pets)
    keys = [4, 0, 4, -1, 2]
    assert source.__getitems__(keys) == [source[key] for key in keys]
    assert source.__getitems__([]) == []


def test_each_read_gives_a_new_value(pets: Path) -> None:
    source = JsonLinesSource(pets)
    first = source[0]
    first["name"] = "changed"
    assert source[0]["name"] == "cat"


def test_empty_and_blank_files_have_no_records(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "blank.jsonl").write_bytes(b"\n\r\n\n")
    for name in ("empty.jsonl", "blank.jsonl"):
        source = JsonLinesSource(tmp_path / name)
        assert len(source) == 0
        assert list(source) == []


def test_is_a_random_access_source(pets: Path) -> None:
    source = JsonLinesSource(pets)
    assert isinstance(source, RandomAccessDataSource)
    assert isinstance(source, SupportsGetItems)


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.tuples(_VALUES, st.sampled_from(["\n", "\r\n", "\n\n", "\n\r\n"]))),
    final_line_end=st.booleans(),
    chunk=st.integers(1, 64),
)
def test_any_values_and_line_ends_give_back_every_value(values, final_line_end, chunk) -> None:
    # A small scan chunk puts line ends on every side of a chunk boundary.
    text = "".join(json.dumps(value) + end for value, end in values)
    if not final_line_end:
        text = text.rstrip("\r\n")
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory() as folder:
        patch.setattr(json_lines_module, "_SCAN_CHUNK", chunk)
        path = os.path.join(folder, "values.jsonl")
        with open(path, "wb") as file:
            file.write(text.encode())
        source = JsonLinesSource(path)
        assert list(source) == [value for value, _ in values]


# Bad keys and bad input -----------------------------------------------------------------


@pytest.mark.parametrize("key", [5, -6, 100])
def test_out_of_range_keys_name_the_source_and_its_length(pets: Path, key: int) -> None:
    source = JsonLinesSource(pets)
    message = rf"JsonLinesSource\(path='.*pets.jsonl', len=5\): record key {key} is out of range"
    with pytest.raises(RecordIndexError, match=message):
        source[key]
    with pytest.raises(IndexError):
        source.__getitems__([0, key])


def test_a_line_that_is_not_json_names_the_file_and_the_line_when_read(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n{"a": \n{"a": 4}\n')
    source = JsonLinesSource(path)  # Lines are decoded when read, not on opening.
    assert len(source) == 4
    assert source.__getitems__([3, 1, 0]) == [{"a": 4}, {"a": 2}, {"a": 1}]
    for read in (lambda: source[2], lambda: source.__getitems__([0, 2])):
        with pytest.raises(CorruptRecordError) as caught:
            read()
        assert str(caught.value) == (
            f"{str(path)!r} line 4 is not valid JSON: Expecting value: line 1 column 7 (char 6)"
        )
        assert isinstance(caught.value, ValueError)
        assert isinstance(caught.value.__cause__, json.JSONDecodeError)


@pytest.mark.parametrize(
    ("line", "detail"),
    [
        (b'{"s": "\xff\xfe"}', "is not valid JSON: 'utf-8' codec can't decode"),
        (b'{"n": ' + b"7" * 5000 + b"}", "is not valid JSON: Exceeds the limit"),
        (b'{"s": "a\x00b"}', "is not valid JSON: Invalid control character"),
        (b"   ", "is not valid JSON: Expecting value"),
        (b"[" * 100_000 + b"]" * 100_000, "nests arrays or objects too deeply to decode"),
    ],
)
def test_undecodable_lines_raise_a_corrupt_record_error_naming_the_line(
    tmp_path: Path, line: bytes, detail: str
) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"a": 1}\n' + line + b"\n")
    source = JsonLinesSource(str(path))
    assert source[0] == {"a": 1}
    with pytest.raises(CorruptRecordError, match=r"^'.*r\.jsonl' line 2 ") as caught:
        source[1]
    assert detail in str(caught.value)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SourceFileNotFoundError, match=r"JSON Lines file '.*nope\.jsonl'") as info:
        JsonLinesSource(tmp_path / "nope.jsonl")
    assert isinstance(info.value, FileNotFoundError)


def test_a_folder_is_not_a_json_lines_file(tmp_path: Path) -> None:
    with pytest.raises(SourceFileError, match=r"is a folder, not a JSON Lines file"):
        JsonLinesSource(tmp_path)


@pytest.mark.parametrize("path", [b"r.jsonl", 3, None, ["r.jsonl"]])
def test_a_path_of_the_wrong_type_is_refused(path: Any) -> None:
    with pytest.raises(TypeError, match=r"JsonLinesSource: path must be a str or os.PathLike"):
        JsonLinesSource(path)


# Pickling, closing, repr -----------------------------------------------------------------


def test_pickling_sends_the_path_not_the_records(pets: Path) -> None:
    source = JsonLinesSource(pets)
    source[0]
    payload = pickle.dumps(source)
    assert b"soft" not in payload
    copy = pickle.loads(payload)
    assert len(copy) == 5
    assert list(copy) == PETS
    assert repr(copy) == repr(source)


def test_a_relative_path_is_resolved_when_the_source_is_opened(
    pets: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(pets.parent)
    source = JsonLinesSource("pets.jsonl")
    copy = pickle.loads(pickle.dumps(source))
    monkeypatch.chdir(tmp_path.parent)
    assert copy[0] == source[0] == PETS[0]
    assert repr(source) == "JsonLinesSource(path='pets.jsonl', len=5)"


def test_read_in_a_spawned_process(pets: Path, spawn_pool: Callable[..., Any]) -> None:
    source = JsonLinesSource(pets)
    assert spawn_pool(operator.getitem, source, 4) == PETS[4]  # spawn_pool: see conftest.py
    assert spawn_pool(JsonLinesSource.__getitems__, source, [3, 0]) == [PETS[3], PETS[0]]


def test_unpickled_source_fails_clearly_when_the_file_changed(pets: Path) -> None:
    payload = pickle.dumps(JsonLinesSource(pets))
    with open(pets, "a") as file:
        file.write('\n{"name": "newt"}\n')
    copy = pickle.loads(payload)
    assert len(copy) == 5
    with pytest.raises(SourceFileError, match=r"changed after this source was opened"):
        copy[0]


def test_close_and_context_manager(pets: Path) -> None:
    with JsonLinesSource(pets) as source:
        assert source[1] == PETS[1]
    with pytest.raises(SourceClosedError, match=r"JsonLinesSource\(.*\) was closed"):
        source[0]
    with pytest.raises(SourceClosedError):
        source.__getitems__([0])
    source.close()  # Closing again is harmless.
    copy = pickle.loads(pickle.dumps(source))
    with pytest.raises(SourceClosedError):
        copy[0]
    assert len(copy) == 5


def test_errors_are_chute_errors(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("not json\n")
    with pytest.raises(ChuteError):
        JsonLinesSource(path)[0]
