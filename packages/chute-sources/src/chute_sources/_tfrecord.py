"""`TFRecordSource`: the records of TFRecord files, by index, without TensorFlow.

Creating the source indexes each file once: it walks the 12-byte frame headers of the
mapped file (checking each length's CRC) and keeps where every frame starts, one int64
a record. The index travels with a pickled source, so worker processes never walk a
file again; they map the file (or its copy in the shard cache) on their first read. A
read slices the mapping and checks the data's CRC. See `_tfrecord_files` for files in
buckets and GZIP files, and `_tfrecord_format` for the framing.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from chute_core import CorruptRecordError
from chute_core.internal import check_bool

from ._base import Source
from ._paths import PathLike, display_paths
from ._record_errors import located
from ._remote._options import StorageOptions
from ._tfrecord_example import parse_example
from ._tfrecord_files import Compression, TFRecordFiles
from ._tfrecord_format import (
    FOOTER_BYTES,
    HEADER_BYTES,
    check_data,
    check_records,
    index_frames,
)

__all__ = ["Parse", "TFRecordSource"]

Parse = Literal["example"] | Callable[[bytes], Any] | None
"""How records are decoded: see `TFRecordSource`."""

_OWNER = "TFRecordSource"


class TFRecordSource(Source[Any]):
    """The records of one or many TFRecord files, as a random-access source.

    Record `i` is the `i`-th record of the files taken one after the other, in the
    order given (a glob's or a folder's files sorted by name). Creating the source
    reads every record's 12-byte header once, to find where the records are (8 bytes
    a record are kept, and sent with a pickled source: worker processes do not read
    the headers again); `len()` and any read order are then as cheap as with
    ArrayRecord, so global shuffling, sharding, worker processes and exact resume work
    the same. Reads are thread-safe.

    Each read checks the record's CRC32C (`verify=True`); a wrong one raises
    `CorruptRecordError` naming the file, the record and its byte offset. A wrong CRC
    of a length field, or a file that ends inside a record, raises `SourceFileError`
    when the source is created.

    GZIP files (TensorFlow's `compression_type="GZIP"`) are decompressed into the
    per-machine shard cache, since a compressed file cannot be read at an offset:
    creating the source decompresses each one twice (once to measure it, once into the
    cache), and the copy takes its uncompressed size on disk until the cache evicts
    it (`StorageOptions.cache_bytes`); other processes of the machine read that copy.
    Files in buckets (`s3://`, `gs://`: objects, glob patterns, folders) are downloaded
    whole into the shard cache when the source is created, at the version listed.

    Args:
        paths: a file, a glob pattern, a folder (its files whose names contain
            `.tfrecord`, `.tfrecords` or `.tfrec`) or a URL, or a sequence of them.
        parse: `None` (default) gives each record's bytes; `"example"` decodes
            `tf.train.Example` records with `parse_example` (no TensorFlow or protobuf
            needed); a callable is applied to the bytes.
        compression: `"auto"` (default): GZIP for names ending in `.gz`; `"GZIP"`:
            every file; `None`: none.
        verify: check the CRCs (default). `False` skips them, for speed on files
            known to be sound.
        storage_options: how to reach buckets, and the shard cache (default: from the
            environment; see `StorageOptions`).

    Raises:
        SourceFileNotFoundError: no file matches an entry of `paths`.
        SourceFileError: a file is truncated, its framing is corrupt, or a GZIP file
            does not decompress.

    Example:
        >>> import os, tempfile
        >>> from chute_sources import encode_example, write_tfrecord
        >>> path = os.path.join(tempfile.mkdtemp(), "pets.tfrecord")
        >>> write_tfrecord(path, [b"cat", b"dog", b"eel"])
        3
        >>> source = TFRecordSource(path)
        >>> len(source), source[-1], source.__getitems__([1, 0])
        (3, b'eel', [b'dog', b'cat'])
        >>> _ = write_tfrecord(path, [encode_example({"name": "cat", "legs": 4})])
        >>> TFRecordSource(path, parse="example")[0]
        {'name': [b'cat'], 'legs': array([4])}
    """

    def __init__(
        self,
        paths: PathLike | Sequence[PathLike],
        *,
        parse: Parse = None,
        compression: Compression = "auto",
        verify: bool = True,
        storage_options: StorageOptions | None = None,
    ) -> None:
        if not (parse is None or parse == "example" or callable(parse)):
            raise ValueError(
                f"{_OWNER}: parse must be None (the records' bytes), 'example' or a "
                f"callable, got {parse!r}."
            )
        if compression not in ("auto", "GZIP", None):
            raise ValueError(
                f"{_OWNER}: compression must be 'auto' (GZIP for *.gz), 'GZIP' or None, got "
                f"{compression!r}."
            )
        self._verify = check_bool(verify, "verify", _OWNER)
        self._paths = paths
        self._parse = parse
        self._compression = compression
        options = storage_options if storage_options is not None else StorageOptions()
        self._files = TFRecordFiles.expand(paths, compression, options)
        self._lock = threading.Lock()
        self._maps: list[Any] = [None] * len(self._files.items)
        self._index = [self._index_file(file) for file in range(len(self._files.items))]
        counts = [len(offsets) - 1 for offsets in self._index]
        self._starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def _index_file(self, file: int) -> npt.NDArray[np.int64]:
        data = self._mapped(file)
        return index_frames(data, self._shown(file), verify=self._verify)

    @property
    def files(self) -> tuple[str, ...]:
        """The files read, in record order: absolute paths, or the objects' URLs."""
        return tuple(item.name for item in self._files.items)

    @property
    def file_records(self) -> tuple[int, ...]:
        """The number of records of each of `files`."""
        return tuple(int(count) for count in np.diff(self._starts))

    def __len__(self) -> int:
        return int(self._starts[-1])

    def _shown(self, file: int) -> str:
        item = self._files.items[file]
        return f"{item.name} (decompressed)" if item.gzip else item.name

    def _mapped(self, file: int) -> Any:
        """File `file` mapped (b"" if empty), mapped on first use."""
        data = self._maps[file]
        if data is None:
            with self._lock:
                self._check_open()
                data = self._maps[file]
                if data is None:
                    with self._files.local(file) as path, open(path, "rb") as handle:
                        size = os.fstat(handle.fileno()).st_size
                        data = (
                            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
                        )
                    self._maps[file] = data
        closing = self._files.used(file)
        if closing:
            with self._lock:
                for index in closing:
                    self._maps[index] = None  # Unmapped once no read uses it.
        return data

    def _read(self, index: int) -> Any:
        return self._read_many([index])[0]

    def _read_many(self, indices: Sequence[int]) -> list[Any]:
        if len(self._index) == 1:
            records = self._read_file(0, list(indices), indices)
            return self._decoded(records, [0] * len(records), list(indices), indices)
        keys = np.asarray(indices, dtype=np.int64)
        files = np.searchsorted(self._starts, keys, side="right") - 1
        rows = keys - self._starts[files]
        out: list[Any] = [None] * len(keys)
        for file in np.unique(files).tolist():
            where = np.flatnonzero(files == file)
            records = self._read_file(file, rows[where].tolist(), keys[where].tolist())
            for slot, record in zip(where.tolist(), records, strict=True):
                out[slot] = record
        return self._decoded(out, files.tolist(), rows.tolist(), indices)

    def _read_file(self, file: int, rows: list[int], keys: Sequence[int]) -> list[bytes]:
        data = self._mapped(file)
        offsets = self._index[file]
        at = np.asarray(rows, np.int64)
        ends = offsets[at + 1] - FOOTER_BYTES
        starts = (offsets[at] + HEADER_BYTES).tolist()
        records = [data[start:end] for start, end in zip(starts, ends.tolist(), strict=True)]
        if self._verify and records:
            wrong = check_records(data, records, ends)
            if wrong is not None:
                end = int(ends[wrong])
                try:
                    check_data(
                        records[wrong],
                        data[end : end + FOOTER_BYTES],
                        self._shown(file),
                        rows[wrong],
                        starts[wrong] - HEADER_BYTES,
                    )
                except CorruptRecordError as error:
                    raise CorruptRecordError(
                        f"{error}; record key {keys[wrong]} of the source"
                    ) from None
        return records

    def _decoded(
        self, records: list[bytes], files: list[int], rows: list[int], keys: Sequence[int]
    ) -> list[Any]:
        parse = parse_example if self._parse == "example" else self._parse
        if parse is None:
            return records
        assert callable(parse)
        out = []
        for record, file, row, key in zip(records, files, rows, keys, strict=True):
            try:
                out.append(parse(record))
            except Exception as error:
                named = located(error, "TFRecord", self._shown(file), row, int(key))
                if named is error:
                    raise
                raise named from error
        return out

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"paths": display_paths(self._paths), "num_records": len(self)}
        if self._parse is not None:
            params["parse"] = self._parse
        if self._compression != "auto":
            params["compression"] = self._compression
        if not self._verify:
            params["verify"] = False
        return params

    def close(self) -> None:
        """Unmaps the files; reads afterwards raise `SourceClosedError`."""
        with self._lock:
            self._closed = True
            self._maps = [None] * len(self._maps)  # Unmapped once no read uses them.

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        state["_maps"] = [None] * len(self._maps)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
