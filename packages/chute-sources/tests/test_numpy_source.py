"""Tests of `NumpySource`: every kind of data, memory mapping, pickling, and bad input."""

from __future__ import annotations

import io
import mmap
import operator
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_core import (
    RecordIndexError,
    RecordKeyTypeError,
    SourceClosedError,
    SourceFileError,
    SourceFileNotFoundError,
)
from chute_sources._numpy import NumpySource

DTYPES = st.one_of(
    hnp.scalar_dtypes(),
    hnp.integer_dtypes(endianness=">"),
    hnp.floating_dtypes(endianness=">"),
    hnp.byte_string_dtypes(max_len=8),
    hnp.unicode_string_dtypes(max_len=8),
)
ARRAYS = hnp.arrays(DTYPES, hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=6))


def assert_item_equal(item: Any, expected: Any) -> None:
    """Same type (NumPy scalar or array), dtype, shape and values."""
    assert type(item) is type(expected)
    assert item.dtype == expected.dtype
    assert np.shape(item) == np.shape(expected)
    np.testing.assert_array_equal(item, expected)


def assert_record_equal(record: Any, expected: dict[str, np.ndarray], index: int) -> None:
    assert isinstance(record, dict)
    assert list(record) == list(expected)
    for name, array in expected.items():
        assert_item_equal(record[name], array[index])


def reaches_file_mapping(item: Any) -> bool:
    """Whether `item`'s `.base` chain ends in a memory map of a file."""
    base = item
    while base is not None:
        if isinstance(base, (mmap.mmap, np.memmap)):
            return True
        base = getattr(base, "base", None)
    return False


def save_npz(path: Path, compressed: bool, **arrays: Any) -> Path:
    if compressed:
        np.savez_compressed(path, **arrays)
    else:
        np.savez(path, **arrays)
    return path


@pytest.fixture
def images(tmp_path: Path) -> tuple[Path, np.ndarray]:
    array = np.random.default_rng(0).integers(0, 255, (20, 4, 3), dtype=np.uint8)
    path = tmp_path / "images.npy"
    np.save(path, array)
    return path, array


@pytest.fixture
def columns() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {
        "image": rng.random((12, 3, 2), dtype=np.float32),
        "label": rng.integers(0, 10, 12),
        "name": np.array([f"n{i}" for i in range(12)]),
    }


# Every kind of data ---------------------------------------------------------------------


@pytest.mark.parametrize("mmap_files", [True, False])
def test_npy_file_records_are_the_rows(images: tuple[Path, np.ndarray], mmap_files: bool) -> None:
    path, array = images
    source = NumpySource(path, mmap=mmap_files)
    assert len(source) == len(array)
    for i in range(len(array)):
        assert_item_equal(source[i], array[i])


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("mmap_files", [True, False])
def test_npz_file_records_are_dicts_of_rows(
    tmp_path: Path, columns: dict[str, np.ndarray], compressed: bool, mmap_files: bool
) -> None:
    path = save_npz(tmp_path / "data.npz", compressed, **columns)
    source = NumpySource(str(path), mmap=mmap_files)
    assert len(source) == 12
    for i in range(12):
        assert_record_equal(source[i], columns, i)


def test_npz_keys_select_arrays_in_the_given_order(
    tmp_path: Path, columns: dict[str, np.ndarray]
) -> None:
    path = save_npz(tmp_path / "data.npz", False, **columns)
    source = NumpySource(path, keys=["label", "image"])
    wanted = {"label": columns["label"], "image": columns["image"]}
    assert_record_equal(source[3], wanted, 3)
    assert_record_equal(source.__getitems__([5])[0], wanted, 5)


def test_npz_keys_leave_out_arrays_of_other_lengths(tmp_path: Path) -> None:
    path = save_npz(tmp_path / "d.npz", False, x=np.arange(4), y=np.arange(4), z=np.arange(9))
    assert len(NumpySource(path, keys=["x", "y"])) == 4


def test_in_memory_array_records_are_views_of_the_rows() -> None:
    array = np.arange(24.0).reshape(6, 4)
    source = NumpySource(array)
    assert len(source) == 6
    assert_item_equal(source[2], array[2])
    assert np.shares_memory(source[2], array)


def test_in_memory_dict_records_are_dicts(columns: dict[str, np.ndarray]) -> None:
    source = NumpySource(columns)
    assert len(source) == 12
    for i in range(12):
        assert_record_equal(source[i], columns, i)
    assert list(NumpySource(columns, keys=["name"])[0]) == ["name"]


def test_one_dimensional_arrays_give_numpy_scalars(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(5, dtype=np.int16))
    source = NumpySource(tmp_path / "a.npy")
    assert isinstance(source[1], np.int16)
    assert all(isinstance(x, np.int16) for x in source.__getitems__([0, 4]))


def test_zero_length_arrays_give_an_empty_source(tmp_path: Path) -> None:
    np.save(tmp_path / "e.npy", np.zeros((0, 3), np.float32))
    save_npz(tmp_path / "e.npz", False, x=np.zeros((0, 2)), y=np.zeros(0))
    data: Any
    for data in (tmp_path / "e.npy", tmp_path / "e.npz", np.zeros((0, 5))):
        source = NumpySource(data)
        assert len(source) == 0
        assert source.__getitems__([]) == []


def test_fortran_order_and_big_endian_files(tmp_path: Path) -> None:
    array = np.asfortranarray(np.arange(30, dtype=">f8").reshape(5, 6))
    np.save(tmp_path / "f.npy", array)
    save_npz(tmp_path / "f.npz", False, f=array)
    for record in (NumpySource(tmp_path / "f.npy")[3], NumpySource(tmp_path / "f.npz")[3]["f"]):
        assert_item_equal(record, array[3])


def test_npy_format_3_0_with_non_latin1_field_names(tmp_path: Path) -> None:
    array = np.zeros(4, dtype=[("名", "<i4"), ("値", "<f8")])
    array["名"] = [1, 2, 3, 4]
    with pytest.warns(UserWarning, match=r"format 3.0"):
        np.save(tmp_path / "s.npy", array)
    with pytest.warns(UserWarning, match=r"format 3.0"):
        save_npz(tmp_path / "s.npz", False, s=array)
    assert NumpySource(tmp_path / "s.npy")[2]["名"] == 3
    assert NumpySource(tmp_path / "s.npz")[2]["s"]["名"] == 3


@settings(max_examples=40, deadline=None)
@given(array=ARRAYS)
def test_every_kind_of_data_gives_back_every_row_exactly(
    tmp_path_factory: pytest.TempPathFactory, array: np.ndarray
) -> None:
    folder = tmp_path_factory.mktemp("rows")
    data: Any
    np.save(folder / "a.npy", array)
    save_npz(folder / "stored.npz", False, a=array, b=array)
    save_npz(folder / "deflated.npz", True, a=array)
    for data in (folder / "a.npy", array):
        source = NumpySource(data)
        assert len(source) == len(array)
        for i in range(len(array)):
            assert_item_equal(source[i], array[i])
    for data in (folder / "stored.npz", folder / "deflated.npz", {"a": array, "b": array}):
        source = NumpySource(data, keys=["a"])
        assert len(source) == len(array)
        for i in range(len(array)):
            assert_record_equal(source[i], {"a": array}, i)


# Keys ------------------------------------------------------------------------------------


def test_negative_keys_count_from_the_end(images: tuple[Path, np.ndarray]) -> None:
    path, array = images
    source = NumpySource(path)
    assert_item_equal(source[-1], array[-1])
    assert_item_equal(source[-20], array[0])
    assert_item_equal(source[np.int64(-3)], array[-3])
    for item, expected in zip(source.__getitems__([-1, -2, 0]), array[[-1, -2, 0]], strict=True):
        assert_item_equal(item, expected)


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.integers(-12, 11), max_size=30))
def test_batched_reads_in_any_order_with_repeats_equal_single_reads(
    tmp_path_factory: pytest.TempPathFactory, keys: list[int]
) -> None:
    columns = {"x": np.arange(36).reshape(12, 3), "y": np.arange(12.0)}
    path = save_npz(tmp_path_factory.mktemp("batch") / "d.npz", False, **columns)
    for source in (NumpySource(path), NumpySource(columns)):
        batch = source.__getitems__(keys)
        assert len(batch) == len(keys)
        for record, key in zip(batch, keys, strict=True):
            assert_record_equal(record, columns, key)
    single = NumpySource(columns["x"])
    items = single.__getitems__(np.asarray(keys))  # type: ignore[arg-type]
    for item, key in zip(items, keys, strict=True):
        assert_item_equal(item, columns["x"][key])


def test_batched_read_is_one_fancy_index_per_array() -> None:
    array = np.arange(40).reshape(10, 4)
    batch = NumpySource(array).__getitems__([7, 1, 7])
    # Every item is a row of one shared copy, not of the source array.
    assert not np.shares_memory(batch[0], array)
    assert all(item.base is batch[0].base for item in batch)


def test_out_of_range_and_non_integer_keys_raise(images: tuple[Path, np.ndarray]) -> None:
    source = NumpySource(images[0])
    with pytest.raises(RecordIndexError, match=r"out of range"):
        source[20]
    with pytest.raises(RecordIndexError, match=r"images.npy"):
        source[-21]
    with pytest.raises(RecordIndexError):
        source.__getitems__([0, 20])
    with pytest.raises(RecordKeyTypeError):
        source[1.0]  # type: ignore[index]


# Memory mapping --------------------------------------------------------------------------


def test_npy_items_are_views_of_a_file_mapping(images: tuple[Path, np.ndarray]) -> None:
    assert reaches_file_mapping(NumpySource(images[0])[0])
    assert not reaches_file_mapping(NumpySource(images[0], mmap=False)[0])


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_items_are_mapped_only_when_stored_uncompressed(
    tmp_path: Path, columns: dict[str, np.ndarray], compressed: bool
) -> None:
    path = save_npz(tmp_path / "d.npz", compressed, **columns)
    record = NumpySource(path)[0]
    assert reaches_file_mapping(record["image"]) is not compressed
    assert not any(reaches_file_mapping(r["image"]) for r in NumpySource(path).__getitems__([0]))
    assert not reaches_file_mapping(NumpySource(path, mmap=False)[0]["image"])


def test_mixed_npz_maps_stored_entries_and_loads_deflated_ones(tmp_path: Path) -> None:
    path = tmp_path / "mixed.npz"
    with zipfile.ZipFile(path, "w") as archive:
        for name, method in (("stored", zipfile.ZIP_STORED), ("deflated", zipfile.ZIP_DEFLATED)):
            buffer = io.BytesIO()
            np.save(buffer, np.full((3, 2), len(name)))
            archive.writestr(f"{name}.npy", buffer.getvalue(), compress_type=method)
    record = NumpySource(path)[1]
    assert reaches_file_mapping(record["stored"])
    assert not reaches_file_mapping(record["deflated"])
    assert record["stored"].tolist() == [6, 6]
    assert record["deflated"].tolist() == [8, 8]


@pytest.mark.parametrize("suffix", [".npy", ".npz"])
def test_mapped_items_see_writes_to_the_file(tmp_path: Path, suffix: str) -> None:
    # Only a shared mapping of the file shows bytes written to it after opening.
    array = np.full((4, 8), 17, np.uint8)
    path = tmp_path / f"data{suffix}"
    if suffix == ".npy":
        np.save(path, array)
    else:
        save_npz(path, False, a=array)
    source = NumpySource(path)
    item = source[2] if suffix == ".npy" else source[2]["a"]
    assert not item.flags.writeable
    content = path.read_bytes()
    position = content.index(bytes([17]) * 32) + 2 * 8
    with open(path, "r+b") as file:
        file.seek(position)
        file.write(bytes([99]) * 8)
    assert item.tolist() == [99] * 8


def test_mapped_items_stay_valid_after_close(images: tuple[Path, np.ndarray]) -> None:
    path, array = images
    source = NumpySource(path)
    item = source[4]
    source.close()
    del source
    assert_item_equal(item, array[4])


# Pickling and processes ------------------------------------------------------------------


def test_file_backed_source_pickles_its_path_not_its_data(tmp_path: Path) -> None:
    array = np.arange(100_000, dtype=np.float64)
    np.save(tmp_path / "big.npy", array)
    save_npz(tmp_path / "big.npz", False, a=array)
    for path in (tmp_path / "big.npy", tmp_path / "big.npz"):
        payload = pickle.dumps(NumpySource(path))
        assert len(payload) < 2_000
        copy = pickle.loads(payload)
        assert len(copy) == 100_000
        item = copy.__getitems__([5])[0]
        assert float(item if path.suffix == ".npy" else item["a"]) == 5.0
        assert copy.path == str(path)


def test_unpickled_file_backed_source_maps_the_file_again(images: tuple[Path, np.ndarray]) -> None:
    path, array = images
    copy = pickle.loads(pickle.dumps(NumpySource(path)))
    assert reaches_file_mapping(copy[7])
    assert_item_equal(copy[7], array[7])
    copy_in_memory = pickle.loads(pickle.dumps(NumpySource(path, mmap=False)))
    assert not reaches_file_mapping(copy_in_memory[7])


def test_in_memory_source_pickles_its_arrays(columns: dict[str, np.ndarray]) -> None:
    copy = pickle.loads(pickle.dumps(NumpySource(columns)))
    for i in range(12):
        assert_record_equal(copy[i], columns, i)
    single = pickle.loads(pickle.dumps(NumpySource(columns["image"])))
    assert_item_equal(single[-1], columns["image"][-1])


def test_unpickling_fails_clearly_when_the_file_changed(tmp_path: Path) -> None:
    path = tmp_path / "a.npy"
    np.save(path, np.zeros((4, 2)))
    payload = pickle.dumps(NumpySource(path))
    np.save(path, np.zeros((5, 2)))
    with pytest.raises(SourceFileError, match=r"changed after this source was pickled"):
        pickle.loads(payload)
    path.unlink()
    with pytest.raises(SourceFileNotFoundError, match=r"a.npy"):
        pickle.loads(payload)


def test_closed_source_unpickles_closed(images: tuple[Path, np.ndarray]) -> None:
    source = NumpySource(images[0])
    source.close()
    copy = pickle.loads(pickle.dumps(source))
    with pytest.raises(SourceClosedError):
        copy[0]


@pytest.mark.parametrize("suffix", [".npy", ".npz"])
def test_read_in_a_spawned_process(
    tmp_path: Path, suffix: str, spawn_pool: Callable[..., Any]
) -> None:
    array = np.arange(60, dtype=np.int32).reshape(10, 6)
    path = tmp_path / f"data{suffix}"
    if suffix == ".npy":
        np.save(path, array)
    else:
        save_npz(path, False, a=array)
    source = NumpySource(path)
    item = spawn_pool(operator.getitem, source, 3)  # spawn_pool: see conftest.py
    batch = spawn_pool(NumpySource.__getitems__, source, [9, 0])
    if suffix == ".npz":
        item, batch = item["a"], [record["a"] for record in batch]
    assert_item_equal(item, array[3])
    assert_item_equal(batch[0], array[9])


# close, context manager, repr ------------------------------------------------------------


def test_close_and_context_manager(images: tuple[Path, np.ndarray]) -> None:
    path, _ = images
    with NumpySource(path) as source:
        source[0]
    with pytest.raises(SourceClosedError, match=r"closed"):
        source[0]
    with pytest.raises(SourceClosedError):
        source.__getitems__([0])
    in_memory = NumpySource(np.zeros((3, 2)))
    in_memory.close()
    in_memory.close()
    with pytest.raises(SourceClosedError):
        in_memory[0]


def test_repr_names_path_keys_shape_and_dtype(
    tmp_path: Path, images: tuple[Path, np.ndarray]
) -> None:
    path, _ = images
    text = repr(NumpySource(path))
    assert text == f"NumpySource(path={str(path)!r}, shape=(20, 4, 3), dtype='uint8')"
    npz = save_npz(tmp_path / "d.npz", False, x=np.zeros((2, 3), np.float32), y=np.arange(2))
    text = repr(NumpySource(npz, mmap=False))
    assert str(npz) in text
    assert "'x': 'float32 (2, 3)'" in text
    assert "'y': 'int64 (2,)'" in text
    assert "mmap=False" in text
    source = NumpySource({"a": np.zeros(3, np.bool_)})
    source.close()
    assert repr(source) == "NumpySource(keys={'a': 'bool (3,)'})"


# Bad input -------------------------------------------------------------------------------


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SourceFileNotFoundError, match=r"nope.npy") as info:
        NumpySource(tmp_path / "nope.npy")
    assert isinstance(info.value, FileNotFoundError)


@pytest.mark.parametrize("content", [b"", b"hello, world\n", b"\x89PNG\r\n\x1a\n"])
def test_file_that_is_not_npy_or_npz_names_the_file_and_the_formats(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "data.npy"
    path.write_bytes(content)
    with pytest.raises(SourceFileError, match=r"data\.npy is neither a \.npy file .* nor a \.npz"):
        NumpySource(path)


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(SourceFileError, match=r"cannot read"):
        NumpySource(tmp_path)


@pytest.mark.parametrize("mmap_files", [True, False])
def test_truncated_npy_data_is_reported(tmp_path: Path, mmap_files: bool) -> None:
    path = tmp_path / "t.npy"
    np.save(path, np.zeros((10, 10), np.float64))
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(SourceFileError, match=r"t\.npy is truncated.*800 bytes of data.*792"):
        NumpySource(path, mmap=mmap_files)


def test_truncated_npy_header_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "t.npy"
    np.save(path, np.zeros(3))
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(SourceFileError, match=r"t\.npy is not a readable \.npy array"):
        NumpySource(path)


def test_truncated_npz_archive_is_reported(tmp_path: Path) -> None:
    path = save_npz(tmp_path / "t.npz", False, x=np.zeros(100))
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(SourceFileError, match=r"t\.npz .*not a readable zip file"):
        NumpySource(path)


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_npz_entry_with_too_little_data_is_reported(tmp_path: Path, method: int) -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(100))
    path = tmp_path / "t.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.npy", buffer.getvalue()[:-80], compress_type=method)
    with pytest.raises(SourceFileError, match=r"array 'x'\) is truncated"):
        NumpySource(path)


def test_object_arrays_in_files_are_refused(tmp_path: Path) -> None:
    objects = np.array([{"a": 1}, None], dtype=object)
    np.save(tmp_path / "o.npy", objects, allow_pickle=True)
    save_npz(tmp_path / "o.npz", False, ok=np.zeros(2), bad=objects)
    for path in (tmp_path / "o.npy", tmp_path / "o.npz"):
        with pytest.raises(SourceFileError, match=r"object arrays are not supported.*unpickle"):
            NumpySource(path)
    assert len(NumpySource(tmp_path / "o.npz", keys=["ok"])) == 2


def test_zero_dimensional_arrays_are_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "s.npy", np.float32(1.5))
    save_npz(tmp_path / "s.npz", True, s=np.array(3))
    for path in (tmp_path / "s.npy", tmp_path / "s.npz"):
        with pytest.raises(SourceFileError, match=r"0-d array.*at least one axis"):
            NumpySource(path)
    with pytest.raises(ValueError, match=r"0-d.*at least one axis"):
        NumpySource(np.array(2.0))
    with pytest.raises(ValueError, match=r"'s' is 0-d"):
        NumpySource({"s": np.array(2.0)})


def test_arrays_of_different_lengths_are_named_with_their_lengths(tmp_path: Path) -> None:
    arrays = {"x": np.zeros(4), "y": np.zeros((5, 2))}
    path = save_npz(tmp_path / "d.npz", False, **arrays)
    with pytest.raises(SourceFileError, match=r"same length.*'x' has 4, 'y' has 5"):
        NumpySource(path)
    with pytest.raises(ValueError, match=r"same length.*'x' has 4, 'y' has 5"):
        NumpySource(arrays)


def test_keys_not_in_the_data_list_the_available_names(
    tmp_path: Path, columns: dict[str, np.ndarray]
) -> None:
    path = save_npz(tmp_path / "d.npz", False, **columns)
    with pytest.raises(ValueError, match=r"\['labels'\] not found.*\['image', 'label', 'name'\]"):
        NumpySource(path, keys=["label", "labels"])
    with pytest.raises(ValueError, match=r"\['img'\] not found.*\['image', 'label', 'name'\]"):
        NumpySource(columns, keys=["img"])


def test_malformed_arguments_are_refused(images: tuple[Path, np.ndarray]) -> None:
    with pytest.raises(TypeError, match=r"keys must be a list"):
        NumpySource({"x": np.zeros(2)}, keys="x")
    with pytest.raises(ValueError, match=r"distinct"):
        NumpySource({"x": np.zeros(2)}, keys=["x", "x"])
    with pytest.raises(ValueError, match=r"drop keys"):
        NumpySource(images[0], keys=["x"])
    with pytest.raises(ValueError, match=r"one array"):
        NumpySource(np.zeros(3), keys=["x"])  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"got list"):
        NumpySource([1, 2, 3])  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"np.asarray"):
        NumpySource({"x": [1, 2, 3]})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match=r"empty"):
        NumpySource({})
