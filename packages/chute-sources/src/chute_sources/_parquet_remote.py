"""Parquet files in buckets: footers read once, row groups by one ranged read each.

A row group's column chunks (of the columns read) lie in one span of the file; that
span is fetched in one request (or taken from the prefetcher, which fetched it ahead
because the sampler said it comes next, or kept it from an earlier read), and pyarrow
decodes it from memory through a `RangeFile` that also holds the footer's metadata, so
a row group costs at most one request, whatever the number of columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ._remote._client import ObjectInfo, client_for
from ._remote._options import StorageOptions
from ._remote._prefetcher import RangePrefetcher
from ._remote._range_file import RangeFile

__all__ = ["RemoteParquetFiles"]


class RemoteParquetFiles:
    """The files of a Parquet index that live in buckets, by file number.

    Args:
        infos: the objects, by the index's file number.
        options: how to reach them.
    """

    def __init__(self, infos: dict[int, ObjectInfo], options: StorageOptions) -> None:
        self.infos = infos
        self.options = options
        self.metadata: dict[int, Any] = {}
        self._prefetcher: RangePrefetcher | None = None

    def __chute_identity__(self) -> list[ObjectInfo]:
        """The objects (URL, size, version) by file number: what identifies the data."""
        return [self.infos[file] for file in sorted(self.infos)]

    def __getstate__(self) -> dict[str, Any]:
        return {"infos": self.infos, "options": self.options, "metadata": self.metadata}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._prefetcher = None

    @property
    def prefetcher(self) -> RangePrefetcher:
        """The ranges fetched ahead (made on first use, in each process)."""
        if self._prefetcher is None:
            self._prefetcher = RangePrefetcher(self.options)
        return self._prefetcher

    def open(self, file: int) -> Any:
        """`file` as a `pyarrow.parquet.ParquetFile` (its footer read once, then reused)."""
        source = pa.PythonFile(RangeFile(self.infos[file], client_for(self.options)), mode="r")
        handle = pq.ParquetFile(source, metadata=self.metadata.get(file))
        self.metadata.setdefault(file, handle.metadata)
        return handle

    def load_footers(self) -> None:
        """Reads every file's footer, many at once (one request each, usually)."""
        missing = [file for file in self.infos if file not in self.metadata]
        if len(missing) <= 1:
            return
        with ThreadPoolExecutor(min(16, len(missing))) as pool:
            for file, handle in zip(missing, pool.map(self.open, missing), strict=True):
                self.metadata[file] = handle.metadata

    def span(self, file: int, row_group: int, columns: Sequence[str] | None) -> tuple[int, int]:
        """The bytes `[start, end)` holding the column chunks of a row group."""
        group = self.metadata[file].row_group(row_group)
        starts, ends = [], []
        for j in range(group.num_columns):
            column = group.column(j)
            if columns is not None and column.path_in_schema.split(".")[0] not in columns:
                continue
            start = column.data_page_offset
            if column.has_dictionary_page and 0 < column.dictionary_page_offset < start:
                start = column.dictionary_page_offset
            starts.append(start)
            ends.append(start + column.total_compressed_size)
        if not starts:
            return 0, 0
        return min(starts), max(ends)

    def read_row_group(
        self, file: int, row_group: int, columns: Sequence[str] | None, use_threads: bool
    ) -> Any:
        """Decodes a row group from one ranged read of its span."""
        info = self.infos[file]
        client = client_for(self.options)
        start, end = self.span(file, row_group, columns)
        data = self.prefetcher.take(info, start, end) if end > start else None
        if data is None and end > start:
            data = client.read(info, start, end)
            self.prefetcher.keep(info, start, end, data)
        file_view = RangeFile(info, client)
        if data is not None:
            file_view.add(start, data)
        handle = pq.ParquetFile(pa.PythonFile(file_view, mode="r"), metadata=self.metadata[file])
        return handle.read_row_group(
            row_group, columns=None if columns is None else list(columns), use_threads=use_threads
        )

    def prefetch(self, file: int, row_group: int, columns: Sequence[str] | None) -> bool:
        """Starts fetching a row group's span unless held; False when the budget is spent."""
        start, end = self.span(file, row_group, columns)
        if end <= start:
            return True
        return self.prefetcher.want(self.infos[file], start, end)

    def close(self) -> None:
        """Drops what was fetched ahead."""
        if self._prefetcher is not None:
            self._prefetcher.close()
