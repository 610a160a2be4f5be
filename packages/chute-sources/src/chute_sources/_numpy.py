"""`NumpySource`: the rows of NumPy arrays (in memory, `.npy` or `.npz` files) as records.

Opening a source reads only headers. Files are memory-mapped where the format allows
it: a `.npy` file through `np.load(mmap_mode="r")`, and each array stored uncompressed
in a `.npz` archive by mapping the archive once and viewing each array at its data
offset inside the zip. Compressed `.npz` entries cannot be mapped: their rows are
decompressed when first read, from the first row up to the last one asked for
(`_npz_compressed`). Pickle is never allowed: an object array in a file is an error.
A `.npy` object in a bucket is read by ranged reads of the rows asked for
(`_numpy_remote`).
"""

from __future__ import annotations

import mmap as mmap_lib
import os
import struct
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from typing import IO, Any, TypeAlias, TypeVar, cast, overload

import numpy as np
import numpy.typing as npt
from numpy.lib import format as npy_format

from chute_core import SourceFileError, SourceFileNotFoundError

from ._base import Source
from ._npy_header import FIX, check_header, read_header
from ._npz_compressed import CompressedMember
from ._numpy_remote import RemoteNpy
from ._remote._options import StorageOptions
from ._remote._urls import is_object_url, local_path

__all__ = ["ArrayItem", "NumpySource"]

T = TypeVar("T")

ArrayItem: TypeAlias = npt.NDArray[Any] | np.generic
"""One row of one array: a NumPy scalar for a 1-D array, an array of one axis less otherwise."""

_Array: TypeAlias = npt.NDArray[Any]
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header, an empty archive
_LOCAL_HEADER = struct.Struct("<4s5H3I2H")  # signature ... name length, extra length


class NumpySource(Source[T]):
    """The rows of NumPy arrays, indexed along axis 0, as a random-access source.

    `data` is one of:

    * a path to a `.npy` file: records are `array[i]`. With `mmap=True` (the default) the
      file is memory-mapped read-only, otherwise it is read into memory.
    * a path to a `.npz` file: records are dicts `{name: array[i]}` over its arrays (or
      only those named in `keys`), which must all have the same length. Arrays stored
      uncompressed (`np.savez`) are memory-mapped in place inside the zip; compressed ones
      (`np.savez_compressed`) cannot be: opening reads only their headers (checked
      against the sizes the zip declares), and a read decompresses the rows from the
      first up to the last one it asks for, into memory kept for later reads (reading
      the first rows of a large array is cheap, reading its last row decompresses it
      all). Their records are read-only views, like those of a mapped file.
    * an in-memory `np.ndarray` (records `array[i]`) or a dict of them (records dicts),
      held by reference and pickled with the source; `mmap` is ignored.
    * the URL of a `.npy` object in a bucket (`s3://bucket/key.npy`, `gs://...`): the
      header is read when the source is created (one ranged read), and each batched
      read fetches only its rows, rows close together in one request (see
      `prefetch`). Records equal those of the local file, but are copies, not views.
      Every read asks for the version (ETag) seen at creation: a replaced object
      raises `ObjectChangedError`. A `.npz` in a bucket is refused (download it, or
      save `.npy` files). Rows of a Fortran-order array are spread over the file (one
      element per column), so such files read much slower than C-order ones.

    `file:///path` URLs are local paths.

    The file type is recognised by its content, not its suffix. Object arrays in files are
    refused, because reading them would unpickle (and so could run) arbitrary code.

    A record read alone is `array[i]`: a NumPy scalar for 1-D arrays, otherwise a view.
    Views of a memory-mapped file are read-only and stay valid as long as they are
    referenced, also after `close()` (the mapping is released with the last view). Records
    read with `__getitems__` are views of one in-memory copy per array, made by a single
    fancy-index read. Reads are thread-safe. Do not truncate or rewrite a file in place
    while a source maps it: reading pages that vanished kills the process (`SIGBUS`).

    Pickling a file-backed source pickles its path and options, not the data; the copy
    opens (and maps) the file again, and fails if the arrays' shapes or dtypes changed.
    A source of a URL pickles the URL, the object's size and version, the header and
    `storage_options`; the copy makes its own connections.

    Args:
        data: a `.npy` / `.npz` path, an array, or a dict of arrays (see above).
        keys: the names of the `.npz` or dict arrays to read, in record order; default all.
        mmap: memory-map file data where possible instead of reading it into memory.
        storage_options: how to reach a URL's bucket, and the prefetch budget (default:
            from the environment; see `StorageOptions`).

    Raises:
        SourceFileNotFoundError: no file at `data` (or no such object or bucket).
        SourceFileError: the file is not a `.npy` / `.npz`, is truncated or corrupt, or
            holds object or 0-d arrays or arrays of different lengths.
        ValueError: in-memory arrays that are 0-d or of different lengths; `keys` naming
            arrays that do not exist.
        TypeError: `data` or `keys` of the wrong type.

    Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> source = NumpySource({"x": np.arange(6).reshape(3, 2), "y": np.array([7, 8, 9])})
        >>> len(source), source[-1]
        (3, {'x': array([4, 5]), 'y': np.int64(9)})
        >>> [record["y"].item() for record in source.__getitems__([2, 0, 2])]
        [9, 7, 9]
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "images.npy")
        ...     np.save(path, np.zeros((100, 8, 8), np.uint8))
        ...     with NumpySource(path) as images:
        ...         print(len(images), images[5].shape, images[5].dtype)
        ...     with NumpySource("file://" + path) as same:  # s3:// and gs:// URLs too
        ...         same.prefetch([5, 6])  # A hint for objects in buckets; nothing here.
        ...         print(same.path == path, same.__getitems__([6])[0].shape)
        100 (8, 8) uint8
        True (8, 8)
    """

    @overload
    def __init__(
        self: NumpySource[ArrayItem], data: _Array, keys: None = None, mmap: bool = True
    ) -> None: ...
    @overload
    def __init__(
        self: NumpySource[dict[str, ArrayItem]],
        data: Mapping[str, _Array],
        keys: Sequence[str] | None = None,
        mmap: bool = True,
    ) -> None: ...
    @overload
    def __init__(
        self: NumpySource[Any],
        data: str | os.PathLike[str],
        keys: Sequence[str] | None = None,
        mmap: bool = True,
        *,
        storage_options: StorageOptions | None = None,
    ) -> None: ...
    def __init__(
        self,
        data: str | os.PathLike[str] | _Array | Mapping[str, _Array],
        keys: Sequence[str] | None = None,
        mmap: bool = True,
        *,
        storage_options: StorageOptions | None = None,
    ) -> None:
        self._keys = _check_keys_argument(keys)
        self._mmap = bool(mmap)
        self._path: str | None = None
        self._remote: RemoteNpy | None = None
        if is_object_url(data):
            assert isinstance(data, str)
            if self._keys is not None:
                raise ValueError(f"NumpySource: {data} is a .npy file (one array); drop keys=.")
            self._path = data
            self._remote = RemoteNpy.open(data, storage_options or StorageOptions())
            single, arrays = True, {"data": cast(_Array, self._remote)}  # Rows by ranged reads.
        elif isinstance(data, str | os.PathLike):
            self._path = os.path.abspath(local_path(os.fspath(data), "NumpySource"))
            single, arrays = _open_file(self._path, self._keys, self._mmap)
        elif isinstance(data, np.ndarray):
            if self._keys is not None:
                raise ValueError("NumpySource: keys selects arrays of a dict; data is one array.")
            single, arrays = True, _check_arrays({"data": data}, "NumpySource(data)", ValueError)
        elif isinstance(data, Mapping):
            _check_dict(data)
            names = _select(list(data), self._keys, "NumpySource(data)")
            arrays = _check_arrays({n: data[n] for n in names}, "NumpySource(data)", ValueError)
            single = False
        else:
            raise TypeError(
                "NumpySource: data must be a path to a .npy / .npz file, an np.ndarray or a "
                f"dict of np.ndarrays, got {type(data).__name__}."
            )
        self._single = single
        self._names = tuple(arrays)
        self._arrays = tuple(arrays.values())
        self._schema = tuple((name, a.shape, a.dtype) for name, a in arrays.items())
        self._length = len(self._arrays[0])

    @property
    def path(self) -> str | None:
        """The absolute path (or the URL) of the file, or None for in-memory arrays."""
        return self._path

    def prefetch(self, record_keys: Sequence[int]) -> None:
        """Starts fetching what reading `record_keys` will need (a hint; returns at once).

        For a file in a bucket, the byte ranges of these rows are fetched in the
        background, within `StorageOptions.prefetch_bytes`, and used by the next reads
        (which give the same records either way); local files and arrays need nothing.
        """
        if self._remote is None or self._closed:
            return
        keys = np.asarray(record_keys, dtype=np.int64).reshape(-1)
        self._remote.prefetch(keys[(keys >= 0) & (keys < self._length)])

    def __len__(self) -> int:
        return self._length

    def _read(self, index: int) -> T:
        if self._single:
            return cast(T, self._arrays[0][index])
        return cast(T, {name: a[index] for name, a in zip(self._names, self._arrays, strict=True)})

    def _read_many(self, indices: Sequence[int]) -> list[T]:
        positions = np.asarray(indices, dtype=np.intp)
        if self._single:
            return cast(list[T], list(self._arrays[0][positions]))
        columns = [list(a[positions]) for a in self._arrays]
        return [
            cast(T, dict(zip(self._names, row, strict=True))) for row in zip(*columns, strict=True)
        ]

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {} if self._path is None else {"path": self._path}
        if self._single:
            _, shape, dtype = self._schema[0]
            params.update(shape=shape, dtype=str(dtype))
        else:
            params["keys"] = {name: f"{dtype} {shape}" for name, shape, dtype in self._schema}
        if self._path is not None and not self._mmap:
            params["mmap"] = False
        return params

    def close(self) -> None:
        """Drops the arrays (and so the file mapping, once no record views remain)."""
        self._arrays = ()
        if self._remote is not None:
            self._remote.close()
        super().close()

    def __getstate__(self) -> dict[str, Any]:
        fields = ("_path", "_keys", "_mmap", "_closed", "_single", "_names", "_schema", "_length")
        state = {field: getattr(self, field) for field in fields}
        state["_remote"] = self._remote  # URL, ObjectInfo (size, ETag) and options only.
        if self._path is None:  # in memory: the arrays are the data
            state["_arrays"] = self._arrays
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("_remote", None)
        self.__dict__.update(state)
        if self._closed:
            self._arrays = ()
        elif self._remote is not None:
            self._arrays = (cast(_Array, self._remote),)
        elif self._path is not None:
            _, arrays = _open_file(self._path, self._keys, self._mmap)
            found = tuple((name, a.shape, a.dtype) for name, a in arrays.items())
            if found != self._schema:
                raise SourceFileError(
                    f"NumpySource: {self._path} changed after this source was pickled: expected "
                    f"arrays (name, shape, dtype) {self._schema}, found {found}; create a new "
                    "source from the current file."
                )
            self._arrays = tuple(arrays.values())


def _check_keys_argument(keys: Sequence[str] | None) -> tuple[str, ...] | None:
    if keys is None:
        return None
    if isinstance(keys, str | bytes) or not all(isinstance(key, str) for key in keys):
        raise TypeError(f"NumpySource: keys must be a list of array names, got {keys!r}.")
    if not keys or len(set(keys)) != len(keys):
        raise ValueError(f"NumpySource: keys must be distinct array names, got {list(keys)!r}.")
    return tuple(keys)


def _check_dict(data: Mapping[Any, Any]) -> None:
    if not data:
        raise ValueError("NumpySource: the dict of arrays is empty; records need an array.")
    for name, value in data.items():
        if not isinstance(name, str) or not isinstance(value, np.ndarray):
            raise TypeError(
                "NumpySource: a dict of data must map str names to np.ndarrays, got "
                f"{name!r}: {type(value).__name__}; convert values with np.asarray(...)."
            )


def _select(available: Sequence[str], keys: tuple[str, ...] | None, where: str) -> list[str]:
    if keys is None:
        return list(available)
    missing = [key for key in keys if key not in available]
    if missing:
        raise ValueError(
            f"{where}: keys {missing} not found; the available arrays are {list(available)}."
        )
    return list(keys)


def _check_arrays(
    arrays: dict[str, _Array], where: str, error: type[Exception]
) -> dict[str, _Array]:
    """Checks that every array has an axis 0, of one shared length."""
    for name, array in arrays.items():
        if array.ndim == 0:
            raise error(
                f"{where}: array {name!r} is 0-d (a single value); NumpySource needs at least "
                "one axis, whose entries are the records; wrap it with np.atleast_1d(...)."
            )
    lengths = {name: len(array) for name, array in arrays.items()}
    if len(set(lengths.values())) > 1:
        found = ", ".join(f"{name!r} has {length}" for name, length in lengths.items())
        raise error(
            f"{where}: every array must have the same length along axis 0 (one entry per "
            f"record), found {found}; select arrays of equal length with keys=[...]."
        )
    return arrays


def _open_file(
    path: str, keys: tuple[str, ...] | None, mmap: bool
) -> tuple[bool, dict[str, _Array]]:
    """Returns (single array?, arrays by name) for a `.npy` or `.npz` file."""
    try:
        with open(path, "rb") as file:
            magic = file.read(len(npy_format.MAGIC_PREFIX))
    except FileNotFoundError:
        raise SourceFileNotFoundError(
            f"NumpySource: no file at {path}; check the path (a .npy or .npz file)."
        ) from None
    except OSError as error:
        raise SourceFileError(f"NumpySource: cannot read {path}: {error}") from error
    if magic == npy_format.MAGIC_PREFIX:
        if keys is not None:
            raise ValueError(f"NumpySource: {path} is a .npy file (one array); drop keys=.")
        return True, {"data": _open_npy(path, mmap)}
    if magic[:4] in _ZIP_MAGICS:
        return False, _open_npz(path, keys, mmap)
    raise SourceFileError(
        f"NumpySource: {path} is neither a .npy file (starting with {npy_format.MAGIC_PREFIX!r}) "
        f"nor a .npz zip archive (starting with b'PK'), it starts with {magic!r}; {FIX}."
    )


def _open_npy(path: str, mmap: bool) -> _Array:
    with open(path, "rb") as file:
        header = read_header(file, path)
        file_size = os.fstat(file.fileno()).st_size
    check_header(header, path, file_size - header.size)
    try:
        array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise SourceFileError(f"NumpySource: cannot load {path}: {error}") from error
    # A plain ndarray view of the np.memmap: its `.base` chain keeps the mapping alive.
    return np.asarray(array)


def _open_npz(path: str, keys: tuple[str, ...] | None, mmap: bool) -> dict[str, _Array]:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as error:
        # ValueError: a name that is not UTF-8; NotImplementedError: an unknown zip version.
        raise SourceFileError(
            f"NumpySource: {path} looks like a .npz archive but is not a readable zip file "
            f"({error}); it may be truncated; {FIX}."
        ) from error
    with archive, open(path, "rb") as file:
        members = {
            _member_name(info.filename): info for info in archive.infolist() if not info.is_dir()
        }
        if not members:
            raise SourceFileError(f"NumpySource: the .npz archive {path} holds no arrays.")
        names = _select(list(members), keys, f"NumpySource: {path}")
        mapping: mmap_lib.mmap | None = None
        arrays: dict[str, _Array] = {}
        for name in names:
            info = members[name]
            where = f"{path} (array {name!r})"
            if info.compress_type != zipfile.ZIP_STORED:  # Headers now, rows when read.
                arrays[name] = cast(_Array, CompressedMember.open(path, archive, info, where))
            elif mmap:
                if mapping is None:
                    mapping = mmap_lib.mmap(file.fileno(), 0, access=mmap_lib.ACCESS_READ)
                arrays[name] = _map_stored(file, mapping, info, where)
            else:
                arrays[name] = _load_member(archive, info, where)
    return _check_arrays(arrays, f"NumpySource: {path}", SourceFileError)


def _member_name(filename: str) -> str:
    """`np.savez` stores array `x` as `x.npy`; `np.load` calls it `x` again."""
    return filename.removesuffix(".npy")


def _map_stored(
    file: IO[bytes], mapping: mmap_lib.mmap, info: zipfile.ZipInfo, where: str
) -> _Array:
    """Views an uncompressed member's array in place, at its offset in the mapped archive."""
    if not 0 <= info.header_offset < len(mapping):
        raise SourceFileError(
            f"NumpySource: {where}: corrupt zip directory (an entry's offset "
            f"{info.header_offset} lies outside the {len(mapping)}-byte file)."
        )
    file.seek(info.header_offset)
    local = file.read(_LOCAL_HEADER.size)
    if len(local) < _LOCAL_HEADER.size or local[:4] != b"PK\x03\x04":
        raise SourceFileError(f"NumpySource: {where}: corrupt zip entry (bad local header).")
    fields = _LOCAL_HEADER.unpack(local)
    if fields[2] & 0x1:
        raise SourceFileError(f"NumpySource: {where}: encrypted zip entries are not supported.")
    start = info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1]
    file.seek(start)
    header = read_header(file, where)
    available = min(info.file_size, len(mapping) - start) - header.size
    check_header(header, where, available)
    return np.ndarray(
        header.shape,
        header.dtype,
        buffer=mapping,
        offset=start + header.size,
        order="F" if header.fortran_order else "C",
    )


def _load_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> _Array:
    """Reads an uncompressed member into memory (`mmap=False`), after checking its header."""
    try:
        with archive.open(info) as stream:
            header = read_header(stream, where)
        check_header(header, where, info.file_size - header.size)
        with archive.open(info) as stream:
            array: _Array = npy_format.read_array(stream, allow_pickle=False)
    except (
        ValueError,
        EOFError,
        zipfile.BadZipFile,
        zlib.error,
        RuntimeError,
        NotImplementedError,
    ) as error:
        # RuntimeError: an encrypted entry; NotImplementedError: an unknown compression method.
        raise SourceFileError(f"NumpySource: {where}: cannot read the entry: {error}") from error
    return array
