"""`ArrayRecordSource`: random access over ArrayRecord files."""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np
from array_record.python.array_record_module import ArrayRecordReader

from chute_core import SourceFileError, SourceFileNotFoundError
from chute_core.internal import check_bool, distinct, map_in_fork

from ._array_record_remote import RemoteShards
from ._base import Source
from ._codec import MAGIC, decode_record
from ._conversion_manifest import check_conversions_finished
from ._paths import PathLike, display_paths, expand_paths
from ._record_errors import located
from ._remote._client import ObjectInfo, client_for
from ._remote._expand import expand_url
from ._remote._options import StorageOptions
from ._remote._urls import is_object_url, local_path, parse_object_url

__all__ = ["ArrayRecordSource", "Decoder", "FileInstruction", "open_array_record_reader"]

Decoder = Literal["auto"] | bool | Callable[[bytes], Any]
"""How records are decoded: see `ArrayRecordSource`."""

_READER_OPTIONS = "readahead_buffer_size:0"
_SUFFIXES = (".array_record", ".arrayrecord")
_OWNER = "ArrayRecordSource"


@dataclasses.dataclass(frozen=True)
class FileInstruction:
    """A slice of one ArrayRecord file whose size is known, so it need not be opened.

    Same fields as the file instructions TFDS produces.

    Attributes:
        filename: the file.
        skip: records skipped at the start of the file.
        take: records used after `skip` (-1: all the rest).
        examples_in_shard: the number of records in the whole file.

    Example:
        >>> FileInstruction("train.array_record", skip=10, take=5, examples_in_shard=100)
        FileInstruction(filename='train.array_record', skip=10, take=5, examples_in_shard=100)
    """

    filename: str
    skip: int = 0
    take: int = -1
    examples_in_shard: int = -1

    def __post_init__(self) -> None:
        if self.examples_in_shard < 0:
            raise ValueError(f"{self}: examples_in_shard must be given (>= 0).")
        if not 0 <= self.skip <= self.examples_in_shard:
            raise ValueError(f"{self}: skip must be in [0, examples_in_shard].")
        if self.take < -1 or self.skip + max(self.take, 0) > self.examples_in_shard:
            raise ValueError(f"{self}: skip + take exceeds examples_in_shard.")

    @property
    def num_records(self) -> int:
        """The number of records this instruction selects."""
        return self.examples_in_shard - self.skip if self.take == -1 else self.take


_ONE_BY_ONE = [False]  # Whether local reads in this process take one record at a time.


def read_one_by_one(one_by_one: bool = True) -> None:
    """Has this process read local ArrayRecord records one at a time, not in parallel.

    ArrayRecord reads a batch of records on its own pool of threads. That helps only
    where cores are idle: with as many busy processes as cores (chute's worker
    processes, which call this then), the pool's threads wait for the other processes'
    work. Measured here on page-cached files, 2 processes on 2 cores read 1.8x faster
    one at a time; one process alone reads as fast either way. Remote files (`s3://`,
    `gs://`) are always read in parallel.

    Example:
        >>> read_one_by_one(False)  # The default: batches read in parallel.
    """
    _ONE_BY_ONE[0] = one_by_one


def reading_one_by_one() -> bool:
    """Whether this process reads local ArrayRecord records one at a time (`read_one_by_one`).

    Example:
        >>> reading_one_by_one()
        False
    """
    return _ONE_BY_ONE[0]


def open_array_record_reader(path: str, options: str = _READER_OPTIONS) -> ArrayRecordReader:
    """Opens an ArrayRecord reader, turning a failed open into a clear chute error."""
    if not os.path.exists(path):
        raise SourceFileNotFoundError(f"ArrayRecord file {path!r} does not exist.")
    reader = ArrayRecordReader(path, options)
    if not reader.ok():
        try:
            reader.read()
            detail = "unknown error"
        except RuntimeError as error:
            detail = str(error)
        raise SourceFileError(f"{path!r} is not a readable ArrayRecord file: {detail}.")
    return reader


def _is_instruction(entry: object) -> bool:
    return all(hasattr(entry, a) for a in ("filename", "skip", "take", "examples_in_shard"))


class ArrayRecordSource(Source[Any]):
    """Random access over the records of one or many ArrayRecord files.

    Files are given as paths, glob patterns, folders (their `*.array_record*` files),
    or file instructions (`FileInstruction`, or TFDS's own), which select a slice of a
    file and spare opening it to count its records. Records are numbered across the
    files in the order given. Batched reads (`__getitems__`) read each file's records
    in one call on a small thread pool.

    Args:
        paths: a path, pattern, folder or file instruction, or a sequence of them.
        decode: `"auto"` (default) decodes records written by chute's
            `write_array_record` and returns any other record as raw bytes; `True`
            decodes every record with chute's codec (an error for foreign records);
            `False` returns raw bytes; a callable is applied to the raw bytes.
        reader_options: ArrayRecord reader options; the default suits random access.
        storage_options: how to reach `s3://` / `gs://` files, and the shard cache
            (default: from the environment; see `StorageOptions`).
        allow_incomplete: read local shards that `chute convert` has not finished
            writing (their manifest, `<stem>.chute-convert.json`, says `"complete":
            false`), with an `IncompleteShardsWarning`; by default they are refused
            with a `SourceFileError`, because the shards that are there read like a
            whole, smaller data set. Opening a source checks this with one `stat`.

    Files in buckets (`s3://bucket/key`, `gs://...`, globs and folders of them) are
    counted from their footers when the source is created (no shard is downloaded)
    and read from local copies in the per-machine shard cache, downloaded on first
    use or ahead of the reads (`prefetch`); see the cloud storage guide.

    Example:
        >>> import tempfile, os
        >>> from chute_sources import write_array_record
        >>> folder = tempfile.mkdtemp()
        >>> paths = write_array_record(
        ...     [{"x": i} for i in range(10)], os.path.join(folder, "d"), num_shards=2
        ... )
        >>> source = ArrayRecordSource(paths)
        >>> len(source), source[7], [r["x"] for r in source.__getitems__([9, 0])]
        (10, {'x': 7}, [9, 0])
    """

    def __init__(
        self,
        paths: PathLike | FileInstruction | Sequence[PathLike | FileInstruction],
        *,
        decode: Decoder = "auto",
        reader_options: str = _READER_OPTIONS,
        storage_options: StorageOptions | None = None,
        allow_incomplete: bool = False,
    ) -> None:
        self._allow_incomplete = check_bool(allow_incomplete, "allow_incomplete", _OWNER)
        if not (decode in ("auto", True, False) or callable(decode)):
            raise ValueError(f"decode must be 'auto', True, False or a callable; got {decode!r}")
        entries: Sequence[Any]
        if isinstance(paths, (str, os.PathLike)) or _is_instruction(paths):
            entries = [paths]
        else:
            entries = list(paths)  # type: ignore[arg-type]
        storage = storage_options if storage_options is not None else StorageOptions()
        instructions: list[FileInstruction] = []
        unsized: list[tuple[int, str]] = []
        remote: dict[int, ObjectInfo] = {}
        for entry in entries:
            if _is_instruction(entry):
                filename = os.fspath(entry.filename)
                instruction = FileInstruction(
                    filename if is_object_url(filename) else local_path(filename, _OWNER),
                    entry.skip,
                    entry.take,
                    entry.examples_in_shard,
                )
                if is_object_url(instruction.filename):
                    url = parse_object_url(instruction.filename, _OWNER)
                    remote[len(instructions)] = client_for(storage).stat(url)
                elif not os.path.exists(instruction.filename):
                    raise SourceFileNotFoundError(
                        f"ArrayRecord file {instruction.filename!r} (file instruction) does "
                        "not exist."
                    )
                instructions.append(instruction)
            elif is_object_url(entry):
                for info in expand_url(entry, "ArrayRecord", _SUFFIXES, _OWNER, storage):
                    remote[len(instructions)] = info
                    unsized.append((len(instructions), info.url))
                    instructions.append(FileInstruction(info.url, examples_in_shard=0))
            else:
                if isinstance(entry, str):
                    entry = local_path(entry, _OWNER)
                for file in expand_paths(entry, "ArrayRecord", _SUFFIXES, _OWNER):
                    unsized.append((len(instructions), file))
                    instructions.append(FileInstruction(file, examples_in_shard=0))
        check_conversions_finished(
            [i.filename for i in instructions if not is_object_url(i.filename)],
            allow_incomplete=self._allow_incomplete,
            owner=_OWNER,
        )
        self._remote = RemoteShards(remote, storage) if remote else None
        self._options = reader_options
        self._decode = decode
        self._readers: dict[int, ArrayRecordReader] = {}
        self._lock = threading.Lock()
        if unsized:
            counts = self._count_records([file for _, file in unsized])
            for (position, file), count in zip(unsized, counts, strict=True):
                instructions[position] = FileInstruction(file, examples_in_shard=count)
        if not instructions:
            raise SourceFileNotFoundError("ArrayRecordSource: no files given.")
        self._instructions = tuple(instructions)
        sizes = [i.num_records for i in instructions]
        self._starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._skips = np.asarray([i.skip for i in instructions], dtype=np.int64)
        # Sizes when opened: a file truncated later reads back empty records, not errors.
        # (Remote files are read at the version listed, so they cannot change.)
        self._file_bytes = tuple(
            remote[i].size if i in remote else _file_size(instruction.filename)
            for i, instruction in enumerate(instructions)
        )

    def _count_records(self, files: list[str]) -> list[int]:
        """The records of each file, from its footer.

        Local files are counted in a forked child where that is safe (`map_in_fork`):
        opening a reader starts ArrayRecord's pool of native threads for good, and a
        process that runs them cannot fork its workers (they then start from the fork
        server, hundreds of milliseconds later).
        """
        remote = {info.url: info for info in self._remote.infos.values()} if self._remote else {}
        if not remote:
            options = self._options
            counted = map_in_fork(lambda file: _count_local(file, options), files)
            if counted is not None:
                return counted

        def count(file: str) -> int:
            if file in remote:
                assert self._remote is not None
                return self._remote.count_records(
                    remote[file], lambda path: open_array_record_reader(path, self._options)
                )
            return _count_local(file, self._options)

        if len(files) == 1:
            return [count(files[0])]
        with ThreadPoolExecutor(max_workers=min(16, len(files))) as pool:
            return list(pool.map(count, files))

    @property
    def instructions(self) -> tuple[FileInstruction, ...]:
        """The files and the slice of each that this source reads."""
        return self._instructions

    def __len__(self) -> int:
        return int(self._starts[-1])

    def _reader(self, file_index: int) -> ArrayRecordReader:
        reader = self._readers.get(file_index)
        if reader is None:
            with self._lock:
                self._check_open()
                reader = self._readers.get(file_index)
                if reader is None:
                    filename = self._instructions[file_index].filename
                    reader = open_array_record_reader(filename, self._options)
                    self._readers[file_index] = reader
        return reader

    def _decoder(self) -> Callable[[bytes], Any] | None:
        decode = self._decode
        if decode is False:
            return None
        if decode is True:
            return decode_record
        if decode == "auto":
            return _auto_decode
        assert callable(decode)
        return decode

    def _read_file(self, file_index: int, positions: list[int], keys: Sequence[int]) -> list[bytes]:
        try:
            if self._remote is not None and file_index in self._remote.infos:
                self._check_open()
                opener = functools.partial(open_array_record_reader, options=self._options)
                with self._remote.reader(file_index, opener) as reader:
                    return list(reader.read(positions))
            reader = self._reader(file_index)
            if _ONE_BY_ONE[0] and len(positions) > 1:
                records = [record for position in positions for record in reader.read([position])]
            else:
                records = list(reader.read(positions))
            if b"" in records:
                self._check_unchanged(file_index, keys)
            return records
        except RuntimeError as error:
            filename = self._instructions[file_index].filename
            more = "..." if len(keys) > 5 else ""
            raise SourceFileError(
                f"cannot read record keys {list(keys)[:5]}{more} (records {positions[:5]}{more} "
                f"of the file) from ArrayRecord file {filename!r}: {error}. The file may be "
                "truncated or corrupt."
            ) from error

    def _check_unchanged(self, file_index: int, keys: Sequence[int]) -> None:
        """Raises `SourceFileError` if the file's size changed since it was opened."""
        filename = self._instructions[file_index].filename
        before, now = self._file_bytes[file_index], _file_size(filename)
        if now != before:
            raise SourceFileError(
                f"ArrayRecord file {filename!r} changed size since it was opened ({before} -> "
                f"{now} bytes) while reading record keys {list(keys)[:5]}"
                f"{'...' if len(keys) > 5 else ''}: it was truncated or rewritten, so its "
                "records cannot be trusted. Restore the file and resume from a checkpoint."
            )

    def _read(self, index: int) -> Any:
        return self._read_many([index])[0]

    def _read_many(self, indices: Sequence[int]) -> list[Any]:
        keys = np.asarray(indices, dtype=np.int64)
        files = np.searchsorted(self._starts, keys, side="right") - 1
        positions = keys - self._starts[files] + self._skips[files]
        out: list[Any] = [None] * len(keys)
        unique = distinct(files)
        if len(unique) == 1:
            records = self._read_file(int(unique[0]), positions.tolist(), indices)
            out = records
        else:
            for file_index in unique.tolist():
                where = np.flatnonzero(files == file_index)
                records = self._read_file(
                    file_index, positions[where].tolist(), keys[where].tolist()
                )
                for slot, record in zip(where.tolist(), records, strict=True):
                    out[slot] = record
        decoder = self._decoder()
        if decoder is None:
            return out
        try:
            return [decoder(record) for record in out]
        except Exception as error:
            first = error
        for slot, record in enumerate(out):  # Found again one by one, to say where it is.
            try:
                decoder(record)
            except Exception as failed:
                filename = self._instructions[int(files[slot])].filename
                named = located(
                    failed, "ArrayRecord", filename, int(positions[slot]), int(keys[slot])
                )
                if named is failed:
                    raise
                raise named from failed
        raise first

    def prefetch(self, record_keys: Sequence[int]) -> None:
        """Starts fetching what reading `record_keys` will need (a hint; returns at once).

        For files in buckets, the shards holding these records are downloaded into the
        shard cache in the background, within `StorageOptions.prefetch_bytes`; local
        files need nothing.
        """
        if self._remote is None or self._closed or len(record_keys) == 0:
            return
        keys = np.asarray(record_keys, dtype=np.int64)
        files = np.searchsorted(self._starts, keys, side="right") - 1
        self._remote.prefetch(dict.fromkeys(files.tolist()))

    def close(self) -> None:
        """Closes every open file; reads afterwards raise `SourceClosedError`."""
        with self._lock:
            self._closed = True
            readers, self._readers = self._readers, {}
        for reader in readers.values():
            reader.close()
        if self._remote is not None:
            self._remote.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_readers"] = {}
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _params(self) -> dict[str, Any]:
        files = [i.filename for i in self._instructions]
        params: dict[str, Any] = {
            "paths": display_paths(files),
            "num_records": len(self),
            "decode": self._decode,
        }
        if self._allow_incomplete:
            params["allow_incomplete"] = True
        return params


def _count_local(file: str, options: str) -> int:
    reader = open_array_record_reader(file, options)
    try:
        return int(reader.num_records())
    finally:
        reader.close()


def _file_size(filename: str) -> int:
    try:
        return os.stat(filename).st_size
    except OSError:
        return -1


def _auto_decode(record: bytes) -> Any:
    if record[:8] == MAGIC:
        return decode_record(record)
    return record
