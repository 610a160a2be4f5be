import os
import pickle

import numpy as np
import pytest
from array_record.python.array_record_module import ArrayRecordReader, ArrayRecordWriter
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_core import (
    CorruptRecordError,
    RecordCodecError,
    RecordIndexError,
    SourceClosedError,
    SourceFileError,
    SourceFileNotFoundError,
    read_records,
)
from chute_sources import (
    ArrayRecordSource,
    FileInstruction,
    decode_record,
    encode_record,
    shard_paths,
    write_array_record,
)
from chute_sources.internal import read_one_by_one
from chute_testing import assert_trees_equal


@pytest.fixture(params=[False, True], ids=["parallel", "one_by_one"])
def read_mode(request):
    """Reads of a batch in ArrayRecord's parallel read, or one record at a time."""
    read_one_by_one(request.param)
    yield request.param
    read_one_by_one(False)


def _records(n):
    rng = np.random.default_rng(0)
    return [
        {"image": rng.integers(0, 255, (8, 8, 3), dtype=np.uint8), "label": i, "name": f"r{i}"}
        for i in range(n)
    ]


def test_write_then_read_every_item_across_shards(tmp_path, read_mode):
    records = _records(23)
    paths = write_array_record(records, tmp_path / "train", num_shards=4)
    assert paths == shard_paths(tmp_path / "train", 4)
    assert os.path.basename(paths[0]) == "train-00000-of-00004.array_record"
    with ArrayRecordSource(paths) as source:
        assert len(source) == 23
        for i, record in enumerate(records):
            assert_trees_equal(source[i], record)
        keys = [22, 0, 5, 5, 17, -1]
        assert_trees_equal(source.__getitems__(keys), [records[k] for k in keys])


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 30), st.integers(1, 6))
def test_shards_keep_the_order_for_any_size(tmp_path_factory, n, shards):
    folder = tmp_path_factory.mktemp("w")
    paths = write_array_record(list(range(n)), folder / "x", num_shards=shards)
    assert len(paths) == shards
    assert list(ArrayRecordSource(paths)) == list(range(n))


def test_globs_and_folders_expand_sorted(tmp_path):
    write_array_record(list(range(10)), tmp_path / "d", num_shards=3)
    (tmp_path / "notes.txt").write_text("not a shard")
    assert list(ArrayRecordSource(str(tmp_path / "d-*"))) == list(range(10))
    assert list(ArrayRecordSource(tmp_path)) == list(range(10))


def test_files_written_by_array_record_read_as_raw_bytes(tmp_path):
    path = str(tmp_path / "foreign.array_record")
    writer = ArrayRecordWriter(path, "group_size:1")
    payloads = [b"", b"\x0a\x03abc", os.urandom(5000), b"plain"]
    for payload in payloads:
        writer.write(payload)
    writer.close()
    assert list(ArrayRecordSource(path)) == payloads
    assert list(ArrayRecordSource(path, decode=False)) == payloads
    assert ArrayRecordSource(path, decode=len)[2] == 5000
    with pytest.raises(CorruptRecordError, match="not a chute record"):
        ArrayRecordSource(path, decode=True)[2]


def test_files_chute_writes_read_with_array_records_reader(tmp_path):
    records = _records(5)
    (path,) = write_array_record(records, tmp_path / "ours")
    reader = ArrayRecordReader(path, "readahead_buffer_size:0")
    assert reader.num_records() == 5
    assert "group_size:1" in reader.writer_options_string()
    raw = reader.read_all()
    reader.close()
    for data, record in zip(raw, records, strict=True):
        assert_trees_equal(decode_record(data), record)
    assert raw[0] == encode_record(records[0])


def test_raw_bytes_written_with_encode_false(tmp_path):
    (path,) = write_array_record([b"a", b"bc"], tmp_path / "raw", encode=False)
    assert ArrayRecordSource(path, decode=False).__getitems__([1, 0]) == [b"bc", b"a"]
    with pytest.raises(RecordCodecError, match="record 1 is a str"):
        write_array_record([b"a", "b"], tmp_path / "bad", encode=False)
    assert not any("bad" in name for name in os.listdir(tmp_path))


def test_a_failed_write_leaves_no_files(tmp_path):
    with pytest.raises(RecordCodecError):
        write_array_record([1, 2, object()], tmp_path / "x", num_shards=2)
    assert os.listdir(tmp_path) == []


def test_sharding_an_unsized_iterable_is_refused(tmp_path):
    with pytest.raises(TypeError, match="sized collection"):
        write_array_record(iter([1, 2]), tmp_path / "x", num_shards=2)
    with pytest.raises(ValueError, match="num_shards"):
        write_array_record([1], tmp_path / "x", num_shards=0)


def test_file_instructions_select_slices_without_opening(tmp_path, monkeypatch):
    paths = write_array_record(list(range(20)), tmp_path / "f", num_shards=2)
    instructions = [
        FileInstruction(paths[0], skip=2, take=3, examples_in_shard=10),
        FileInstruction(paths[1], skip=7, take=-1, examples_in_shard=10),
    ]
    import chute_sources._array_record as module

    opened = []
    original = module.open_array_record_reader
    monkeypatch.setattr(
        module, "open_array_record_reader", lambda p, *a: opened.append(p) or original(p, *a)
    )
    source = ArrayRecordSource(instructions)
    assert opened == []
    assert len(source) == 6
    assert list(source) == [2, 3, 4, 17, 18, 19]


def test_tfds_like_instruction_objects_are_accepted(tmp_path):
    (path,) = write_array_record(list(range(4)), tmp_path / "t")

    class Instruction:  # Any object with the four fields, like TFDS's.
        filename = path
        skip = 1
        take = 2
        examples_in_shard = 4

    assert list(ArrayRecordSource([Instruction()])) == [1, 2]


def test_bad_file_instructions_are_refused(tmp_path):
    with pytest.raises(ValueError, match="examples_in_shard must be given"):
        FileInstruction("x")
    with pytest.raises(ValueError, match="exceeds"):
        FileInstruction("x", skip=5, take=6, examples_in_shard=10)
    with pytest.raises(SourceFileNotFoundError, match="file instruction"):
        ArrayRecordSource(FileInstruction(str(tmp_path / "nope"), examples_in_shard=1))


def test_missing_paths_and_empty_globs(tmp_path):
    with pytest.raises(SourceFileNotFoundError, match="does not exist"):
        ArrayRecordSource(tmp_path / "missing.array_record")
    with pytest.raises(SourceFileNotFoundError, match="matches no ArrayRecord file"):
        ArrayRecordSource(str(tmp_path / "*.array_record"))
    with pytest.raises(SourceFileNotFoundError, match="holds no ArrayRecord file"):
        ArrayRecordSource(tmp_path)
    with pytest.raises(FileNotFoundError):  # Also a built-in FileNotFoundError.
        ArrayRecordSource([])


def test_a_file_that_is_not_array_record(tmp_path):
    path = tmp_path / "junk.array_record"
    path.write_bytes(b"this is not an array record file" * 10)
    with pytest.raises(SourceFileError, match=r"junk.array_record' is not a readable ArrayRecord"):
        ArrayRecordSource(path)


def test_a_truncated_file(tmp_path):
    (path,) = write_array_record(_records(200), tmp_path / "t")
    with open(path, "rb") as file:
        data = file.read()
    with open(path, "wb") as file:
        file.write(data[: len(data) // 2])
    with pytest.raises(SourceFileError, match="not a readable ArrayRecord"):
        ArrayRecordSource(path)


def test_a_file_corrupted_in_the_middle_names_file_and_keys(tmp_path, read_mode):
    (path,) = write_array_record(_records(400), tmp_path / "c")
    with open(path, "rb") as file:
        data = bytearray(file.read())
    for i in range(len(data) // 3, len(data) // 3 + 4000):
        data[i] ^= 0x5A
    with open(path, "wb") as file:
        file.write(bytes(data))
    source = ArrayRecordSource(path)
    with pytest.raises(SourceFileError, match=r"cannot read record keys .* from ArrayRecord file"):
        source.__getitems__(list(range(400)))


def test_index_errors_name_the_source(tmp_path):
    paths = write_array_record([1, 2], tmp_path / "i")
    with pytest.raises(
        RecordIndexError, match=r"ArrayRecordSource\(.*record key 2 is out of range"
    ):
        ArrayRecordSource(paths)[2]


def test_bad_decode_argument():
    with pytest.raises(ValueError, match="decode must be"):
        ArrayRecordSource("x", decode="json")  # type: ignore[arg-type]


def test_pickling_reopens_files_and_works_in_a_spawned_process(tmp_path, spawn_pool):
    records = _records(12)
    source = ArrayRecordSource(write_array_record(records, tmp_path / "p", num_shards=3))
    source[0]  # Opens a reader, which must not be pickled.
    copy = pickle.loads(pickle.dumps(source))
    assert_trees_equal(copy[11], records[11])
    assert_trees_equal(spawn_pool(read_records, source, [11, 3]), [records[11], records[3]])


def test_close_releases_readers_and_refuses_reads(tmp_path):
    source = ArrayRecordSource(write_array_record([1, 2], tmp_path / "c"))
    assert source[1] == 2
    source.close()
    with pytest.raises(SourceClosedError):
        source[0]
    with ArrayRecordSource(write_array_record([1], tmp_path / "d")) as other:
        assert other[0] == 1
    with pytest.raises(SourceClosedError):
        other[0]


def test_repr_names_paths_count_and_decode(tmp_path):
    paths = write_array_record(list(range(8)), tmp_path / "r", num_shards=4)
    text = repr(ArrayRecordSource(paths))
    assert text.startswith("ArrayRecordSource(paths=")
    assert "(4 paths)" in text and "num_records=8" in text and "decode='auto'" in text


def _shards_with_junk(folder, junk_key=10, per_shard=8):
    """Two shards of chute records; record key `junk_key` is 4 bytes of junk."""
    paths = []
    for shard in range(2):
        path = str(folder / f"j-{shard}.array_record")
        writer = ArrayRecordWriter(path, "group_size:1")
        for index in range(per_shard):
            key = shard * per_shard + index
            writer.write(b"junk" if key == junk_key else encode_record({"x": key}))
        writer.close()
        paths.append(path)
    return paths


def test_a_corrupt_record_names_its_file_and_index_there(tmp_path):
    paths = _shards_with_junk(tmp_path)
    source = ArrayRecordSource(paths, decode=True)
    expected = (
        "a chute record is at least 12 bytes, got 4: truncated or not written by chute's "
        f"encode_record; in record 2 of the ArrayRecord file {paths[1]!r} (record key 10 of "
        "the source)"
    )
    for read in (lambda: source[10], lambda: source[-6], lambda: source.__getitems__([3, 10, 0])):
        with pytest.raises(CorruptRecordError) as caught:
            read()
        assert str(caught.value) == expected
        assert type(caught.value.__cause__) is CorruptRecordError  # The decoder's own error.
    assert source.__getitems__([9, 11]) == [{"x": 9}, {"x": 11}]


def test_an_error_from_a_users_decoder_keeps_its_type_and_gets_a_note(tmp_path):
    paths = _shards_with_junk(tmp_path, junk_key=3)

    def decode(record):
        return decode_record(record)["x"] if record != b"junk" else {}["missing"]

    with pytest.raises(KeyError) as caught:
        ArrayRecordSource(paths, decode=decode).__getitems__([1, 3])
    assert caught.value.__notes__ == [
        f"chute: in record 3 of the ArrayRecord file {paths[0]!r} (record key 3 of the source)"
    ]
