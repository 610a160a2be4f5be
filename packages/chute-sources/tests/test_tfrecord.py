"""`TFRecordSource`, `write_tfrecord` and the `tf.train.Example` codec, without TensorFlow.

The framing is checked against a CRC32C written out bit by bit here (not the library
the source uses), and the Example codec against protobuf's own messages, built at
runtime from descriptors (proto3: packed numbers, as TensorFlow writes them; proto2:
unpacked ones).
"""

from __future__ import annotations

import gzip
import os
import pickle
import struct
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from chute_core import CorruptRecordError, SourceFileError, SourceFileNotFoundError
from chute_sources import (
    TFRecordSource,
    encode_example,
    encode_record,
    parse_example,
    write_tfrecord,
)

RECORDS = [b"alpha", b"beta", b"gamma"]  # Frames of 21, 20 and 21 bytes.


def crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli, reflected polynomial 0x82F63B78), one bit at a time."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def framed(record: bytes) -> bytes:
    length = struct.pack("<Q", len(record))
    return length + struct.pack("<I", masked(length)) + record + struct.pack("<I", masked(record))


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("CHUTE_CACHE_DIR", str(folder))
    return folder


def test_the_reference_crc_is_crc32c() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # The check value of CRC-32C.


def test_written_files_are_framed_as_tensorflow_frames_them(tmp_path: Path) -> None:
    records = [b"", b"x", bytes(range(256)) * 40]
    path = tmp_path / "data.tfrecord"
    assert write_tfrecord(path, iter(records)) == 3
    assert path.read_bytes() == b"".join(framed(record) for record in records)
    assert os.listdir(tmp_path) == ["data.tfrecord"]  # No temporary file left.


def test_records_read_exactly_in_any_order(tmp_path: Path) -> None:
    records = [bytes([i % 256]) * (i * 7 % 300) for i in range(200)]
    path = tmp_path / "data.tfrecord"
    path.write_bytes(b"".join(framed(record) for record in records))
    source = TFRecordSource(path)
    assert len(source) == 200
    assert list(source) == records
    keys = np.random.default_rng(0).permutation(200)
    assert source.__getitems__(keys) == [records[k] for k in keys]
    assert source[-1] == records[-1]
    assert source.files == (str(path),) and source.file_records == (200,)
    assert repr(source) == f"TFRecordSource(paths={str(path)!r}, num_records=200)"


def test_several_files_globs_and_folders_follow_one_another(tmp_path: Path) -> None:
    parts = [[f"{n}-{i}".encode() for i in range(count)] for n, count in enumerate([3, 0, 5])]
    folder = tmp_path / "shards"
    folder.mkdir()
    for number, part in enumerate(parts):
        write_tfrecord(folder / f"train.tfrecord-{number:05d}-of-00003", part)
    (folder / "README.md").write_text("not data")
    expected = [record for part in parts for record in part]
    for paths in (folder, str(folder / "train.tfrecord-*"), sorted(folder.glob("train*"))):
        source = TFRecordSource(paths)  # type: ignore[arg-type]
        assert list(source) == expected
        assert source.__getitems__([7, 0, 3, 2]) == [expected[k] for k in (7, 0, 3, 2)]
        assert source.file_records == (3, 0, 5)


def test_an_empty_file_has_no_records(tmp_path: Path) -> None:
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    source = TFRecordSource(tmp_path / "empty.tfrecord")
    assert len(source) == 0 and list(source) == []


def test_missing_files_say_so(tmp_path: Path) -> None:
    with pytest.raises(SourceFileNotFoundError, match=r"TFRecord file .* does not exist"):
        TFRecordSource(tmp_path / "missing.tfrecord")
    with pytest.raises(SourceFileNotFoundError, match="matches no TFRecord file"):
        TFRecordSource(str(tmp_path / "*.tfrecord"))
    with pytest.raises(ValueError, match="parse must be None"):
        TFRecordSource(tmp_path, parse="json")  # type: ignore[arg-type]


@pytest.fixture
def three(tmp_path: Path) -> Path:
    path = tmp_path / "three.tfrecord"
    path.write_bytes(b"".join(framed(record) for record in RECORDS))  # Frames at 0, 21, 41.
    return path


def _damage(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_wrong_length_crc_names_the_file_the_record_and_its_byte(three: Path) -> None:
    _damage(three, 21 + 8)
    found = masked(struct.pack("<Q", 4)) ^ 0xFF
    with pytest.raises(SourceFileError) as raised:
        TFRecordSource(three)
    assert str(raised.value) == (
        f"TFRecord file {str(three)!r} is corrupt: the length of record 1 (at byte 21) has "
        f"the CRC {found:#010x}, expected {masked(struct.pack('<Q', 4)):#010x}. The file is "
        "damaged, truncated, or not a TFRecord file."
    )


def test_a_wrong_data_crc_fails_that_record_only(three: Path) -> None:
    _damage(three, 21 + 12 + 2)  # "beta" -> "be\x8ba"
    damaged = b"be\x8ba"
    source = TFRecordSource(three)
    assert source.__getitems__([0, 2]) == [RECORDS[0], RECORDS[2]]
    with pytest.raises(CorruptRecordError) as raised:
        source[1]
    assert str(raised.value) == (
        f"TFRecord file {str(three)!r} is corrupt: the data of record 1 (at byte 21, 4 bytes) "
        f"has the CRC {masked(b'beta'):#010x}, expected {masked(damaged):#010x}; the file "
        "is damaged (TFRecordSource(..., verify=False) reads it without checking); record "
        "key 1 of the source"
    )
    assert TFRecordSource(three, verify=False)[1] == damaged


TRUNCATED = [
    (55, "record 2 at byte 41 needs 5 data bytes and ends at byte 62, but the file has 55 bytes."),
    (
        46,
        "record 2 starts at byte 41 but only 5 of its 12 header bytes are there (the file "
        "has 46 bytes).",
    ),
]


@pytest.mark.parametrize(("size", "problem"), TRUNCATED)
def test_a_truncated_file_says_where_it_ends(three: Path, size: int, problem: str) -> None:
    three.write_bytes(three.read_bytes()[:size])
    with pytest.raises(SourceFileError) as raised:
        TFRecordSource(three, verify=False)
    assert str(raised.value) == (
        f"TFRecord file {str(three)!r} is truncated: {problem} The file is damaged, "
        "truncated, or not a TFRecord file."
    )


def test_a_changed_file_is_refused_by_a_pickled_copy(three: Path) -> None:
    copy = pickle.loads(pickle.dumps(TFRecordSource(three)))
    write_tfrecord(three, [b"other"])
    with pytest.raises(SourceFileError, match="changed after this source was created"):
        copy[0]


def test_gzip_files_read_like_plain_ones_from_one_decompressed_copy(
    tmp_path: Path, cache_dir: Path
) -> None:
    records = [f"record {i}".encode() * (i % 5) for i in range(50)]
    write_tfrecord(tmp_path / "a.tfrecord.gz", records)
    with gzip.open(tmp_path / "a.tfrecord.gz") as stream:
        assert stream.read() == b"".join(framed(record) for record in records)
    os.rename(tmp_path / "a.tfrecord.gz", tmp_path / "b.tfrecord")
    source = TFRecordSource(tmp_path / "b.tfrecord", compression="GZIP")
    assert list(source) == records
    copies = [name for _, _, names in os.walk(cache_dir) for name in names if "gunzip" in name]
    assert len(copies) == 1
    copy = pickle.loads(pickle.dumps(source))  # Reads the cache's copy.
    assert copy.__getitems__([49, 3]) == [records[49], records[3]]
    with pytest.raises(SourceFileError, match=r"starts like a GZIP file: pass compression='GZIP'"):
        TFRecordSource(tmp_path / "b.tfrecord")
    with pytest.raises(SourceFileError, match="is not a readable GZIP file"):
        TFRecordSource(write_plain(tmp_path / "c.tfrecord.gz"))


def write_plain(path: Path) -> Path:
    path.write_bytes(framed(b"plain"))
    return path


def test_gzip_output_is_reproducible(tmp_path: Path) -> None:
    write_tfrecord(tmp_path / "a.gz", RECORDS)
    write_tfrecord(tmp_path / "b", RECORDS, compression="GZIP")
    assert (tmp_path / "a.gz").read_bytes() == (tmp_path / "b").read_bytes()


def test_a_record_that_is_not_bytes_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="record 1 is str, not bytes"):
        write_tfrecord(tmp_path / "x.tfrecord", [b"ok", "text"])  # type: ignore[list-item]
    assert not (tmp_path / "x.tfrecord").exists()
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]


def test_a_pickled_source_reads_in_a_spawned_process(three: Path, spawn_pool: Any) -> None:
    source = TFRecordSource(three, parse=bytes.upper)
    assert spawn_pool(source.__getitems__, [2, 0]) == [b"GAMMA", b"ALPHA"]


# --- tf.train.Example ---------------------------------------------------------------------


def _example_class(syntax: str) -> Any:
    """`tf.train.Example` as a protobuf class built from descriptors at runtime."""
    descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
    from google.protobuf import descriptor_pool, message_factory

    package = f"chute_test_{syntax}"
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name=f"{package}.proto", package=package, syntax=syntax
    )
    optional, repeated = field.LABEL_OPTIONAL, field.LABEL_REPEATED

    def message(name: str, *fields: tuple[str, int, int, int, str], parent: Any = None) -> Any:
        added = (parent.nested_type if parent is not None else proto.message_type).add(name=name)
        for field_name, number, kind, label, type_name in fields:
            made = added.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                made.type_name = type_name
        return added

    for name, kind in [
        ("BytesList", field.TYPE_BYTES),
        ("FloatList", field.TYPE_FLOAT),
        ("Int64List", field.TYPE_INT64),
    ]:
        message(name, ("value", 1, kind, repeated, ""))
    feature = message(
        "Feature",
        *[
            (name, number, field.TYPE_MESSAGE, optional, f".{package}.{kind}")
            for name, number, kind in [
                ("bytes_list", 1, "BytesList"),
                ("float_list", 2, "FloatList"),
                ("int64_list", 3, "Int64List"),
            ]
        ],
    )
    feature.oneof_decl.add(name="kind")
    for each in feature.field:
        each.oneof_index = 0
    features = message(
        "Features",
        ("feature", 1, field.TYPE_MESSAGE, repeated, f".{package}.Features.FeatureEntry"),
    )
    entry = message(
        "FeatureEntry",
        ("key", 1, field.TYPE_STRING, optional, ""),
        ("value", 2, field.TYPE_MESSAGE, optional, f".{package}.Feature"),
        parent=features,
    )
    entry.options.map_entry = True
    message("Example", ("features", 1, field.TYPE_MESSAGE, optional, f".{package}.Features"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.Example"))


def _filled(example_class: Any) -> Any:
    example = example_class()
    feature = example.features.feature
    feature["label"].int64_list.value.extend([7])
    feature["ids"].int64_list.value.extend([0, 1, 127, 128, 300, -1, -(2**63), 2**63 - 1])
    feature["many"].int64_list.value.extend(range(-50, 1000, 7))
    feature["scores"].float_list.value.extend([0.5, -1.25, 3e38])
    feature["image"].bytes_list.value.extend([b"\x89PNG", b"", "é".encode()])
    feature["nothing"].int64_list.value.extend([])
    feature["unset"].SetInParent()
    return example


EXPECTED = {
    "label": [7],
    "ids": [0, 1, 127, 128, 300, -1, -(2**63), 2**63 - 1],
    "many": list(range(-50, 1000, 7)),
    "scores": [0.5, -1.25, 3e38],
    "image": [b"\x89PNG", b"", "é".encode()],
    "nothing": [],
    "unset": [],
}


@pytest.mark.parametrize("syntax", ["proto3", "proto2"])  # Packed, unpacked numbers.
def test_examples_written_by_protobuf_parse_exactly(syntax: str) -> None:
    data = _filled(_example_class(syntax)).SerializeToString()
    if syntax == "proto3":
        assert struct.pack("<3f", 0.5, -1.25, 3e38) in data  # Packed floats.
    else:
        assert b"\x0d" + struct.pack("<f", 0.5) + b"\x0d" in data  # One field per float.
        assert b"\x08\x80\x01\x08\xac\x02" in data  # One field per int: 128, 300.
    parsed = parse_example(data)
    assert set(parsed) == set(EXPECTED)
    for name, values in EXPECTED.items():
        if name == "scores":
            values = np.float32(values).tolist()
        got = parsed[name]
        assert (got if isinstance(got, list) else got.tolist()) == values, name
    assert parsed["ids"].dtype == np.int64 and parsed["scores"].dtype == np.float32
    assert parsed["nothing"].dtype == np.int64 and parsed["ids"].flags.writeable


def test_encoded_examples_parse_with_protobuf_as_written() -> None:
    example_class = _example_class("proto3")
    values = {
        "label": 7,
        "ids": np.array([[1, -2], [2**62, 0]]),
        "mask": [True, False],
        "scores": np.float64(0.1),
        "text": ["hé", b"\xff"],
        "empty": [],
    }
    data = encode_example(values)
    example = example_class.FromString(data)
    feature = example.features.feature
    assert list(feature["label"].int64_list.value) == [7]
    assert list(feature["ids"].int64_list.value) == [1, -2, 2**62, 0]
    assert list(feature["mask"].int64_list.value) == [1, 0]
    assert list(feature["scores"].float_list.value) == [np.float32(0.1)]
    assert list(feature["text"].bytes_list.value) == ["hé".encode(), b"\xff"]
    assert feature["empty"].WhichOneof("kind") == "float_list"
    assert feature["empty"].ByteSize() == 2  # An empty float_list, as protobuf writes it.
    again = parse_example(example.SerializeToString())
    assert {k: list(v) for k, v in again.items()} == {
        k: list(v) for k, v in parse_example(data).items()
    }


def test_a_repeated_feature_name_keeps_the_last_value() -> None:
    first, second = encode_example({"a": 1, "b": 2}), encode_example({"a": [3.0]})
    parsed = parse_example(first + second)  # Concatenated messages merge.
    assert list(parsed) == ["b", "a"] and parsed["a"].tolist() == [3.0]


def test_sources_parse_examples_and_name_records_that_are_not_examples(tmp_path: Path) -> None:
    path = tmp_path / "examples.tfrecord"
    rows = [{"i": i, "x": np.arange(i, dtype=np.float32)} for i in range(10)]
    write_tfrecord(path, [*map(encode_example, rows), b"\x0a\x05ab"])
    source = TFRecordSource(path, parse="example")
    for row, parsed in zip(rows, source.__getitems__(range(10)), strict=True):
        assert parsed["i"].tolist() == [row["i"]] and parsed["x"].tolist() == row["x"].tolist()
    with pytest.raises(CorruptRecordError) as raised:
        source[10]
    assert str(raised.value) == (
        "not a tf.train.Example: field 1 runs 3 bytes past the end of its message (a "
        f"truncated or foreign record); in record 10 of the TFRecord file {str(path)!r} "
        "(record key 10 of the source)"
    )
    assert TFRecordSource(path, parse=len).__getitems__([10]) == [4]


def test_records_of_chutes_codec_travel_as_bytes(tmp_path: Path) -> None:
    write_tfrecord(tmp_path / "c.tfrecord", [encode_record({"x": np.arange(3)})])
    assert TFRecordSource(tmp_path / "c.tfrecord")[0] == encode_record({"x": np.arange(3)})


# --- buckets --------------------------------------------------------------------------------


@pytest.fixture
def bucket(s3: Any) -> str:
    return s3.create_bucket(f"tfrecord-{uuid.uuid4().hex[:16]}")


def test_objects_in_a_bucket_read_as_the_local_files(s3: Any, bucket: str, tmp_path: Path) -> None:
    parts = [[f"{n}:{i}".encode() for i in range(n + 2)] for n in range(3)]
    for number, part in enumerate(parts):
        name = f"part-{number}.tfrecord" + (".gz" if number == 1 else "")
        write_tfrecord(tmp_path / name, part)
        s3.put(bucket, f"data/{name}", (tmp_path / name).read_bytes())
    s3.put(bucket, "data/README.md", b"not data")
    expected = [record for part in parts for record in part]
    for url in (f"s3://{bucket}/data/part-*", f"s3://{bucket}/data/"):
        source = TFRecordSource(url)
        assert list(source) == expected, url
        assert source.file_records == (2, 3, 4)
        assert source.files[1] == f"s3://{bucket}/data/part-1.tfrecord.gz"
        copy = pickle.loads(pickle.dumps(source))
        assert copy.__getitems__([8, 0, 4]) == [expected[8], expected[0], expected[4]]
    local = TFRecordSource(sorted(str(path) for path in tmp_path.glob("part-*")))
    assert list(local) == expected
