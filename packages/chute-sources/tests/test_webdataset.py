"""`WebDatasetSource`, `WebDatasetStream` and the writer: samples exactly as WebDataset
groups them (checked against a reference grouping over Python's `tarfile`), random
access, clear errors for broken shards, and exact resume of the stream."""

from __future__ import annotations

import io
import os
import pickle
import re
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chute_core import (
    CorruptRecordError,
    InvalidStateError,
    SourceClosedError,
    SourceFileError,
    SourceFileNotFoundError,
)
from chute_sources import (
    WebDatasetSource,
    WebDatasetStream,
    WebDatasetWriter,
    webdataset_decoders,
    write_webdataset,
)
from chute_sources._webdataset_index import expand_braces
from chute_testing import assert_resumes, assert_trees_equal

# --------------------------------------------------------------------------------------
# Data, and WebDataset's own grouping (its `tar_file_expander` + `group_by_keys`) over
# Python's tarfile, as the reference.


def reference(path: str) -> list[dict[str, Any]]:
    samples: list[dict[str, Any]] = []
    with tarfile.open(path) as tar:
        for info in tar:
            if not info.isreg() or re.match(r"__[^/]*__($|/)", info.name):
                continue
            match = re.match(r"^((?:.*/|)[^.]+)[.]([^/]*)$", info.name)
            if match is None:
                continue
            key, field = match.group(1), match.group(2).lower()
            file = tar.extractfile(info)
            assert file is not None
            if not samples or samples[-1]["__key__"] != key:
                samples.append({"__key__": key, "__url__": path})
            samples[-1][field] = file.read()
    return samples


def add(tar: tarfile.TarFile, name: str, data: bytes, kind: bytes = tarfile.REGTYPE) -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def make_tar(path: Path, members: list[tuple[str, bytes]], format: int = tarfile.PAX_FORMAT) -> str:
    with tarfile.open(path, "w", format=format) as tar:
        for name, data in members:
            if name.endswith("/"):
                add(tar, name, b"", tarfile.DIRTYPE)
            else:
                add(tar, name, data)
    return str(path)


MIXED = [
    ("train/", b""),
    ("train/cat.jpg", b"\xff\xd8\xffcat"),
    ("train/cat.cls", b"3"),
    ("train/cat.0001.seg.PNG", b"mask"),  # Multi-dot extension, upper case.
    ("__meta__", b"skipped"),
    ("README", b"no dot: skipped"),
    ("train/dog.jpg", b"\xff\xd8\xffdog"),
    ("train/dog.json", b'{"legs": 4}'),
    ("x" * 150 + "/long.txt", b"a long name"),  # Long names: pax (or GNU) headers.
    ("train/cat.txt", b"again"),  # A key seen before: a new sample, as in WebDataset.
    ("empty.bin", b""),
]


@pytest.fixture(params=[tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT])
def mixed(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    members = MIXED
    if request.param == tarfile.USTAR_FORMAT:  # ustar: names up to 255 bytes, with a prefix.
        members = [(n.replace("x" * 150, "p" * 120 + "/" + "q" * 20), d) for n, d in MIXED]
    return make_tar(tmp_path / "mixed.tar", members, request.param)


# --------------------------------------------------------------------------------------
# Grouping and random access


def test_samples_are_grouped_exactly_as_webdataset_groups_them(mixed: str) -> None:
    source = WebDatasetSource(mixed)
    expected = reference(mixed)
    assert [s["__key__"] for s in expected][:3] == [
        "train/cat",
        "train/dog",
        expected[2]["__key__"],
    ]
    assert list(source) == expected
    assert source[0] == {
        "__key__": "train/cat",
        "__url__": mixed,
        "jpg": b"\xff\xd8\xffcat",
        "cls": b"3",
        "0001.seg.png": b"mask",
    }
    assert source[3]["txt"] == b"again" and source[3]["__key__"] == "train/cat"
    assert source[-1] == {"__key__": "empty", "__url__": mixed, "bin": b""}
    assert len(source) == 5 and source.shard_samples == (5,)


def test_random_and_batched_reads_match_the_sequential_order(tmp_path: Path) -> None:
    samples = [
        {"__key__": f"{i:05d}", "bin": os.urandom(i * 37 % 900), "cls": i} for i in range(60)
    ]
    paths = write_webdataset(samples, str(tmp_path / "s-%03d.tar"), max_count=7)
    source = WebDatasetSource(str(tmp_path / "s-{000..008}.tar"))
    assert len(paths) == 9 and source.shards == tuple(paths)
    order = [*np.random.default_rng(0).permutation(60).tolist(), 59, 0, 0]
    got = source.__getitems__(order)
    for key, sample in zip(order, got, strict=True):
        assert sample["__key__"] == f"{key:05d}"
        assert sample["bin"] == samples[key]["bin"]
        assert sample["cls"] == str(key).encode()
        assert sample["__url__"] == paths[key // 7]
    assert source.__getitems__(np.asarray([5, 3])) == [source[5], source[3]]


def test_paths_brace_patterns_globs_folders_and_lists(tmp_path: Path) -> None:
    samples = [{"__key__": f"k{i}", "txt": str(i)} for i in range(6)]
    paths = write_webdataset(samples, str(tmp_path / "d" / "part-%d.tar"), max_count=2)
    expected = [s["__key__"] for s in WebDatasetSource(paths)]
    for given_paths in (
        str(tmp_path / "d" / "part-{0..2}.tar"),
        str(tmp_path / "d" / "part-*.tar"),
        str(tmp_path / "d"),
        [Path(paths[0]), str(tmp_path / "d" / "part-{1,2}.tar")],
    ):
        assert [s["__key__"] for s in WebDatasetSource(given_paths)] == expected, given_paths
    assert expand_braces("a-{08..10}-{x,y}") == [
        f"a-{n}-{c}" for n in ("08", "09", "10") for c in "xy"
    ]
    assert expand_braces("{0..2}") == ["0", "1", "2"] and expand_braces("a{b}c") == ["a{b}c"]
    with pytest.raises(SourceFileNotFoundError, match="does not exist"):
        WebDatasetSource(str(tmp_path / "d" / "part-{0..3}.tar"))


def test_decoding_by_extension(tmp_path: Path) -> None:
    array = np.arange(6, dtype=np.int16).reshape(2, 3)
    sample = {
        "__key__": "a/b",
        "txt": "héllo",
        "cls": 7,
        "json": {"x": [1, None]},
        "seg.json": [1, 2],
        "npy": array,
        "jpg": b"\xff\xd8\xffraw",
        "weird": b"\x00",
    }
    path = write_webdataset([sample], str(tmp_path / "x.tar"))[0]
    got = WebDatasetSource(path, decode=True)[0]
    assert got["txt"] == "héllo" and got["cls"] == 7 and got["json"] == {"x": [1, None]}
    assert got["seg.json"] == [1, 2] and got["jpg"] == b"\xff\xd8\xffraw"
    assert_trees_equal(got["npy"], array)
    assert got["weird"] == b"\x00"
    own = WebDatasetSource(path, decode={".TXT": _upper})
    assert own[0]["txt"] == "HÉLLO" and own[0]["cls"] == b"7"
    assert repr(own) == f"WebDatasetSource(paths={path!r}, num_samples=1, decode=['txt'])"
    with pytest.raises(TypeError, match="decode must be False, True or a dict"):
        WebDatasetSource(path, decode="yes")  # type: ignore[arg-type]


def _upper(data: bytes) -> str:
    return data.decode().upper()


def test_images_are_decoded_by_pillow_only_when_asked(tmp_path: Path) -> None:
    pil = pytest.importorskip("PIL.Image")
    encoded = io.BytesIO()
    pil.new("RGB", (4, 3), "red").save(encoded, "PNG")
    path = write_webdataset([{"__key__": "i", "png": encoded.getvalue()}], str(tmp_path / "i.tar"))
    assert WebDatasetSource(path, decode=True)[0]["png"] == encoded.getvalue()
    image = WebDatasetSource(path, decode=webdataset_decoders(images=True))[0]["png"]
    assert (
        image.shape == (3, 4, 3) and image.dtype == np.uint8 and image[0, 0].tolist() == [255, 0, 0]
    )


def test_a_field_that_does_not_decode_names_the_sample(tmp_path: Path) -> None:
    path = write_webdataset([{"__key__": "bad", "cls": b"seven"}], str(tmp_path / "b.tar"))[0]
    with pytest.raises(CorruptRecordError) as raised:
        WebDatasetSource(path, decode=True)[0]
    assert str(raised.value) == (
        f"cannot decode field 'cls' of sample 'bad' (sample 0 of shard {path!r}): the field "
        "is not an integer: b'seven'"
    )


def test_pickled_source_reads_without_scanning_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = write_webdataset(
        [{"__key__": f"k{i}", "txt": "t"} for i in range(5)], str(tmp_path / "p.tar")
    )
    source = WebDatasetSource(paths, decode=True)
    copy = pickle.loads(pickle.dumps(source))
    import chute_sources._webdataset as module

    monkeypatch.setattr(module, "scan_shard", None)  # No scan in the copy.
    assert list(copy) == list(source)
    source.close()
    with pytest.raises(SourceClosedError):
        source[0]


# --------------------------------------------------------------------------------------
# Errors


def test_a_file_that_is_not_tar_names_the_file_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "notes.tar"
    path.write_bytes(b"hello world\n" * 100)
    with pytest.raises(SourceFileError) as raised:
        WebDatasetSource(str(path))
    assert str(raised.value) == (
        f"{path} is not a tar file: no valid tar header at byte 0 (bad checksum); expected a "
        "tar file such as WebDataset's shards or `tar cf` write."
    )
    gz = tmp_path / "c.tar"
    gz.write_bytes(b"\x1f\x8b" + bytes(600))
    with pytest.raises(SourceFileError, match=r"is gzip-compressed; .* decompress it first"):
        WebDatasetSource(str(gz))


def test_a_truncated_shard_names_the_file_and_byte(tmp_path: Path) -> None:
    path = write_webdataset(
        [{"__key__": f"k{i}", "bin": bytes(1000)} for i in range(3)], str(tmp_path / "t.tar")
    )[0]
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:2500])  # Cut inside the second member's data.
    with pytest.raises(SourceFileError) as raised:
        WebDatasetSource(path)
    assert str(raised.value) == (
        f"{path} is truncated: the data of a member (1000 bytes) at byte 1536 goes past the "
        "end of the file (2500 bytes). Was it copied or written only in part?"
    )
    Path(path).write_bytes(data[: 1536 + 100])  # Cut inside a header.
    with pytest.raises(SourceFileError, match="truncated: a tar header at byte 1536"):
        WebDatasetSource(path)
    Path(path).write_bytes(data[: 3 * 1536])  # Cut at a block boundary: ends like tarfile.
    assert len(WebDatasetSource(path)) == 3


def test_a_field_twice_in_one_sample_and_a_corrupt_header(tmp_path: Path) -> None:
    path = make_tar(tmp_path / "dup.tar", [("a.txt", b"1"), ("a.TXT", b"2")])
    with pytest.raises(SourceFileError) as raised:
        WebDatasetSource(path)
    assert str(raised.value) == (
        f"{path}: sample 'a' has two members with the field 'txt' (the second, 'a.TXT', at "
        "byte 1024); each field of a sample must appear once."
    )
    with pytest.raises(SourceFileError, match="at byte 1024"):
        list(WebDatasetStream(path))
    good = make_tar(tmp_path / "bad.tar", [("a.txt", b"1"), ("b.txt", b"2")])
    data = bytearray(Path(good).read_bytes())
    data[1024 + 10] ^= 0xFF  # The second header's name: its checksum no longer holds.
    Path(good).write_bytes(bytes(data))
    with pytest.raises(
        SourceFileError, match=f"^{re.escape(good)} is corrupt: no valid tar header at byte 1024"
    ):
        WebDatasetSource(good)


def test_a_shard_changed_after_indexing_is_refused(tmp_path: Path) -> None:
    path = write_webdataset([{"__key__": "a", "txt": "x"}], str(tmp_path / "c.tar"))[0]
    source = WebDatasetSource(path)
    copy = pickle.loads(pickle.dumps(source))
    write_webdataset([{"__key__": "a", "txt": "longer"}, {"__key__": "b", "txt": "y"}], path)
    with pytest.raises(SourceFileError, match="changed after it was indexed"):
        copy[0]


def test_the_writer_refuses_what_would_not_read_back(tmp_path: Path) -> None:
    pattern = str(tmp_path / "w-%d.tar")
    with pytest.raises(ValueError, match=r"the key 'a\.b' holds a dot after its last '/'"):
        write_webdataset([{"__key__": "a.b", "txt": "x"}], pattern)
    with pytest.raises(TypeError, match="field 'txt' of sample 'a' is a float"):
        write_webdataset([{"__key__": "ok", "txt": "x"}, {"__key__": "a", "txt": 1.5}], pattern)
    with pytest.raises(ValueError, match="sample 'e' has no fields"):
        write_webdataset([{"__key__": "e", "__url__": "x"}], pattern)
    with pytest.raises(TypeError, match="a str '__key__'"):
        write_webdataset([{"txt": "x"}], pattern)
    with pytest.raises(ValueError, match="need a pattern with a shard number"):
        WebDatasetWriter(str(tmp_path / "one.tar"), max_count=3)
    assert os.listdir(tmp_path) == []  # Nothing left behind by the failures.


def test_the_writer_cuts_shards_by_size(tmp_path: Path) -> None:
    samples = [{"__key__": f"k{i}", "bin": bytes(1000)} for i in range(10)]
    paths = write_webdataset(samples, str(tmp_path / "s-%d.tar"), max_size=5000)
    assert all(os.path.getsize(p) <= 5000 for p in paths)
    assert [len(WebDatasetSource(p)) for p in paths] == [2] * 5
    assert WebDatasetSource(paths).__getitems__([9])[0]["bin"] == bytes(1000)


# --------------------------------------------------------------------------------------
# The stream


def test_the_stream_yields_the_samples_of_the_source(mixed: str, tmp_path: Path) -> None:
    assert list(WebDatasetStream(mixed)) == list(WebDatasetSource(mixed))
    samples = [{"__key__": f"k{i}", "txt": f"t{i}", "cls": i} for i in range(9)]
    write_webdataset(samples, str(tmp_path / "s-%d.tar"), max_count=4)
    shards = str(tmp_path / "s-{0..2}.tar")
    assert list(WebDatasetStream(shards, decode=True)) == list(
        WebDatasetSource(shards, decode=True)
    )


def test_the_stream_resumes_exactly_from_any_state(mixed: str, tmp_path: Path) -> None:
    write_webdataset(
        [{"__key__": f"k{i}", "txt": "x" * i} for i in range(7)],
        str(tmp_path / "s-%d.tar"),
        max_count=3,
    )
    shards = [mixed, str(tmp_path / "s-*.tar")]
    elements = assert_resumes(
        lambda: WebDatasetStream(shards), expected=list(WebDatasetSource(shards))
    )
    assert len(elements) == 12
    stream = WebDatasetStream(shards)
    assert stream.get_state() == {"shard": 0, "offset": 0}
    next(stream)
    state = stream.get_state()
    assert state["shard"] == 0 and state["offset"] > 0
    list(stream)
    assert stream.get_state() == {"shard": 4, "offset": 0}
    copy = pickle.loads(pickle.dumps(WebDatasetStream(shards)))
    copy.set_state(state)
    assert next(copy)["__key__"] == "train/dog"


def test_the_stream_refuses_a_foreign_state(mixed: str) -> None:
    stream = WebDatasetStream(mixed)
    for bad, message in [
        ({"shard": 0}, "a state is a dict like"),
        ({"shard": 0, "offset": -512}, r"state\['offset'\] must be an int >= 0"),
        ({"shard": 2, "offset": 0}, "out of range: this stream reads 1 shards"),
        ({"shard": 0, "offset": 100}, "is not where a tar header"),
    ]:
        with pytest.raises(InvalidStateError, match=message):
            stream.set_state(bad)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# Properties: whatever is written reads back the same, in order and by index.

KEYS = st.from_regex(r"[a-z0-9_]{1,12}(/[a-z0-9_]{1,8}){0,2}", fullmatch=True)
FIELDS = st.from_regex(r"[a-z0-9]{1,5}(\.[a-z0-9]{1,4}){0,2}", fullmatch=True)
SAMPLES = st.lists(
    st.tuples(KEYS, st.dictionaries(FIELDS, st.binary(max_size=700), min_size=1, max_size=4)),
    max_size=20,
    unique_by=lambda sample: sample[0],
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(samples=SAMPLES, per_shard=st.integers(1, 5))
def test_written_samples_read_back_equal(
    tmp_path_factory: pytest.TempPathFactory,
    samples: list[tuple[str, dict[str, bytes]]],
    per_shard: int,
) -> None:
    folder = tmp_path_factory.mktemp("prop")
    written = [{"__key__": key, **fields} for key, fields in samples]
    paths = write_webdataset(written, str(folder / "s-%04d.tar"), max_count=per_shard)
    source = WebDatasetSource(paths)
    read = [{k: v for k, v in s.items() if k != "__url__"} for s in source]
    assert read == written
    assert [s for s in WebDatasetStream(paths)] == list(source)
    for path in paths:
        assert reference(path) == list(WebDatasetSource(path))
    if written:
        order = np.random.default_rng(len(written)).permutation(len(written)).tolist()
        assert [s["__key__"] for s in source.__getitems__(order)] == [
            written[i]["__key__"] for i in order
        ]
