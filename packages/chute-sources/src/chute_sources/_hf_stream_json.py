"""The lines of local JSON Lines files by index, parsed as `datasets` parses them.

`datasets`' JSON builder parses blocks of lines with `pyarrow.json` and casts the table
to the data set's features. Here the lines asked for are joined into one block and
parsed by `pyarrow.json` with the features' schema as the explicit schema: the same
parser and the same types (an integer in a float column becomes a float, a missing key
`None`, a key that is not a feature an error), for any set of lines in any order.

Opening scans each file once for line ends (the scan `JsonLinesSource` uses: blank
lines do not count); a pickled copy keeps the line counts and file stamps, not the
index, and scans again on its first read.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.json as paj

from chute_core import CorruptRecordError, InvalidArgumentError, SourceFileError

from ._json_lines import _line_number, _Lines, _scan, _unmap
from ._parquet_index import table_rows

__all__ = ["JsonLinesRows"]

_BOM = b"\xef\xbb\xbf"


class JsonLinesRows:
    r"""The non-blank lines of `files` (in order) as rows typed by `schema`.

    A line may hold only the fields of `schema`; the rows keep only `columns` (default:
    all of them), in that order.

    Example:
        >>> import os, tempfile
        >>> import pyarrow as pa
        >>> path = os.path.join(tempfile.mkdtemp(), "a.jsonl")
        >>> with open(path, "w") as file:
        ...     _ = file.write('{"x": 1}\n\n{"x": 2.5, "y": "b"}\n')
        >>> schema = pa.schema([("x", pa.float64()), ("y", pa.string())])
        >>> rows = JsonLinesRows((path,), schema, "demo")
        >>> rows.file_records, rows.read([1, 0])
        ((2,), [{'x': 2.5, 'y': 'b'}, {'x': 1.0, 'y': None}])
    """

    def __init__(
        self,
        files: tuple[str, ...],
        schema: Any,
        owner: str,
        columns: tuple[str, ...] | None = None,
    ) -> None:
        self._files = files
        self._schema = schema
        self._owner = owner
        self._columns = None if columns is None or columns == tuple(schema.names) else columns
        self._lock = threading.Lock()
        self._lines: list[_Lines | None] = [self._scan(number) for number in range(len(files))]
        counts = [len(lines.starts) for lines in self._lines if lines is not None]
        self._offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._stamps = tuple(lines.stamp for lines in self._lines if lines is not None)

    @property
    def file_records(self) -> tuple[int, ...]:
        """The number of rows of each file."""
        return tuple(int(count) for count in np.diff(self._offsets))

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def _scan(self, number: int) -> _Lines:
        path = self._files[number]
        lines = _scan(path, path)
        if len(lines.starts) and lines.data[:3] == _BOM:  # datasets drops a leading BOM.
            lines.starts[0] += len(_BOM)
        if len(lines.starts):
            head = bytes(lines.data[int(lines.starts[0]) : int(lines.ends[0])][:64]).lstrip()
            if head.startswith(b"["):
                _unmap(lines.data)
                raise InvalidArgumentError(
                    f"{self._owner}: {path!r} holds a JSON array, not JSON Lines (one object "
                    "a line); chute reads JSON Lines files. Write one object a line."
                )
        return lines

    def _mapped(self, number: int) -> _Lines:
        lines = self._lines[number]
        if lines is not None:
            return lines
        with self._lock:
            lines = self._lines[number]
            if lines is None:
                lines = self._scan(number)
                count = int(self._offsets[number + 1] - self._offsets[number])
                if lines.stamp != self._stamps[number] or len(lines.starts) != count:
                    _unmap(lines.data)
                    raise SourceFileError(
                        f"{self._owner}: {self._files[number]!r} changed after the source "
                        f"was created (it had {self._stamps[number][0]} bytes and {count} "
                        "rows); create the source again."
                    )
                self._lines[number] = lines
        return lines

    def read(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """The rows at in-range `indices`, in that order."""
        keys = np.asarray(indices, dtype=np.int64)
        if keys.size == 0:
            return []
        files = np.searchsorted(self._offsets, keys, side="right") - 1
        rows = keys - self._offsets[files]
        spans = []
        for file, row in zip(files.tolist(), rows.tolist(), strict=True):
            lines = self._mapped(file)
            spans.append(lines.data[int(lines.starts[row]) : int(lines.ends[row])])
        try:
            table = self._parse(b"\n".join(spans))
        except pa.ArrowException as error:
            for file, row, span in zip(files.tolist(), rows.tolist(), spans, strict=True):
                try:
                    self._parse(span)
                except pa.ArrowException as single:
                    raise self._corrupt(single, file, row) from single
            raise CorruptRecordError(f"{self._owner}: {error}") from error  # pragma: no cover
        if self._columns is not None:
            table = table.select(list(self._columns))
        return table_rows(table, self._owner)

    def _parse(self, block: bytes) -> Any:
        return paj.read_json(
            io.BytesIO(block),
            read_options=paj.ReadOptions(use_threads=False, block_size=max(len(block), 1 << 16)),
            parse_options=paj.ParseOptions(
                explicit_schema=self._schema, unexpected_field_behavior="error"
            ),
        )

    def _corrupt(self, error: Exception, file: int, row: int) -> CorruptRecordError:
        lines = self._mapped(file)
        line = _line_number(lines.data, int(lines.starts[row]))
        return CorruptRecordError(
            f"{self._owner}: {self._files[file]!r} line {line} does not parse as a row of "
            f"the data set's features ({error}); columns and types: "
            f"{dict(zip(self._schema.names, map(str, self._schema.types), strict=True))}."
        )

    def close(self) -> None:
        """Unmaps the files."""
        with self._lock:
            lines, self._lines = self._lines, [None] * len(self._files)
        for found in lines:
            if found is not None:
                _unmap(found.data)

    def __getstate__(self) -> dict[str, Any]:
        names = ("_files", "_schema", "_owner", "_columns", "_offsets", "_stamps")
        return {name: getattr(self, name) for name in names}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._lines = [None] * len(self._files)
