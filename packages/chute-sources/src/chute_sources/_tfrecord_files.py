"""The files of a `TFRecordSource`: local, in buckets, GZIP-compressed; each as a local copy.

Records are read from a memory-mapped, uncompressed local file:

- a local uncompressed file is mapped where it is;
- an object in a bucket is downloaded whole into the per-machine `ShardCache` (its
  records' offsets can only be found by reading every header) and mapped there;
- a GZIP file cannot be read at an offset without decompressing everything before it,
  so it is decompressed once into the shard cache (an object is downloaded first), as
  an entry named by the compressed file's path or URL and version, and mapped there.
  Creating the source decompresses it once more, before that, to learn its size; other
  processes (worker processes too) then find the copy in the cache, and decompress
  again only if the cache evicted it.

At most `MAX_OPEN` copies in the cache stay mapped at once (`used`), so that the cache
can evict the others.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import gzip
import os
import threading
import zlib
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from chute_core import SourceFileError

from ._paths import PathLike, expand_paths
from ._remote._cache import ShardCache
from ._remote._client import ObjectClient, ObjectInfo, client_for
from ._remote._expand import expand_url
from ._remote._options import StorageOptions
from ._remote._urls import is_object_url, local_path

__all__ = ["MAX_OPEN", "Compression", "TFRecordFile", "TFRecordFiles"]

Compression = Literal["auto", "GZIP"] | None
"""How TFRecord files are compressed: see `TFRecordSource`."""

MAX_OPEN = 8
"""Copies in the shard cache kept mapped at once."""
SUFFIXES = (".tfrecord", ".tfrecords", ".tfrec")
_OWNER = "TFRecordSource"
_CHUNK = 1 << 20
_GZIP_ERRORS = (OSError, EOFError, zlib.error)


@dataclasses.dataclass(frozen=True)
class TFRecordFile:
    """One file of a source.

    Attributes:
        name: its absolute path or its URL.
        gzip: whether it is GZIP-compressed.
        stamp: a local file's (size, modification time in ns) when the source was made.
        remote: the object in a bucket, if it is one.
        copy: for a GZIP file, the decompressed copy's entry in the shard cache.
    """

    name: str
    gzip: bool
    stamp: tuple[int, int] | None = None
    remote: ObjectInfo | None = None
    copy: ObjectInfo | None = None

    @property
    def cached(self) -> bool:
        """Whether it is read from the shard cache (not mapped where it is)."""
        return self.gzip or self.remote is not None


def _is_gzip(name: str, compression: Compression) -> bool:
    if compression == "auto":
        return name.lower().endswith(".gz")
    return compression == "GZIP"


def _stamp(path: str) -> tuple[int, int]:
    status = os.stat(path)
    return status.st_size, status.st_mtime_ns


class _Gunzip(ObjectClient):
    """Fills a cache entry with a decompressed copy of a file, for `ShardCache.local`."""

    def __init__(self, files: TFRecordFiles, index: int) -> None:
        super().__init__(files.options)
        self._files = files
        self._index = index

    def download(self, info: ObjectInfo, file: Any) -> None:
        with self._files.compressed(self._index) as path:
            written = _gunzip(self._files.items[self._index].name, path, file.write)
        if written != info.size:
            raise SourceFileError(
                f"TFRecordSource: {self._files.items[self._index].name!r} decompresses to "
                f"{written} bytes now, {info.size} when the source was created: it changed; "
                "create the source again."
            )


def _gunzip(name: str, path: str, write: Any) -> int:
    """Decompresses the GZIP file `path` into `write` (None: only counts); its size."""
    total = 0
    try:
        with gzip.open(path, "rb") as stream:
            while piece := stream.read(_CHUNK):
                total += len(piece)
                if write is not None:
                    write(piece)
    except _GZIP_ERRORS as error:
        raise SourceFileError(
            f"TFRecordSource: {name!r} is not a readable GZIP file ({error}); pass "
            "compression=None if it is not compressed."
        ) from error
    return total


class TFRecordFiles:
    """The files of a `TFRecordSource`, each reachable as an uncompressed local file.

    Args:
        items: the files, in record order.
        options: how to reach buckets, and the shard cache.
    """

    def __init__(self, items: tuple[TFRecordFile, ...], options: StorageOptions) -> None:
        self.items = items
        self.options = options
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._cache: ShardCache | None = None
        self._mapped: collections.OrderedDict[int, None] = collections.OrderedDict()

    def __getstate__(self) -> dict[str, Any]:
        return {"items": self.items, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def __chute_identity__(self) -> list[Any]:
        """What identifies the data: each file's name, compression, size and object version."""
        return [
            (item.name, item.gzip, item.stamp[0] if item.stamp else None, item.remote)
            for item in self.items
        ]

    @classmethod
    def expand(
        cls,
        paths: PathLike | Sequence[PathLike],
        compression: Compression,
        options: StorageOptions,
    ) -> TFRecordFiles:
        """The files `paths` names (files, globs, folders, URLs); GZIP ones measured.

        Raises:
            SourceFileNotFoundError: an entry names nothing, or `paths` is empty.
            SourceFileError: a GZIP file that does not decompress.
        """
        entries = [paths] if isinstance(paths, str | os.PathLike) else paths
        items: list[TFRecordFile] = []
        for entry in entries if isinstance(entries, Sequence) else [entries]:
            if is_object_url(entry):
                for info in expand_url(entry, "TFRecord", SUFFIXES, _OWNER, options):  # type: ignore[arg-type]
                    items.append(
                        TFRecordFile(info.url, _is_gzip(info.url, compression), None, info)
                    )
                continue
            entry = local_path(entry, _OWNER) if isinstance(entry, str) else entry
            for file in expand_paths(entry, "TFRecord", SUFFIXES, _OWNER):
                items.append(TFRecordFile(file, _is_gzip(file, compression), _stamp(file)))
        if not items:
            expand_paths(paths, "TFRecord", SUFFIXES, _OWNER)  # Raises: no paths given.
        files = cls(tuple(items), options)
        files.items = tuple(files._with_copy(index) for index in range(len(items)))
        return files

    def _with_copy(self, index: int) -> TFRecordFile:
        """`items[index]`, with its decompressed copy's cache entry if it is GZIP."""
        item = self.items[index]
        if not item.gzip:
            return item
        with self.compressed(index) as path:
            size = _gunzip(item.name, path, None)
        version = item.remote.version if item.remote is not None else None
        origin = item.remote.size if item.remote is not None else item.stamp
        copy = ObjectInfo(f"{item.name}#gunzip", size, f"{version}|{origin}")
        return dataclasses.replace(item, copy=copy)

    @property
    def cache(self) -> ShardCache:
        """This machine's shard cache (made on first use)."""
        with self._lock:
            if self._cache is None:
                self._cache = ShardCache(self.options.cache_folder, self.options.cache_bytes)
            return self._cache

    @contextlib.contextmanager
    def compressed(self, index: int) -> Iterator[str]:
        """A local path of file `index` as it is stored (compressed or not)."""
        item = self.items[index]
        if item.remote is not None:
            with self.cache.local(item.remote, client_for(self.options)) as path:
                yield path
            return
        if item.stamp is not None and _stamp(item.name) != item.stamp:
            size, _ = item.stamp
            raise SourceFileError(
                f"TFRecordSource: {item.name!r} changed after this source was created (it "
                f"had {size} bytes, now {os.path.getsize(item.name)}, or a new modification "
                "time); create a new source from the current file."
            )
        yield item.name

    @contextlib.contextmanager
    def local(self, index: int) -> Iterator[str]:
        """The path of an uncompressed local copy of file `index`: map it inside the block.

        The copy stays readable after the block even if the cache evicts it.
        """
        item = self.items[index]
        if item.copy is not None:
            with self.cache.local(item.copy, _Gunzip(self, index)) as path:
                yield path
        else:
            with self.compressed(index) as path:
                yield path

    def used(self, index: int) -> list[int]:
        """Notes a use of mapped cached `index`; the least recently used beyond `MAX_OPEN`."""
        if not self.items[index].cached:
            return []
        with self._lock:
            self._mapped[index] = None
            self._mapped.move_to_end(index)
            closing = []
            while len(self._mapped) > MAX_OPEN:
                closing.append(self._mapped.popitem(last=False)[0])
            return closing
