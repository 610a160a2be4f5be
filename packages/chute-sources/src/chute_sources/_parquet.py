"""`ParquetSource`: random access to the rows of one or many Parquet files.

`ParquetStream` (sequential reading, in `_parquet_stream.py`) is re-exported here so
that both Parquet readers come from one module.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from chute_core import CorruptRecordError
from chute_core.internal import CACHE_HITS, CACHE_MISSES, COUNTERS, check_int

from ._base import Source
from ._parquet_index import (
    ParquetIndex,
    ParquetPaths,
    ParquetRecord,
    arrow_indices,
    table_rows,
)
from ._parquet_stream import ParquetStream
from ._paths import display_paths
from ._record_errors import located
from ._remote._options import StorageOptions

__all__ = ["ParquetRecord", "ParquetSource", "ParquetStream"]

_MAX_IDLE_HANDLES = 16
"""Open file handles kept for reuse; more are closed when returned."""


class ParquetSource(Source[ParquetRecord]):
    """The rows of one or many Parquet files as a random-access source.

    Record `i` is the `i`-th row of the files read one after the other (files in the
    order given, each glob pattern's matches sorted). A record is a dict
    `{column: value}` exactly as `pyarrow.Table.to_pylist()` gives it: structs become
    dicts, lists become lists, strings `str`, binary `bytes`, nulls `None`.

    The files' footers are read once, when the source is created, into an index of
    row groups. A read finds the row group that holds the record, decodes that whole
    row group into Arrow memory, and keeps it in a small LRU cache, so nearby reads
    are cheap; only the requested rows are converted to Python objects. Batched reads
    (`__getitems__`) decode each row group they touch once per call and return the
    records in the order asked for. Each read counts its row groups found in the cache
    and decoded (`COUNTERS`' cache hits and misses, `cache="row_group"`).

    Thread safety: reads from several threads at once are safe. A thread never shares
    an open file with another while it reads (each read borrows a handle of its own),
    the cache is guarded by a lock, and decoding happens outside the lock.

    Pickling keeps the index but not the open files, which are reopened on the first
    read after unpickling (so worker processes each open their own). `close()` closes
    the files and empties the cache.

    Args:
        paths: a file, a glob pattern (`data/*.parquet`, `data/**/*.parquet`), or a
            list of files and patterns.
        columns: the columns to read (top-level names; a struct column comes whole),
            or None for all of them.
        cache_row_groups: how many decoded row groups to keep; 0 disables the cache.
        storage_options: how to reach `s3://` / `gs://` files (default: from the
            environment; see `StorageOptions`).

    Files in buckets (`s3://bucket/data/*.parquet`, `gs://...`) are read by ranged
    requests: each footer once, when the source is created, and each row group in one
    request for the span of its column chunks, fetched ahead of the reads that need it
    when the pipeline knows its order (`prefetch`).

    Raises:
        SourceFileNotFoundError: a path or a pattern names no file.
        SourceFileError: a file is not a readable Parquet file, lacks a requested
            column, or has another schema than the first file.

    Example:
        >>> import os, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> path = os.path.join(tempfile.mkdtemp(), "animals.parquet")
        >>> table = pa.table({"name": ["cat", "dog", "eel"], "legs": [4, 4, 0]})
        >>> pq.write_table(table, path, row_group_size=2)
        >>> with ParquetSource(path) as source:
        ...     print(len(source), source[-1])
        ...     print(source.__getitems__([1, 0]))
        3 {'name': 'eel', 'legs': 0}
        [{'name': 'dog', 'legs': 4}, {'name': 'cat', 'legs': 4}]
    """

    def __init__(
        self,
        paths: ParquetPaths,
        columns: Sequence[str] | None = None,
        cache_row_groups: int = 8,
        storage_options: StorageOptions | None = None,
    ) -> None:
        cache_row_groups = check_int(cache_row_groups, "cache_row_groups", "ParquetSource")
        self._index = ParquetIndex(paths, columns, "ParquetSource", storage_options)
        self._paths_shown = display_paths(paths)
        self._cache_row_groups = cache_row_groups
        self._init_runtime()

    def _init_runtime(self) -> None:
        """Creates what is not pickled: the lock, the cache and the open files."""
        self._lock = threading.Lock()
        self._cache: OrderedDict[int, Any] = OrderedDict()
        self._idle_handles: dict[int, list[Any]] = {}
        self._num_idle_handles = 0

    @property
    def files(self) -> tuple[str, ...]:
        """The absolute paths of the files, in reading order."""
        return self._index.files

    @property
    def columns(self) -> tuple[str, ...] | None:
        """The columns read, or None for all of them."""
        return self._index.columns

    @property
    def schema(self) -> Any:
        """The `pyarrow.Schema` of the records (only the columns read)."""
        return self._index.schema

    def __len__(self) -> int:
        return self._index.num_rows

    def _read(self, index: int) -> ParquetRecord:
        group = self._index.locate(index)
        table, hit = self._row_group(group)
        self._count(int(hit), int(not hit))
        row = index - int(self._index.starts[group])
        try:
            return table_rows(table.slice(row, 1), self._where(group))[0]
        except CorruptRecordError as error:
            raise self._located(error, group, table, [row], [index]) from error

    def _read_many(self, indices: Sequence[int]) -> list[ParquetRecord]:
        keys = np.asarray(indices, dtype=np.int64)
        if keys.size == 0:
            return []
        groups = self._index.locate_many(keys)
        rows = keys - self._index.starts[groups]
        order = np.argsort(groups, kind="stable")
        boundaries = np.flatnonzero(np.diff(groups[order])) + 1
        records: list[Any] = [None] * keys.size
        hits = 0
        for positions in np.split(order, boundaries):
            table, hit = self._row_group(int(groups[positions[0]]))
            hits += hit
            group = int(groups[positions[0]])
            try:
                taken = table_rows(table.take(arrow_indices(rows[positions])), self._where(group))
            except CorruptRecordError as error:
                chosen = rows[positions].tolist()
                raise self._located(
                    error, group, table, chosen, keys[positions].tolist()
                ) from error
            for position, record in zip(positions.tolist(), taken, strict=True):
                records[position] = record
        self._count(hits, len(boundaries) + 1 - hits)
        return records

    def _count(self, hits: int, misses: int) -> None:
        """Counts row group lookups in `COUNTERS` (label `cache="row_group"`), once per read."""
        if self._cache_row_groups > 0:
            if hits:
                COUNTERS.add(CACHE_HITS, hits, cache="row_group")
            if misses:
                COUNTERS.add(CACHE_MISSES, misses, cache="row_group")

    def _located(
        self, error: CorruptRecordError, group: int, table: Any, rows: list[int], keys: list[int]
    ) -> Exception:
        """`error` naming the first of `rows` (of row group `group`) that does not convert."""
        file, local = int(self._index.group_file[group]), int(self._index.group_local[group])
        before = sum(self._index.row_group_rows[file][:local])  # Rows of the file before.
        for row, key in zip(rows, keys, strict=True):
            try:
                table.slice(row, 1).to_pylist()
            except UnicodeDecodeError:
                return located(error, "Parquet", self._index.files[file], before + row, key)
        return error

    def _where(self, group: int) -> str:
        file = self._index.files[int(self._index.group_file[group])]
        return f"ParquetSource: {file}, row group {int(self._index.group_local[group])}"

    def _row_group(self, group: int) -> tuple[Any, bool]:
        """Global row group `group` decoded, from the cache or from its file; whether cached."""
        file = int(self._index.group_file[group])
        with self._lock:
            table = self._cache.get(group)
            if table is not None:
                self._cache.move_to_end(group)
                return table, True
            handles = self._idle_handles.get(file)
            handle = handles.pop() if handles else None
            if handle is not None:
                self._num_idle_handles -= 1
        if handle is None:
            handle = self._index.open_file(file)
        try:
            table = self._index.read_row_group(
                handle, file, int(self._index.group_local[group]), use_threads=False
            )
        except BaseException:
            handle.close()
            raise
        with self._lock:
            if self._closed or self._num_idle_handles >= _MAX_IDLE_HANDLES:
                handle.close()
            else:
                self._idle_handles.setdefault(file, []).append(handle)
                self._num_idle_handles += 1
            if self._cache_row_groups > 0 and not self._closed:
                self._cache[group] = table
                self._cache.move_to_end(group)
                while len(self._cache) > self._cache_row_groups:
                    self._cache.popitem(last=False)
        return table, False

    def prefetch(self, record_keys: Sequence[int]) -> None:
        """Starts fetching the row groups that reading `record_keys` needs (a hint).

        Only files in buckets fetch anything: each row group not decoded yet is
        fetched in the background, in the order of the keys, within
        `StorageOptions.prefetch_bytes`; the reads then take it. Returns at once.
        """
        if self._index.remote is None or self._closed or len(record_keys) == 0:
            return
        groups = self._index.locate_many(np.asarray(record_keys, dtype=np.int64))
        with self._lock:
            cached = set(self._cache)
        for group in dict.fromkeys(groups.tolist()):
            if group in cached:
                continue
            file = int(self._index.group_file[group])
            if not self._index.prefetch(file, int(self._index.group_local[group])):
                break

    def close(self) -> None:
        """Closes the open files and empties the cache; later reads raise `SourceClosedError`."""
        with self._lock:
            super().close()
            handles = [handle for group in self._idle_handles.values() for handle in group]
            self._idle_handles.clear()
            self._num_idle_handles = 0
            self._cache.clear()
        for handle in handles:
            handle.close()
        self._index.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_lock", "_cache", "_idle_handles", "_num_idle_handles"):
            del state[name]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def _params(self) -> dict[str, Any]:
        return {
            "paths": self._paths_shown,
            "columns": None if self.columns is None else list(self.columns),
            "cache_row_groups": self._cache_row_groups,
            "num_rows": len(self),
        }
