"""`HuggingFaceStreamSource`: a Hugging Face streaming data set, read by position.

Why a random-access source and not a wrapper around the `IterableDataset`'s iterator:
`datasets` resumes a stream from a state of (shard, example in shard) plus whatever a
shuffle buffer held, and after `.shuffle(buffer_size=...)` that resume loses or repeats
rows (datasets#7901). A stream of local Parquet or JSON Lines files is, underneath, rows
at positions (file, row), and chute reads both formats by position. So this source
finds the files and the format behind the `IterableDataset` and reads row `i` directly:
a pipeline's checkpoint is then chute's (a position, never a buffer), and global
shuffling, sharding, workers and exact (also elastic) resume work as for every chute
source. Whatever the `IterableDataset` would do that chute cannot replay exactly
(operations already applied on the Hugging Face side, other formats, files on the Hub)
is refused with an error that names it and the chute op to use instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from chute_core import CorruptRecordError

from ._base import Source
from ._hf_stream_json import JsonLinesRows
from ._hf_stream_plan import OWNER, plan_stream
from ._parquet import ParquetSource

__all__ = ["HuggingFaceStreamSource"]


class HuggingFaceStreamSource(Source[dict[str, Any]]):
    """The rows of a Hugging Face streaming data set over local Parquet or JSON Lines files.

    `dataset` is what `datasets.load_dataset("parquet" | "json", data_files=...,
    streaming=True)` returns: an `IterableDataset` (with `split=`), or an
    `IterableDatasetDict` (then choose the split here with `split=`). Record `i` is the
    `i`-th row that iterating `dataset` yields, as the same dict: the features' columns
    in their order, values typed by the features (a `ClassLabel` stays an int, an integer
    in a float column becomes a float, a key missing from a JSON line `None`), and
    features that `datasets` decodes (`Image`, `Audio`) decoded by `datasets`.
    `.select_columns([...])` applied on the `IterableDataset` is kept.

    Parquet files are read by `ParquetSource` (row groups by index), JSON Lines files by
    an index of line ends, each block of lines asked for parsed by `pyarrow.json` with
    the features' schema (the parser `datasets` uses). `len()` is known when the source
    is created (Parquet footers are read, JSON Lines files scanned once). Reads from
    several threads are safe; a pickled source reopens its files in the copy. The
    checkpoint of a pipeline over this source is a position: shuffle with chute
    (`chute.MapDataset.source(source).seed(0).shuffle()`), never with a buffer.

    `datasets` is needed to create the source (to read the `IterableDataset`), and in
    the processes that read only when a feature decodes (`Image`, `Audio`): install the
    extra `chute-sources[huggingface]`.

    Refused, with an error naming what to do instead (`InvalidArgumentError`): a data set
    with `.shuffle()`, `.map()`, `.filter()`, `.skip()`, `.take()`, `.repeat()`,
    `.with_format()`, `split_dataset_by_node()` or a mix of data sets applied on the
    Hugging Face side (apply the chute op on the source instead); formats other than
    Parquet and JSON Lines; files that are not local (the Hub, URLs) or compressed;
    the builder options `filters=`, `field=`, `on_bad_files=` and a non-UTF-8 encoding;
    feature types chute cannot give as `datasets` does (`Json`). `set_epoch()` on the
    `IterableDataset` has no effect here: chute reads the files in the order given.

    Args:
        dataset: a `datasets.IterableDataset` or `datasets.IterableDatasetDict`.
        split: the split of an `IterableDatasetDict`; None for an `IterableDataset`.

    Raises:
        TypeError: `dataset` is not an `IterableDataset` or `IterableDatasetDict`.
        InvalidArgumentError: the split does not fit, or the data set is refused (above).
        SourceFileNotFoundError: a data file does not exist.
        SourceFileError: a file is damaged or the Parquet files' schemas differ.

    Example:
        >>> import os, tempfile
        >>> import datasets, pyarrow as pa, pyarrow.parquet as pq
        >>> path = os.path.join(tempfile.mkdtemp(), "pets.parquet")
        >>> pq.write_table(pa.table({"name": ["cat", "dog", "eel"], "legs": [4, 4, 0]}), path)
        >>> stream = datasets.load_dataset(
        ...     "parquet", data_files=path, split="train", streaming=True
        ... )
        >>> source = HuggingFaceStreamSource(stream)
        >>> len(source), source[2], source.format
        (3, {'name': 'eel', 'legs': 0}, 'parquet')
        >>> [source[i] for i in range(len(source))] == list(stream)
        True
    """

    def __init__(self, dataset: Any, split: str | None = None) -> None:
        if split is not None and not isinstance(split, str):
            raise TypeError(f"{OWNER}: split must be a str or None, got {type(split).__name__}.")
        plan = plan_stream(dataset, split)
        self._format = plan.format
        self._split = plan.split
        self._columns = plan.columns
        self._schema = plan.schema
        self._features = plan.features if plan.decode else None
        self._parquet: ParquetSource | None = None
        self._json: JsonLinesRows | None = None
        self._cast = False
        if plan.format == "parquet":
            self._parquet = ParquetSource(list(plan.files), columns=plan.columns)
            stored = self._parquet.schema.remove_metadata()
            self._cast = not stored.equals(self._schema.remove_metadata())
            self._file_records = _parquet_file_records(self._parquet)
        else:
            self._json = JsonLinesRows(plan.files, plan.file_schema, OWNER, plan.columns)
            self._file_records = self._json.file_records
        self._files = plan.files
        self._length = sum(self._file_records)

    @property
    def format(self) -> str:
        """The files' format: "parquet" or "json" (JSON Lines)."""
        return self._format

    @property
    def split(self) -> str | None:
        """The split's name."""
        return self._split

    @property
    def files(self) -> tuple[str, ...]:
        """The absolute paths of the data files, in reading order."""
        return self._files

    @property
    def file_records(self) -> tuple[int, ...]:
        """The number of rows of each of `files`."""
        return self._file_records

    @property
    def columns(self) -> tuple[str, ...] | None:
        """The columns of the rows, in order."""
        return self._columns

    @property
    def schema(self) -> Any:
        """The `pyarrow.Schema` of the rows, as the data set's features give it."""
        return self._schema

    def __len__(self) -> int:
        return self._length

    def _read(self, index: int) -> dict[str, Any]:
        return self._read_many([index])[0]

    def _read_many(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        if self._json is not None:
            rows = self._json.read(indices)
        else:
            assert self._parquet is not None
            rows = self._parquet.__getitems__(indices)
            if self._cast:
                rows = self._cast_rows(rows)
        if self._features is not None:
            rows = [self._features.decode_example(row) for row in rows]
        return rows

    def _cast_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Parquet rows cast to the features' types, as `datasets` casts the tables."""
        assert self._parquet is not None
        try:
            table = pa.Table.from_pylist(rows, schema=self._parquet.schema)
            return table.cast(self._schema).to_pylist()  # type: ignore[no-any-return]
        except (pa.ArrowException, ValueError, TypeError) as error:
            raise CorruptRecordError(
                f"{OWNER}: rows of {self._files} do not cast to the data set's features "
                f"({error}); pass features= to load_dataset that fit the files."
            ) from error

    def close(self) -> None:
        """Closes the files; reads afterwards raise `SourceClosedError`."""
        super().close()
        if self._parquet is not None:
            self._parquet.close()
        if self._json is not None:
            self._json.close()

    def _params(self) -> dict[str, Any]:
        return {
            "format": self._format,
            "files": list(self._files),
            "split": self._split,
            "columns": None if self._columns is None else list(self._columns),
            "num_rows": self._length,
        }


def _parquet_file_records(source: ParquetSource) -> tuple[int, ...]:
    """The rows of each file of `source`, from its index of row groups (this package's)."""
    return tuple(int(sum(rows)) for rows in source._index.row_group_rows)
