"""Compressed `.npz` entries: headers on opening, rows decompressed from the first on demand."""

import io
import re
import struct
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from chute_core import SourceFileError
from chute_sources import NumpySource
from chute_sources._npz_compressed import CompressedMember


def _member(path: Path, name: str) -> CompressedMember:
    with zipfile.ZipFile(path) as archive:
        return CompressedMember.open(str(path), archive, archive.getinfo(name + ".npy"), name)


def test_opening_reads_headers_only_and_a_first_row_decompresses_only_the_first_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "big.npz"
    np.savez_compressed(path, x=np.zeros((4000, 1000), np.float32), y=np.arange(4000))
    tracemalloc.start()
    try:
        source = NumpySource(str(path))
        assert len(source) == 4000
        assert "'x': 'float32 (4000, 1000)'" in repr(source)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # The arrays take 16 MB: none of it was decompressed.
    member = _member(path, "x")
    assert member.rows_decompressed == 0
    assert member[2].shape == (1000,)
    assert member.rows_decompressed == 3
    member[np.array([5, 1])]
    assert member.rows_decompressed == 6  # Twice as many, so reading on costs at most 2x.
    member[3999]
    assert member.rows_decompressed == 4000


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.save(buffer, array)
            archive.writestr(name + ".npy", buffer.getvalue())


@settings(max_examples=40, deadline=None)
@given(
    array=hnp.arrays(
        dtype=st.sampled_from([np.uint8, np.dtype(">i4"), np.float64, np.dtype("S3"), np.bool_]),
        shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=9),
    ),
    fortran=st.booleans(),
    reads=st.lists(st.lists(st.integers(0, 10**6), max_size=6), max_size=5),
)
def test_any_reads_in_any_order_equal_the_rows_np_load_gives(
    tmp_path_factory: pytest.TempPathFactory,
    array: np.ndarray,
    fortran: bool,
    reads: list[list[int]],
) -> None:
    array = np.asfortranarray(array) if fortran else array
    path = tmp_path_factory.mktemp("npz") / "a.npz"
    np.savez_compressed(path, a=array, b=np.arange(len(array)))
    expected = np.load(path)
    source = NumpySource(str(path))
    assert len(source) == len(array)
    for keys in reads:
        keys = [key % len(array) for key in keys] if len(array) else []
        for key, record in zip(keys, source.__getitems__(keys), strict=True):
            np.testing.assert_array_equal(record["a"], expected["a"][key])
            assert record["b"] == key
        for key in keys[:2]:
            np.testing.assert_array_equal(source[key]["a"], expected["a"][key])


def test_records_of_compressed_entries_are_read_only(tmp_path: Path) -> None:
    path = tmp_path / "a.npz"
    np.savez_compressed(path, x=np.arange(6).reshape(3, 2))
    record = NumpySource(str(path))[1]["x"]
    with pytest.raises(ValueError, match="read-only"):
        record[0] = 7
    assert NumpySource(str(path)).__getitems__([1])[0]["x"].tolist() == [2, 3]


def test_an_entry_larger_than_its_header_says_is_refused_naming_file_and_array(
    tmp_path: Path,
) -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(1000))
    path = tmp_path / "lies.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("x.npy", buffer.getvalue() + bytes(100))
    expected = (
        f"NumpySource: {path} (array 'x'): the zip entry declares 8,228 bytes, but its .npy "
        "header (shape (1000,), dtype float64) makes 8,128; the archive is corrupt or was "
        "altered"
    )
    with pytest.raises(SourceFileError, match=re.escape(expected)):
        NumpySource(str(path))


def test_an_entry_declaring_more_than_deflate_can_give_is_refused_before_decompressing(
    tmp_path: Path,
) -> None:
    rows = 500_000_000
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": "|u1", "fortran_order": False, "shape": (rows,)}
    )
    header = buffer.getvalue()
    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("x.npy", header + bytes(1000))
    data = bytearray(path.read_bytes())  # Both zip headers now claim all the rows are there.
    declared = struct.pack("<I", len(header) + rows)
    local, central = data.find(b"PK\x03\x04"), data.find(b"PK\x01\x02")
    data[local + 22 : local + 26] = declared
    data[central + 24 : central + 28] = declared
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as archive:
        compressed = archive.getinfo("x.npy").compress_size
    expected = (
        f"NumpySource: {path} (array 'x'): the zip entry declares {len(header) + rows:,} bytes "
        f"from {compressed:,} compressed bytes, more than deflate can give (at most 1032:1)"
    )
    with pytest.raises(SourceFileError, match=re.escape(expected)):
        NumpySource(str(path))


def test_a_file_replaced_after_opening_is_refused_when_rows_are_read(tmp_path: Path) -> None:
    path = tmp_path / "a.npz"
    np.savez_compressed(path, x=np.arange(10))
    source = NumpySource(str(path))
    np.savez_compressed(path, x=np.arange(10) * 2)
    with pytest.raises(SourceFileError, match=r"\(array 'x'\) changed since the source was"):
        source[3]


def test_a_compressed_entry_cut_short_is_refused_when_its_rows_are_read(tmp_path: Path) -> None:
    path = tmp_path / "a.npz"
    _write_npz(path, {"x": np.random.default_rng(0).integers(0, 255, 100_000, np.uint8)})
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("x.npy")
    start = info.header_offset + 30 + len(info.filename)
    data[start + 2000 : start + 4000] = bytes(2000)  # Damage the deflate stream itself.
    path.write_bytes(bytes(data))
    source = NumpySource(str(path))
    with pytest.raises(SourceFileError, match=r"\(array 'x'\): cannot read the entry: "):
        source[99_999]


@pytest.mark.parametrize(
    ("offset", "value", "found"),
    [
        (6, struct.pack("<H", 173), "zip file version 17.3"),  # Version needed to extract.
        (46, b"\xa9", "'utf-8' codec can't decode byte 0xa9"),  # A name that is not UTF-8.
    ],
)
def test_a_zip_directory_that_zipfile_rejects_is_a_source_file_error(
    tmp_path: Path, offset: int, value: bytes, found: str
) -> None:
    path = tmp_path / "a.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("\xe9.npy", b"")  # Its name is flagged UTF-8: c3 a9.
    data = bytearray(path.read_bytes())
    central = data.find(b"PK\x01\x02")
    data[central + offset : central + offset + len(value)] = value
    path.write_bytes(bytes(data))
    with pytest.raises(SourceFileError, match=f"is not a readable zip file \\({found}"):
        NumpySource(str(path))
