"""`NumpySource` of `.npy` objects in a bucket (a local moto S3 server): the same records
as the local file, rows by few ranged reads, prefetch, pickling, and clear errors."""

from __future__ import annotations

import io
import pickle
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chute_core import ObjectChangedError, SourceFileError, SourceFileNotFoundError
from chute_sources import NumpySource, StorageOptions
from chute_sources._numpy_remote import RemoteNpy
from chute_sources._remote._client import client_for


def npy_bytes(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def options_of(s3: Any, **changes: Any) -> StorageOptions:
    """Options naming the server explicitly: they travel with a pickled source."""
    env = s3.env
    return StorageOptions(
        endpoint=s3.endpoint,
        access_key_id=env["AWS_ACCESS_KEY_ID"],
        secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region=env["AWS_REGION"],
        **changes,
    )


def assert_same(actual: Any, expected: Any) -> None:
    assert type(actual) is type(expected)
    assert actual.dtype == expected.dtype
    assert np.shape(actual) == np.shape(expected)
    np.testing.assert_array_equal(actual, expected)


@pytest.fixture
def bucket(s3: Any) -> str:
    return s3.create_bucket(f"npy-{uuid.uuid4().hex[:16]}")


def upload(s3: Any, bucket: str, tmp_path: Path, array: np.ndarray, name: str) -> tuple[str, str]:
    """Writes `array` as a local .npy file and as an object; returns (path, url)."""
    path = tmp_path / name
    np.save(path, array)
    return str(path), s3.put(bucket, name, path.read_bytes())


ARRAYS = {
    "c-3d": np.random.default_rng(0).integers(0, 255, (50, 4, 3), dtype=np.uint8),
    "fortran-2d": np.asfortranarray(np.arange(40 * 6, dtype=np.float32).reshape(40, 6)),
    "fortran-3d": np.asfortranarray(np.arange(30 * 2 * 5, dtype=">i4").reshape(30, 2, 5)),
    "1d-floats": np.linspace(-1, 1, 101),
    "big-endian": np.arange(64, dtype=">u8").reshape(16, 4),
    "strings": np.array(["cat", "dog", "eel", "", "horse"] * 5),
    "bytes": np.array([b"a", b"bb", b"\x00c"] * 7),
    "structured": np.array(
        [(i, i * 0.5, f"r{i}") for i in range(23)],
        dtype=[("id", "<i8"), ("x", ">f4"), ("name", "U4")],
    ),
    "bools": np.random.default_rng(1).random((33, 7)) > 0.5,
    "empty-rows": np.zeros((9, 0), np.int16),
    "no-rows": np.zeros((0, 3), np.float64),
}


@pytest.mark.parametrize("name", list(ARRAYS))
def test_records_equal_the_local_files(s3: Any, bucket: str, tmp_path: Path, name: str) -> None:
    path, url = upload(s3, bucket, tmp_path, ARRAYS[name], f"{name}.npy")
    local, remote = NumpySource(path), NumpySource(url)
    assert len(remote) == len(local)
    keys = list(range(len(local)))
    for key in keys:
        assert_same(remote[key], local[key])
    order = np.random.default_rng(2).permutation(keys + keys[: len(keys) // 2]).tolist()
    for got, expected in zip(remote.__getitems__(order), local.__getitems__(order), strict=True):
        assert_same(got, expected)
    assert remote.path == url
    assert repr(remote).startswith(f"NumpySource(path='{url}'")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    array=hnp.arrays(
        st.one_of(hnp.scalar_dtypes(), hnp.integer_dtypes(endianness=">")),
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=8),
    ),
    fortran=st.booleans(),
    data=st.data(),
)
def test_any_array_and_keys_read_as_the_local_file_does(
    s3: Any, bucket: str, array: np.ndarray, fortran: bool, data: st.DataObject
) -> None:
    if fortran:
        array = np.asfortranarray(array)
    key = f"a-{uuid.uuid4().hex[:8]}.npy"
    url = s3.put(bucket, key, npy_bytes(array))
    local = NumpySource(array)
    remote = NumpySource(url)
    keys = data.draw(st.lists(st.integers(0, len(array) - 1), max_size=20))
    for got, expected in zip(remote.__getitems__(keys), local.__getitems__(keys), strict=True):
        assert_same(got, expected)


def test_a_long_header_is_read_in_a_second_request(s3: Any, bucket: str, tmp_path: Path) -> None:
    dtype = np.dtype([(f"field_{i:03d}", "<i2") for i in range(300)])
    array = np.zeros(5, dtype)
    array["field_299"] = np.arange(5)
    path, url = upload(s3, bucket, tmp_path, array, "wide.npy")
    assert len(Path(path).read_bytes()) - array.nbytes > 4096  # Longer than the first read.
    source = NumpySource(url)
    assert source.__getitems__([4, 1])[0]["field_299"] == 4
    assert_same(source[3], NumpySource(path)[3])


def test_nearby_rows_are_read_in_one_request(
    s3: Any, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    array = np.arange(100_000, dtype=np.int64).reshape(10_000, 10)  # 80 bytes a row
    _, url = upload(s3, bucket, tmp_path, array, "rows.npy")
    source = NumpySource(url)
    client = client_for(StorageOptions())
    asked: list[list[tuple[int, int]]] = []
    read_ranges = client.read_ranges

    def recording(info: Any, ranges: Any) -> Any:
        asked.append(list(ranges))
        return read_ranges(info, ranges)

    monkeypatch.setattr(client, "read_ranges", recording)
    header = len(npy_bytes(array)) - array.nbytes
    rows = source.__getitems__([7, 5, 9, 5, 3000])
    assert [int(row[0]) for row in rows] == [70, 50, 90, 50, 30_000]
    assert asked == [[(header + 5 * 80, header + 3001 * 80)]]  # 236 KB apart: one request.
    asked.clear()
    source.__getitems__([0, 9_999])  # 800 KB apart: still one request
    assert len(asked[0]) == 1


def test_far_apart_rows_are_separate_requests_fetched_together(
    s3: Any, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    array = np.arange(4 << 20, dtype=np.uint8).reshape(64, 65536)  # 64 KiB a row
    _, url = upload(s3, bucket, tmp_path, array, "far.npy")
    source = NumpySource(url)
    client = client_for(StorageOptions())
    asked: list[list[tuple[int, int]]] = []
    read_ranges = client.read_ranges
    monkeypatch.setattr(
        client, "read_ranges", lambda info, r: asked.append(list(r)) or read_ranges(info, r)
    )
    rows = source.__getitems__([63, 0])
    np.testing.assert_array_equal(rows[0], array[63])
    np.testing.assert_array_equal(rows[1], array[0])
    assert len(asked) == 1 and len(asked[0]) == 2  # Two ranges, one concurrent call.


def test_prefetched_rows_are_read_without_requests(
    s3: Any, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    array = np.arange(3000, dtype=np.float32).reshape(1000, 3)
    path, url = upload(s3, bucket, tmp_path, array, "hint.npy")
    source, local = NumpySource(url), NumpySource(path)
    keys = [10, 11, 12, 900, 901, 500]
    source.prefetch(keys)
    remote = source._remote
    assert remote is not None
    for entry in list(remote._entries):
        entry.future.result()
    client = client_for(StorageOptions())
    monkeypatch.setattr(client, "read_ranges", lambda *a: pytest.fail("read, not prefetched"))
    for batch in ([12, 10], [901, 11, 900], [500]):
        expected = local.__getitems__(batch)
        for got, want in zip(source.__getitems__(batch), expected, strict=True):
            assert_same(got, want)
    assert remote._entries == [] and remote._held == 0  # All hinted rows read: released.
    monkeypatch.undo()
    assert_same(source[10], local[10])  # Read again: fetched again, same record.


def test_prefetch_stays_within_its_budget_and_never_changes_records(
    s3: Any, bucket: str, tmp_path: Path
) -> None:
    array = np.arange(1 << 18, dtype=np.int32).reshape(-1, 1024)  # 4 KiB a row, 256 rows
    path, url = upload(s3, bucket, tmp_path, array, "budget.npy")
    options = StorageOptions(prefetch_bytes=3 << 20)  # Three separate requests of 1 MiB+.
    source, local = NumpySource(url, storage_options=options), NumpySource(path)
    far = [0, 200, 100]  # Rows 400 KB apart: separate requests of a row each.
    source.prefetch(far)
    remote = source._remote
    assert remote is not None
    assert remote._held <= options.prefetch_bytes
    source.prefetch([-5, 10**9])  # Out of range: ignored.
    nothing = NumpySource(url, storage_options=StorageOptions(prefetch_bytes=0))
    nothing.prefetch(far)
    assert nothing._remote is not None and nothing._remote._entries == []
    for got, expected in zip(source.__getitems__(far), local.__getitems__(far), strict=True):
        assert_same(got, expected)
    source.prefetch(list(range(256)))
    assert remote._held <= options.prefetch_bytes
    everything = list(range(255, -1, -1))
    for got, expected in zip(
        source.__getitems__(everything), local.__getitems__(everything), strict=True
    ):
        assert_same(got, expected)
    source.close()
    source.prefetch([1])  # Closed: a no-op.


def test_pickled_source_reads_in_a_spawned_process(
    s3: Any, bucket: str, tmp_path: Path, spawn_pool: Callable[..., Any]
) -> None:
    array = ARRAYS["fortran-2d"]  # (Pickling turns big-endian arrays native: not this one.)
    path, url = upload(s3, bucket, tmp_path, array, "spawn.npy")
    source = NumpySource(url, storage_options=options_of(s3))
    state = pickle.dumps(source)
    assert b"obstore" not in state and len(state) < 2000  # URL, info, header, options.
    keys = [39, 0, 3, 3]
    records = spawn_pool(NumpySource.__getitems__, source, keys)  # spawn_pool: conftest.py
    for got, expected in zip(records, NumpySource(path).__getitems__(keys), strict=True):
        assert_same(got, expected)


def test_unpickled_copy_reads_in_this_process(s3: Any, bucket: str, tmp_path: Path) -> None:
    path, url = upload(s3, bucket, tmp_path, ARRAYS["c-3d"], "copy.npy")
    copy = pickle.loads(pickle.dumps(NumpySource(url)))
    assert_same(copy[49], NumpySource(path)[49])
    assert isinstance(copy._remote, RemoteNpy)


def test_missing_object_and_missing_bucket_are_named(s3: Any, bucket: str) -> None:
    url = f"s3://{bucket}/no/such.npy"
    with pytest.raises(SourceFileNotFoundError, match=f"{url} does not exist"):
        NumpySource(url)
    with pytest.raises(SourceFileNotFoundError, match="the bucket 'no-such-bucket-x1'"):
        NumpySource("s3://no-such-bucket-x1/a.npy")


def test_npz_object_is_refused_with_a_way_out(s3: Any, bucket: str) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, x=np.arange(3))
    url = s3.put(bucket, "arrays.npz", buffer.getvalue())
    with pytest.raises(SourceFileError, match=r"is a \.npz archive.*\.npy.*download"):
        NumpySource(url)


def test_object_arrays_and_foreign_files_are_refused(s3: Any, bucket: str) -> None:
    objects = np.array([{"a": 1}, None], dtype=object)
    url = s3.put(bucket, "objects.npy", npy_bytes(objects, allow_pickle=True))
    with pytest.raises(SourceFileError, match="object array"):
        NumpySource(url)
    with pytest.raises(SourceFileError, match=r"is not a \.npy file"):
        NumpySource(s3.put(bucket, "text.npy", b"hello, world"))
    truncated = npy_bytes(np.arange(100))[:-8]
    with pytest.raises(SourceFileError, match="truncated"):
        NumpySource(s3.put(bucket, "short.npy", truncated))
    with pytest.raises(SourceFileError, match="0-d"):
        NumpySource(s3.put(bucket, "scalar.npy", npy_bytes(np.array(3))))
    with pytest.raises(ValueError, match="drop keys"):
        NumpySource(s3.put(bucket, "k.npy", npy_bytes(np.arange(2))), keys=["x"])


def test_a_replaced_object_is_not_mixed_with_the_old_one(s3: Any, bucket: str) -> None:
    url = s3.put(bucket, "v.npy", npy_bytes(np.arange(10)))
    source = NumpySource(url, storage_options=StorageOptions(max_attempts=1))
    assert int(source[3]) == 3
    s3.put(bucket, "v.npy", npy_bytes(np.arange(10) * 2))
    with pytest.raises(ObjectChangedError, match="changed after the source was created"):
        source.__getitems__([4])


def test_file_urls_are_local_paths(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.arange(4))
    source = NumpySource(f"file://{tmp_path}/x.npy")
    assert source.path == str(tmp_path / "x.npy")
    assert [int(x) for x in source] == [0, 1, 2, 3]
    source.prefetch([0, 1])  # Local: nothing to do.
