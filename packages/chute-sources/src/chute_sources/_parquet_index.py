"""Finding Parquet files, checking their schemas, and indexing their row groups.

Shared by `ParquetSource` (random access) and `ParquetStream` (sequential reading). The
index is built once from the files' footers: how many rows each row group holds, and
from that the global position of every row group's first row.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from typing import Any, TypeAlias, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from chute_core import ChuteError, CorruptRecordError, SourceFileError, SourceFileNotFoundError

from ._parquet_remote import RemoteParquetFiles
from ._paths import expand_paths
from ._remote._expand import expand_url
from ._remote._options import StorageOptions
from ._remote._urls import is_object_url, local_path

__all__ = [
    "ParquetIndex",
    "ParquetPaths",
    "ParquetRecord",
    "arrow_indices",
    "check_columns",
    "expand_parquet_paths",
]

PathLikeStr: TypeAlias = "str | os.PathLike[str]"
ParquetPaths: TypeAlias = "str | os.PathLike[str] | Sequence[str | os.PathLike[str]]"
"""A file, a glob pattern, or a list of files and glob patterns."""

ParquetRecord: TypeAlias = dict[str, Any]
"""One row as `{column: value}`, exactly as `pyarrow.Table.to_pylist()` gives it."""

_READ_ERRORS = (pa.ArrowException, OSError, ValueError)


_SUFFIXES = (".parquet", ".parq")


def expand_parquet_paths(paths: ParquetPaths, owner: str) -> list[str]:
    """The local Parquet files that `paths` names (files, glob patterns, folders)."""
    return expand_paths(paths, "Parquet", _SUFFIXES, owner)


def _expand(
    paths: ParquetPaths, owner: str, options: StorageOptions
) -> tuple[list[str], dict[int, Any]]:
    """Files (local paths and URLs) in order, and the objects of the URLs by position."""
    entries = [paths] if isinstance(paths, str | os.PathLike) else paths
    if not isinstance(entries, Sequence) or not entries:
        return expand_parquet_paths(paths, owner), {}
    files: list[str] = []
    remote: dict[int, Any] = {}
    for entry in entries:
        if is_object_url(entry):
            for info in expand_url(entry, "Parquet", _SUFFIXES, owner, options):  # type: ignore[arg-type]
                remote[len(files)] = info
                files.append(info.url)
        else:
            entry = local_path(entry, owner) if isinstance(entry, str) else entry
            files.extend(expand_parquet_paths(entry, owner))
    return files, remote


def check_columns(columns: Sequence[str] | None, owner: str) -> tuple[str, ...] | None:
    """Returns `columns` as a tuple after checking it is a non-empty list of names."""
    if columns is None:
        return None
    if isinstance(columns, str):
        raise TypeError(
            f"{owner}: columns must be a list of column names, got the string "
            f"{columns!r}; write [{columns!r}]."
        )
    names = tuple(columns)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{owner}: column names are str, got {type(name).__name__} {name!r}.")
    if not names:
        raise ValueError(f"{owner}: columns is empty; pass None to read every column.")
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"{owner}: columns lists {duplicates} more than once.")
    return names


def _schema_difference(first: Any, other: Any) -> str:
    """Says how schema `other` differs from `first` (both `pyarrow.Schema`)."""
    if first.names != other.names:
        return f"its columns are {other.names}, those of the first file are {first.names}"
    for field, other_field in zip(first, other, strict=True):
        if not field.type.equals(other_field.type):
            return (
                f"column {field.name!r} has type {other_field.type} there, but "
                f"{field.type} in the first file"
            )
    return "the schemas differ"  # pragma: no cover - callers compare names and types first


class ParquetIndex:
    """The files of a Parquet dataset and the global row offsets of their row groups.

    Attributes:
        files: absolute paths of the files, in reading order.
        columns: the columns read, or None for all of them.
        schema: the `pyarrow.Schema` of the records (only the columns read).
        row_group_rows: for every file, the number of rows of each of its row groups.
        starts: for every row group of every file (global numbering), its first row.
        group_file: for every global row group, the index of its file.
        group_local: for every global row group, its index inside its file.
        num_rows: the number of rows of all files together.
    """

    def __init__(
        self,
        paths: ParquetPaths,
        columns: Sequence[str] | None,
        owner: str,
        storage_options: StorageOptions | None = None,
    ) -> None:
        options = storage_options if storage_options is not None else StorageOptions()
        files, remote = _expand(paths, owner, options)
        self.files = tuple(files)
        self.remote = RemoteParquetFiles(remote, options) if remote else None
        self.columns = check_columns(columns, owner)
        self.owner = owner
        row_group_rows: list[tuple[int, ...]] = []
        first_schema: Any = None
        if self.remote is not None:
            try:
                self.remote.load_footers()
            except ChuteError:
                raise
            except _READ_ERRORS:
                pass  # Opened one by one below, which names the file that fails.
        for number, path in enumerate(self.files):
            with self.open_file(number, check=False) as handle:
                schema = self._projected_schema(path, handle.schema_arrow)
                metadata = handle.metadata
                sizes = tuple(
                    int(metadata.row_group(j).num_rows) for j in range(metadata.num_row_groups)
                )
            if first_schema is None:
                first_schema = schema
            elif first_schema.names != schema.names or not all(
                a.type.equals(b.type) for a, b in zip(first_schema, schema, strict=True)
            ):
                raise SourceFileError(
                    f"{owner}: {path} does not have the schema of {self.files[0]}: "
                    f"{_schema_difference(first_schema, schema)}. All files of one source "
                    f"must share a schema; read the others with a second source or "
                    f"select the common columns with `columns=`."
                )
            row_group_rows.append(sizes)
        self.schema: Any = first_schema
        self.row_group_rows = tuple(row_group_rows)
        sizes_flat = [size for sizes in self.row_group_rows for size in sizes]
        cumulative = np.concatenate(
            [np.zeros(1, np.int64), np.cumsum(np.asarray(sizes_flat, np.int64), dtype=np.int64)]
        )
        self.starts: npt.NDArray[np.int64] = cumulative[:-1]
        self._starts_list: list[int] = self.starts.tolist()
        self.group_file: npt.NDArray[np.int64] = np.repeat(
            np.arange(len(self.files), dtype=np.int64),
            [len(sizes) for sizes in self.row_group_rows],
        )
        self.group_local: npt.NDArray[np.int64] = np.concatenate(
            [np.zeros(0, np.int64)]
            + [np.arange(len(sizes), dtype=np.int64) for sizes in self.row_group_rows]
        )
        self.num_rows = int(cumulative[-1])
        firsts = np.cumsum([0] + [len(sizes) for sizes in self.row_group_rows])
        self._file_groups: list[int] = firsts.tolist()  # File -> its first global row group.

    def first_row(self, file: int, row_group: int) -> int:
        """The global number of the first row of row group `row_group` of file `file`."""
        return self._starts_list[self._file_groups[file] + row_group]

    def _projected_schema(self, path: str, schema: Any) -> Any:
        if self.columns is None:
            return schema
        for name in self.columns:
            if name not in schema.names:
                raise SourceFileError(
                    f"{self.owner}: column {name!r} is not in {path}; its columns are "
                    f"{schema.names}. Fix `columns=` (names are case-sensitive; select a "
                    f"whole struct column by its top-level name)."
                )
        return pa.schema([schema.field(name) for name in self.columns])

    def open(self, path: str) -> Any:
        """Opens `path` as a `pyarrow.parquet.ParquetFile`.

        Raises:
            SourceFileError: the file is not a readable Parquet file.
        """
        try:
            return pq.ParquetFile(path)
        except FileNotFoundError as exc:
            raise SourceFileNotFoundError(
                f"{self.owner}: {path} no longer exists (it was there when the source was created)."
            ) from exc
        except _READ_ERRORS as exc:
            raise SourceFileError(
                f"{self.owner}: {path} is not a readable Parquet file (corrupt, truncated, "
                f"or another format): {exc}"
            ) from exc

    def is_remote(self, file: int) -> bool:
        """Whether file number `file` lives in a bucket."""
        return self.remote is not None and file in self.remote.infos

    def open_file(self, file: int, check: bool = True) -> Any:
        """Opens file number `file` again and checks that its row groups did not change.

        A file in a bucket is read at the version (ETag) listed when the index was
        made, so it cannot change; its footer is read once.
        """
        path = self.files[file]
        if self.remote is not None and file in self.remote.infos:
            try:
                return self.remote.open(file)
            except ChuteError:
                raise
            except _READ_ERRORS as exc:
                raise SourceFileError(
                    f"{self.owner}: {path} is not a readable Parquet file (corrupt, "
                    f"truncated, or another format): {exc}"
                ) from exc
        handle = self.open(path)
        if not check:
            return handle
        metadata = handle.metadata
        sizes = tuple(int(metadata.row_group(j).num_rows) for j in range(metadata.num_row_groups))
        if sizes != self.row_group_rows[file]:
            handle.close()
            raise SourceFileError(
                f"{self.owner}: {path} changed since the source was created (its row "
                f"groups now hold {sum(sizes)} rows, before {sum(self.row_group_rows[file])}); "
                f"create the source again."
            )
        return handle

    def read_row_group(self, handle: Any, file: int, row_group: int, use_threads: bool) -> Any:
        """Reads and decodes row group `row_group` of file `file` into a `pyarrow.Table`.

        Raises:
            SourceFileError: the row group does not decode.
        """
        try:
            if self.remote is not None and file in self.remote.infos:
                return self.remote.read_row_group(file, row_group, self.columns, use_threads)
            return handle.read_row_group(
                row_group,
                columns=None if self.columns is None else list(self.columns),
                use_threads=use_threads,
            )
        except ChuteError:
            raise
        except _READ_ERRORS as exc:
            raise SourceFileError(
                f"{self.owner}: row group {row_group} of {self.files[file]} does not decode; "
                f"it is not a readable Parquet file (corrupt or truncated): {exc}"
            ) from exc

    def prefetch(self, file: int, row_group: int) -> bool:
        """Starts fetching a row group of a file in a bucket (False: over the budget)."""
        if self.remote is None or file not in self.remote.infos:
            return True
        return self.remote.prefetch(file, row_group, self.columns)

    def close(self) -> None:
        """Drops what was fetched ahead."""
        if self.remote is not None:
            self.remote.close()

    def locate(self, index: int) -> int:
        """Returns the global row group that holds row `index` (in `[0, num_rows)`)."""
        return bisect.bisect_right(self._starts_list, index) - 1

    def locate_many(self, indices: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Vectorised `locate`."""
        groups = np.searchsorted(self.starts, indices, side="right") - 1
        return groups.astype(np.int64, copy=False)

    def advance(self, file: int, row_group: int, row: int) -> tuple[int, int, int]:
        """Returns the first existing record at or after (file, row_group, row).

        Skips exhausted and empty row groups and files; the end of the data is
        `(len(files), 0, 0)`.
        """
        while file < len(self.files):
            sizes = self.row_group_rows[file]
            while row_group < len(sizes):
                if row < sizes[row_group]:
                    return file, row_group, row
                row_group, row = row_group + 1, 0
            file, row_group, row = file + 1, 0, 0
        return len(self.files), 0, 0


def arrow_indices(rows: npt.NDArray[Any]) -> Any:
    """`rows` as a `pyarrow` int64 array, built on their buffer without a conversion.

    `Table.take(numpy_array)` converts its argument, and pyarrow's conversion imports
    pandas when it is installed (about a second, in every worker process); this does
    not.

    Example:
        >>> import pyarrow as pa
        >>> pa.table({"a": [5, 6, 7]}).take(arrow_indices(np.array([2, 0]))).to_pylist()
        [{'a': 7}, {'a': 5}]
    """
    values = np.ascontiguousarray(rows, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), values.size, [None, pa.py_buffer(values)])


def table_rows(table: Any, where: str) -> list[ParquetRecord]:
    """`table.to_pylist()`, with invalid UTF-8 in a string column as `CorruptRecordError`.

    Example:
        >>> import pyarrow as pa
        >>> table_rows(pa.table({"a": [1, 2]}), "f.parquet")
        [{'a': 1}, {'a': 2}]
    """
    try:
        return cast(list[ParquetRecord], table.to_pylist())
    except UnicodeDecodeError as error:
        raise CorruptRecordError(
            f"{where}: a string column holds bytes that are not valid UTF-8 ({error}); the "
            "file is corrupt or was written with a wrong type (use binary for raw bytes)."
        ) from error
