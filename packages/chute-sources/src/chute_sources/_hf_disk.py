"""`HuggingFaceDiskSource`: random access to a data set saved by `datasets`' `save_to_disk`.

The Arrow files are memory-mapped and their record batches stay views of the mapping:
nothing is converted or copied when the source opens. An index of the batches' first
rows finds a record's batch by binary search, and only the rows asked for become Python
objects.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from chute_core import CorruptRecordError, SourceFileError

from ._base import Source
from ._hf_disk_layout import OWNER, ArrowFile, find_saved_dataset, open_arrow_file
from ._parquet_index import arrow_indices, check_columns, table_rows
from ._record_errors import located

__all__ = ["HuggingFaceDiskSource"]


class _Opened(NamedTuple):
    """The mapped files, every non-empty batch in reading order, and where each starts."""

    files: list[ArrowFile]
    batches: list[Any]  # pyarrow.RecordBatch, projected on the columns read
    starts: npt.NDArray[np.int64]  # the global index of each batch's first row
    batch_file: npt.NDArray[np.int64]  # the file of each batch


class HuggingFaceDiskSource(Source[dict[str, Any]]):
    """A data set saved by Hugging Face `datasets`' `save_to_disk`, read in place.

    Record `i` is row `i` of the data files in the order `state.json` lists them, as a
    dict `{column: value}` exactly as `pyarrow.Table.to_pylist()` gives it (as in
    `ParquetSource`): strings `str`, lists (also fixed-size ones) lists, structs dicts,
    nulls `None`. For plain features (`Value`, `List`, `Sequence`, `ClassLabel`) this
    equals `datasets.load_from_disk(path)[i]`. Features that `datasets` decodes when it
    reads (`Image`, `Audio`) come as stored, e.g. `{"bytes": ..., "path": ...}`, and the
    saved output format (`set_format`) is not applied. `datasets` is not needed.

    Opening the source memory-maps the Arrow files (IPC stream format) and reads their
    batch headers into an index of the first row of every record batch; the batches stay
    zero-copy views of the mapping. A read finds its batch by binary search and converts
    only the rows asked for; batched reads (`__getitems__`) convert each batch's rows in
    one call. Reads from several threads at once are safe.

    A `DatasetDict` folder holds one folder per split: choose one with `split=`. A data
    set saved with an indices mapping (what old versions of `datasets` wrote after
    `select` or `shuffle`) is refused with an error saying to call `flatten_indices()`.

    Pickling keeps the index, not the mapping: a copy (e.g. in a worker process) maps the
    files again on its first read, and raises `SourceFileError` if their batches changed.
    `close()` unmaps the files.

    Args:
        path: the folder `Dataset.save_to_disk` (or `DatasetDict.save_to_disk`) wrote.
        split: the split to read from a `DatasetDict` folder; None for a `Dataset` folder.
        columns: the columns to read (e.g. `["text"]` for language-model training), or
            None for all of them.

    Raises:
        SourceFileNotFoundError: no folder at `path`, or it lacks `state.json` or a data
            file that `state.json` lists.
        SourceFileError: `path` is a file, a file of the folder is damaged, the files'
            schemas differ, the data set keeps an indices mapping, or a column in
            `columns` does not exist.
        InvalidArgumentError: `split` is missing for a `DatasetDict` folder, names no
            split of it, or is given for a `Dataset` folder.

    Example:
        >>> import json, os, tempfile
        >>> import pyarrow as pa
        >>> folder = tempfile.mkdtemp()  # What Dataset.save_to_disk(folder) writes:
        >>> table = pa.table({"text": ["cat", "dog", "eel"], "label": [0, 0, 1]})
        >>> with pa.OSFile(os.path.join(folder, "data-00000-of-00001.arrow"), "wb") as sink:
        ...     with pa.ipc.new_stream(sink, table.schema) as writer:
        ...         writer.write_table(table, max_chunksize=2)
        >>> state = {"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}
        >>> with open(os.path.join(folder, "state.json"), "w") as file:
        ...     json.dump(state, file)
        >>> with HuggingFaceDiskSource(folder) as source:
        ...     print(len(source), source[-1])
        ...     print(source.__getitems__([1, 0]))
        3 {'text': 'eel', 'label': 1}
        [{'text': 'dog', 'label': 0}, {'text': 'cat', 'label': 0}]
        >>> HuggingFaceDiskSource(folder, columns=["text"])[0]
        {'text': 'cat'}
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        split: str | None = None,
        columns: Sequence[str] | None = None,
    ) -> None:
        if not isinstance(path, str | os.PathLike) or not isinstance(os.fspath(path), str):
            raise TypeError(
                f"{OWNER}: path must be a str or os.PathLike of a save_to_disk folder, "
                f"got {type(path).__name__} {path!r}."
            )
        if split is not None and not isinstance(split, str):
            raise TypeError(f"{OWNER}: split must be a str or None, got {type(split).__name__}.")
        self._path = os.fspath(path)
        self._split = split
        self._columns = check_columns(columns, OWNER)
        saved = find_saved_dataset(self._path, split)
        self._files = saved.files
        self._fingerprint = saved.fingerprint
        self._lock = threading.Lock()
        files = self._open_files()
        try:
            self._schema: Any = self._check_schemas(files, saved.features)
        except BaseException:
            _close_files(files)
            raise
        self._batch_rows = _batch_rows(files)
        self._length = sum(sum(rows) for rows in self._batch_rows)
        self._opened: _Opened | None = self._index(files)

    @property
    def path(self) -> str:
        """The folder, as given."""
        return self._path

    @property
    def split(self) -> str | None:
        """The split read from a `DatasetDict` folder, or None."""
        return self._split

    @property
    def files(self) -> tuple[str, ...]:
        """The absolute paths of the Arrow files, in reading order."""
        return self._files

    @property
    def columns(self) -> tuple[str, ...] | None:
        """The columns read, or None for all of them."""
        return self._columns

    @property
    def schema(self) -> Any:
        """The `pyarrow.Schema` of the records (only the columns read); None without files."""
        return self._schema

    @property
    def fingerprint(self) -> str | None:
        """`datasets`' fingerprint of the saved data (`_fingerprint` in `state.json`)."""
        return self._fingerprint

    @property
    def file_records(self) -> tuple[int, ...]:
        """The number of records of each file, in reading order."""
        return tuple(sum(rows) for rows in self._batch_rows)

    def __len__(self) -> int:
        return self._length

    def _open_files(self) -> list[ArrowFile]:
        files: list[ArrowFile] = []
        try:
            for path in self._files:
                files.append(open_arrow_file(path))
        except BaseException:
            _close_files(files)
            raise
        return files

    def _index(self, files: list[ArrowFile]) -> _Opened:
        """The batches of `files` (projected on the columns read) and where each starts."""
        columns = None if self._columns is None else list(self._columns)
        batches = [
            batch if columns is None else batch.select(columns)
            for file in files
            for batch in file.batches
        ]
        sizes = np.asarray([batch.num_rows for batch in batches], np.int64)
        starts = np.concatenate([np.zeros(1, np.int64), np.cumsum(sizes, dtype=np.int64)])
        counts = [len(file.batches) for file in files]
        batch_file = np.repeat(np.arange(len(files), dtype=np.int64), counts)
        return _Opened(files, batches, starts[:-1], batch_file)

    def _check_schemas(self, files: list[ArrowFile], features: tuple[str, ...] | None) -> Any:
        """The schema of the columns read; checks all files share it and has every column."""
        if not files:  # An empty data set: check the columns against its features.
            missing = [c for c in self._columns or () if features is not None and c not in features]
            if missing:
                raise SourceFileError(
                    f"{OWNER}: column {missing[0]!r} is not in {self._path!r}; its columns are "
                    f"{list(features or ())}. Fix `columns=` (names are case-sensitive)."
                )
            return None
        first = files[0].schema
        for path, file in zip(self._files, files, strict=True):
            if not file.schema.remove_metadata().equals(first.remove_metadata()):
                raise SourceFileError(
                    f"{OWNER}: {path} does not have the schema of {self._files[0]} "
                    f"({file.schema.names} against {first.names}); the folder is damaged, "
                    "save the data set again."
                )
        if self._columns is None:
            return first
        for name in self._columns:
            if name not in first.names:
                raise SourceFileError(
                    f"{OWNER}: column {name!r} is not in {self._path!r}; its columns are "
                    f"{first.names}. Fix `columns=` (names are case-sensitive)."
                )
        return pa.schema([first.field(name) for name in self._columns])

    def _mapped(self) -> _Opened:
        """The mapped files and the batch index; after unpickling, made on first use."""
        opened = self._opened
        if opened is not None:
            return opened
        with self._lock:
            self._check_open()
            if self._opened is None:
                files = self._open_files()
                rows = _batch_rows(files)
                if rows != self._batch_rows:
                    _close_files(files)
                    raise SourceFileError(
                        f"{OWNER}: the files of {self._path!r} changed since the source was "
                        f"created (their record batches now hold {sum(map(sum, rows))} rows, "
                        f"before {self._length}); create the source again."
                    )
                self._opened = self._index(files)
            return self._opened

    def _read(self, index: int) -> dict[str, Any]:
        return self._read_array(np.asarray([index], np.int64))[0]

    def _read_many(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        return self._read_array(np.asarray(indices, np.int64))

    def _read_array(self, indices: npt.NDArray[np.int64]) -> list[dict[str, Any]]:
        if indices.size == 0:
            return []
        opened = self._mapped()
        batches = np.searchsorted(opened.starts, indices, side="right") - 1
        rows = indices - opened.starts[batches]
        if indices.size == 1:
            groups = [np.zeros(1, np.int64)]
        else:
            order = np.argsort(batches, kind="stable")
            groups = np.split(order, np.flatnonzero(np.diff(batches[order])) + 1)
        records: list[Any] = [None] * indices.size
        for positions in groups:
            number = int(batches[positions[0]])
            batch, chosen = opened.batches[number], rows[positions]
            part = (
                batch.slice(int(chosen[0]), 1)
                if chosen.size == 1
                else batch.take(arrow_indices(chosen))
            )
            try:
                taken = table_rows(part, f"{OWNER}: {self._files[opened.batch_file[number]]}")
            except CorruptRecordError as error:
                raise self._located(error, opened, number, chosen, indices[positions]) from error
            for position, record in zip(positions.tolist(), taken, strict=True):
                records[position] = record
        return records

    def _located(
        self,
        error: CorruptRecordError,
        opened: _Opened,
        number: int,
        rows: npt.NDArray[np.int64],
        keys: npt.NDArray[np.int64],
    ) -> Exception:
        """`error` naming the first of `rows` (of batch `number`) that does not convert."""
        file = int(opened.batch_file[number])
        first_batch = int(np.searchsorted(opened.batch_file, file, side="left"))
        before = int(opened.starts[number] - opened.starts[first_batch])  # Rows of the file.
        for row, key in zip(rows.tolist(), keys.tolist(), strict=True):
            try:
                opened.batches[number].slice(row, 1).to_pylist()
            except UnicodeDecodeError:
                return located(error, "Arrow", self._files[file], before + row, key)
        return error  # pragma: no cover - the rows were just seen to fail together

    def close(self) -> None:
        """Unmaps the files; reads afterwards raise `SourceClosedError`."""
        with self._lock:
            opened, self._opened = self._opened, None
            super().close()
        if opened is not None:
            _close_files(opened.files)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"], state["_opened"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._opened = None

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"path": self._path}
        if self._split is not None:
            params["split"] = self._split
        params["columns"] = None if self._columns is None else list(self._columns)
        params["num_rows"] = self._length
        params["fingerprint"] = self._fingerprint
        return params


def _batch_rows(files: list[ArrowFile]) -> tuple[tuple[int, ...], ...]:
    """The number of rows of each record batch of each file."""
    return tuple(tuple(batch.num_rows for batch in file.batches) for file in files)


def _close_files(files: list[ArrowFile]) -> None:
    for file in files:
        file.mapped.close()
