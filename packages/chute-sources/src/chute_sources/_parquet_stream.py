"""`ParquetStream`: the rows of Parquet files, read in order, as a checkpointable iterator."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Self

from chute_core import InvalidStateError, IteratorState, SourceClosedError
from chute_core.internal import check_int

from ._parquet_index import ParquetIndex, ParquetPaths, ParquetRecord, table_rows
from ._paths import display_paths
from ._remote._options import StorageOptions

__all__ = ["ParquetStream"]

_READ_AHEAD = 2
"""Row groups of files in buckets fetched ahead of the one being read."""

_STATE_KEYS = ("file", "row_group", "row")


class ParquetStream:
    """The rows of one or many Parquet files, in order, as a checkpointable iterator.

    Yields the same records as `ParquetSource` (dicts as `pyarrow.Table.to_pylist()`
    gives them) in file, row group, row order. It decodes one row group at a time and
    converts at most `batch_rows` rows of it to Python objects at once, so its memory
    is bounded by one decoded row group, whatever the size of the files.

    The `origin` of a record is `(n,)`, `n` its number in the stream from 0 (over all
    files), as a `MapDataset` read in order numbers its elements: an interleave of such
    streams names each record by stream and number, so a window shuffle or a packer
    after it reshards to another number of hosts (`origins_are_positions`).

    The state is the position of the next record, as JSON:
    `{"file": i, "row_group": j, "row": k}` (the end is `{"file": len(files),
    "row_group": 0, "row": 0}`). `set_state` seeks straight to that row group without
    reading the earlier ones. A stream is an iterator, not an iterable: `iter(stream)`
    returns the stream itself, and a finished stream stays finished until `set_state`
    moves it back. Not safe to share between threads.

    Args:
        paths: a file, a glob pattern (`data/*.parquet`, `data/**/*.parquet`), or a
            list of files and patterns.
        columns: the columns to read (top-level names), or None for all of them.
        batch_rows: how many rows to convert to Python objects at once.
        storage_options: how to reach `s3://` / `gs://` files (default: from the
            environment). Files in buckets are read one row group per request, the
            next row groups fetched ahead while the current one is read.

    Raises:
        SourceFileNotFoundError: a path or a pattern names no file.
        SourceFileError: a file is not a readable Parquet file, lacks a requested
            column, or has another schema than the first file.

    Example:
        >>> import json, os, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> path = os.path.join(tempfile.mkdtemp(), "numbers.parquet")
        >>> pq.write_table(pa.table({"x": [10, 11, 12, 13]}), path, row_group_size=2)
        >>> stream = ParquetStream(path)
        >>> next(stream), next(stream), next(stream)
        ({'x': 10}, {'x': 11}, {'x': 12})
        >>> checkpoint = json.dumps(stream.get_state())
        >>> checkpoint
        '{"file": 0, "row_group": 1, "row": 1}'
        >>> with ParquetStream(path) as resumed:
        ...     resumed.set_state(json.loads(checkpoint))
        ...     list(resumed), resumed.origin
        ([{'x': 13}], None)
        >>> stream.origin  # Record 2 of the stream (row group 1, row 0).
        (2,)
    """

    origins_are_positions: ClassVar[bool] = True
    """Its records' origins are their numbers in the stream (see the class docs)."""

    def __init__(
        self,
        paths: ParquetPaths,
        columns: Sequence[str] | None = None,
        batch_rows: int = 1024,
        storage_options: StorageOptions | None = None,
    ) -> None:
        batch_rows = check_int(batch_rows, "batch_rows", "ParquetStream", minimum=1)
        self._index = ParquetIndex(paths, columns, "ParquetStream", storage_options)
        self._paths_shown = display_paths(paths)
        self._batch_rows = batch_rows
        self._closed = False
        # The position of `self._buffer[0]`; the next record is `_buffer_pos` rows later.
        self._file = 0
        self._row_group = 0
        self._row = 0
        self._init_runtime()

    def _init_runtime(self) -> None:
        """Creates what is not pickled: the open file, the decoded row group, the buffer."""
        self._buffer: list[ParquetRecord] = []
        self._buffer_pos = 0
        self._first = 0  # The number in the stream of `self._buffer[0]`.
        self._handle: Any = None
        self._handle_file = -1
        self._table: Any = None
        self._table_key = (-1, -1)

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

    @property
    def num_rows(self) -> int:
        """The number of records of the whole stream (not of what is left)."""
        return self._index.num_rows

    @property
    def origin(self) -> tuple[int, ...] | None:
        """`(n,)`: the number of the record last returned, from 0; None before any."""
        if not self._buffer_pos:
            return None
        return (self._first + self._buffer_pos - 1,)

    def __iter__(self) -> Self:
        """Returns the stream itself (it is an iterator)."""
        return self

    def __next__(self) -> ParquetRecord:
        """Returns the next record; raises `StopIteration` at the end of the last file."""
        position = self._buffer_pos
        if position < len(self._buffer):
            self._buffer_pos = position + 1
            return self._buffer[position]
        return self._refill()

    def _refill(self) -> ParquetRecord:
        if self._closed:
            raise SourceClosedError(f"{self!r} was closed; create a new stream.")
        self._file, self._row_group, self._row = self._index.advance(
            self._file, self._row_group, self._row + self._buffer_pos
        )
        self._buffer, self._buffer_pos = [], 0
        if self._file == len(self._index.files):
            self._release()
            raise StopIteration
        table = self._decoded(self._file, self._row_group)
        where = f"ParquetStream: {self._index.files[self._file]}, row group {self._row_group}"
        self._buffer = table_rows(table.slice(self._row, self._batch_rows), where)
        self._first = self._index.first_row(self._file, self._row_group) + self._row
        self._buffer_pos = 1
        return self._buffer[0]

    def _decoded(self, file: int, row_group: int) -> Any:
        """Returns row group `row_group` of file `file`, decoding it unless it is loaded."""
        if self._table_key == (file, row_group):
            return self._table
        self._table, self._table_key = None, (-1, -1)  # free it before decoding the next
        if self._handle_file != file:
            self._close_handle()
            self._handle = self._index.open_file(file)
            self._handle_file = file
        self._read_ahead(file, row_group)
        self._table = self._index.read_row_group(self._handle, file, row_group, use_threads=True)
        self._table_key = (file, row_group)
        return self._table

    def _read_ahead(self, file: int, row_group: int) -> None:
        """Asks for the next row groups of files in buckets to be fetched meanwhile."""
        if self._index.remote is None:
            return
        for _ in range(_READ_AHEAD):
            file, row_group, _row = self._index.advance(file, row_group + 1, 0)
            if file == len(self._index.files) or not self._index.prefetch(file, row_group):
                return

    def get_state(self) -> IteratorState:
        """Returns the position of the next record as `{"file", "row_group", "row"}`."""
        file, row_group, row = self._index.advance(
            self._file, self._row_group, self._row + self._buffer_pos
        )
        return {"file": file, "row_group": row_group, "row": row}

    def set_state(self, state: IteratorState, /) -> None:
        """Moves to the position `state` (from `get_state`) names.

        Raises:
            InvalidStateError: `state` is not such a dict, or names a position that
                these files do not have.
        """
        if self._closed:
            raise SourceClosedError(f"{self!r} was closed; create a new stream.")
        self._file, self._row_group, self._row = self._check_state(state)
        self._buffer, self._buffer_pos = [], 0

    def _check_state(self, state: object) -> tuple[int, int, int]:
        """Returns (file, row_group, row) from `state`, or raises `InvalidStateError`."""
        example = '{"file": 0, "row_group": 0, "row": 0}'
        if not isinstance(state, dict):
            raise InvalidStateError(
                f"{self!r}: a state is a dict like {example} (from get_state()), got "
                f"{type(state).__name__} {state!r}."
            )
        missing = [key for key in _STATE_KEYS if key not in state]
        unknown = sorted(str(key) for key in state if key not in _STATE_KEYS)
        if missing or unknown:
            raise InvalidStateError(
                f"{self!r}: a state has exactly the keys {list(_STATE_KEYS)}; "
                f"missing {missing}, unknown {unknown}. Was it saved by another iterator?"
            )
        for key in _STATE_KEYS:
            value = state[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidStateError(
                    f"{self!r}: state[{key!r}] must be an int >= 0, got {value!r}."
                )
        file, row_group, row = (int(state[key]) for key in _STATE_KEYS)
        num_files = len(self._index.files)
        if file > num_files:
            raise InvalidStateError(
                f"{self!r}: state['file'] = {file} is out of range: this stream reads "
                f"{num_files} files (valid: 0..{num_files}, {num_files} meaning the end). "
                f"Was the state saved with other files?"
            )
        sizes = self._index.row_group_rows[file] if file < num_files else ()
        if row_group > len(sizes):
            raise InvalidStateError(
                f"{self!r}: state['row_group'] = {row_group} is out of range: file {file} "
                f"has {len(sizes)} row groups (valid: 0..{len(sizes)})."
            )
        limit = sizes[row_group] if row_group < len(sizes) else 0
        if row > limit:
            raise InvalidStateError(
                f"{self!r}: state['row'] = {row} is out of range: row group {row_group} "
                f"of file {file} has {limit} rows (valid: 0..{limit})."
            )
        return file, row_group, row

    def _close_handle(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self._handle, self._handle_file = None, -1

    def _release(self) -> None:
        """Frees the decoded row group and closes the open file."""
        self._table, self._table_key = None, (-1, -1)
        self._close_handle()

    def close(self) -> None:
        """Closes the open file and frees memory; `next()` afterwards raises `SourceClosedError`."""
        self._closed = True
        self._row += self._buffer_pos
        self._buffer, self._buffer_pos = [], 0
        self._release()
        self._index.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        state = {
            key: value
            for key, value in self.__dict__.items()
            if key
            not in ("_buffer", "_buffer_pos", "_handle", "_handle_file", "_table", "_table_key")
        }
        state["_row"] = self._row + self._buffer_pos
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def __repr__(self) -> str:
        columns = None if self.columns is None else list(self.columns)
        return (
            f"ParquetStream(paths={self._paths_shown!r}, columns={columns!r}, "
            f"batch_rows={self._batch_rows}, num_rows={self.num_rows})"
        )
