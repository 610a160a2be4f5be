"""`WebDatasetSource`: the samples of WebDataset tar shards, by index.

Opening the source indexes every shard once from its tar headers (`_webdataset_index`);
a read takes each sample's bytes with one `os.pread` of the span of its members. Shards
in buckets are downloaded into the per-machine shard cache to be indexed and read from
there. A pickled source carries the shards' names and indexes, so worker processes read
at once, without scanning again. `WebDatasetStream` (in `_webdataset_stream.py`) reads
the same samples in order, without an index.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from chute_core import CorruptRecordError, SourceFileError

from ._array_record_remote import RemoteShards
from ._base import Source
from ._paths import display_paths
from ._remote._client import client_for
from ._remote._options import StorageOptions
from ._webdataset_decode import FieldDecoder, decoder_for, webdataset_decoders
from ._webdataset_index import (
    ShardIndex,
    WebDatasetPaths,
    file_reader,
    resolve_shards,
    scan_shard,
)

__all__ = ["WebDatasetDecode", "WebDatasetSource", "check_decode", "decode_sample"]

WebDatasetDecode = bool | Mapping[str, FieldDecoder]
"""How fields are decoded: see `WebDatasetSource`."""

_OWNER = "WebDatasetSource"
_MAX_OPEN = 64  # Local shards kept open at once (remote ones: the shard cache's bound).


def check_decode(decode: object, owner: str) -> dict[str, FieldDecoder] | None:
    """The decoders by extension that `decode` asks for (None: none); checks it."""
    if decode is False:
        return None
    if decode is True:
        return webdataset_decoders()
    if isinstance(decode, Mapping) and all(
        isinstance(key, str) and callable(value) for key, value in decode.items()
    ):
        return {key.lower().lstrip("."): value for key, value in decode.items()}
    raise TypeError(
        f"{owner}: decode must be False, True or a dict {{extension: function}} (e.g. "
        f"webdataset_decoders(images=True)), got {decode!r}."
    )


def decode_sample(
    sample: dict[str, Any], decoders: Mapping[str, FieldDecoder], where: str
) -> dict[str, Any]:
    """Decodes the fields of `sample` in place; an error says which field of which sample."""
    for field, data in sample.items():
        if field.startswith("__"):
            continue
        decoder = decoder_for(field, decoders)
        if decoder is None:
            continue
        try:
            sample[field] = decoder(data)
        except Exception as error:
            place = f"field {field!r} of sample {sample['__key__']!r} ({where})"
            if type(error) is CorruptRecordError:
                raise CorruptRecordError(f"cannot decode {place}: {error}") from error
            error.add_note(f"chute: while decoding {place}")
            raise
    return sample


class WebDatasetSource(Source[dict[str, Any]]):
    """The samples of WebDataset tar shards as a random-access source.

    Members are grouped into samples exactly as WebDataset groups them: a member's key
    is its name up to the first dot of its last part (folders included), the rest of
    the name (in lower case) is its field, and consecutive members with the same key
    form one sample `{"__key__": key, "__url__": shard, field: bytes, ...}`, fields in
    tar order. So `train/cat.0001.seg.png` is field `"0001.seg.png"` of sample
    `"train/cat"`. Names without a dot in their last part, WebDataset's `__x__`
    metadata files, folders and links are skipped. Samples never span shards; a key
    that appears again later in a shard (not next to its first members) starts a new
    sample, as in WebDataset. `__url__` is the shard's absolute path, or its URL.

    Opening the source reads every shard's tar headers once (not the member bytes) into
    an index of each sample's members; `len()`, `__getitem__` and `__getitems__` then
    read only the samples asked for, so global shuffles, sharding and worker processes
    work as with ArrayRecord. A pickled source carries the index. Reads are thread-safe.

    Args:
        paths: a shard, a brace pattern as WebDataset users write it
            (`"shards-{000000..000009}.tar"`, `"{train,valid}-{0..3}.tar"`), a glob, a
            folder (its `*.tar` files), an `s3://` / `gs://` URL of any of these, or a
            list of them; shards are read in the order given (a glob's sorted).
        decode: False (the default): every field is bytes. True: fields decoded by
            extension with `webdataset_decoders()` (text, integers, JSON, NumPy; images
            stay bytes). A dict `{extension: function}` (e.g.
            `webdataset_decoders(images=True)`) decodes the fields it names (by the
            whole field, else its last extension: `"seg.png"` by `"png"`); functions
            must be picklable for worker processes.
        storage_options: how to reach shards in buckets, and the shard cache (default:
            from the environment; see `StorageOptions`). Each shard in a bucket is
            downloaded into the shard cache when the source is created (to index it).

    Raises:
        SourceFileNotFoundError: a path, pattern or URL names no shard.
        SourceFileError: a shard is not a tar file, is compressed, is truncated, or a
            sample has two members with one field (each naming the shard and the byte);
            when read, a local shard changed since it was indexed.
        CorruptRecordError: (when read) a field cannot be decoded by its decoder.

    Example:
        >>> import os, tempfile
        >>> from chute_sources import write_webdataset
        >>> folder = tempfile.mkdtemp()
        >>> samples = [{"__key__": f"{i:04d}", "cls": i % 2, "txt": f"n{i}"} for i in range(5)]
        >>> paths = write_webdataset(samples, os.path.join(folder, "s-%02d.tar"), max_count=2)
        >>> source = WebDatasetSource(os.path.join(folder, "s-{00..02}.tar"), decode=True)
        >>> len(source), source.shard_samples
        (5, (2, 2, 1))
        >>> sample = source[3]
        >>> sample["__key__"], sample["cls"], sample["txt"], sample["__url__"] == paths[1]
        ('0003', 1, 'n3', True)
        >>> [s["__key__"] for s in source.__getitems__([4, 0])]
        ['0004', '0000']
    """

    def __init__(
        self,
        paths: WebDatasetPaths,
        *,
        decode: WebDatasetDecode = False,
        storage_options: StorageOptions | None = None,
    ) -> None:
        self._decoders = check_decode(decode, _OWNER)
        self._decode = decode
        self._paths_shown = display_paths(paths)
        storage = storage_options if storage_options is not None else StorageOptions()
        shards = resolve_shards(paths, _OWNER, storage)
        self._shards = shards.names
        self._remote = RemoteShards(shards.remote, storage) if shards.remote else None
        self._init_runtime()
        count = len(self._shards)
        if count == 1:
            self._indexes = [self._scan(0)]
        else:
            with ThreadPoolExecutor(min(8, count), thread_name_prefix="chute-wds") as pool:
                self._indexes = list(pool.map(self._scan, range(count)))
        sizes = [len(index.keys) for index in self._indexes]
        self._starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def _init_runtime(self) -> None:
        """Creates what is not pickled: the lock and the open shards."""
        self._lock = threading.Lock()
        self._fds: collections.OrderedDict[int, int] = collections.OrderedDict()
        self._users: collections.Counter[int] = collections.Counter()

    def _scan(self, shard: int) -> ShardIndex:
        name = self._shards[shard]
        if self._remote is not None and shard in self._remote.infos:
            info = self._remote.infos[shard]
            with self._remote.cache.local(info, client_for(self._remote.options)) as path:
                fd = os.open(path, os.O_RDONLY)
            stamp = (info.size, 0)
        else:
            fd = _open(name)
            status = os.fstat(fd)
            stamp = (status.st_size, status.st_mtime_ns)
        try:
            return scan_shard(file_reader(fd), stamp[0], name, stamp)
        finally:
            os.close(fd)

    @property
    def shards(self) -> tuple[str, ...]:
        """The shards read, in sample order: absolute paths, or the objects' URLs."""
        return self._shards

    @property
    def shard_samples(self) -> tuple[int, ...]:
        """The number of samples of each of `shards`."""
        return tuple(int(count) for count in np.diff(self._starts))

    def __len__(self) -> int:
        return int(self._starts[-1])

    def _read(self, index: int) -> dict[str, Any]:
        return self._read_many([index])[0]

    def _read_many(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        keys = np.asarray(indices, dtype=np.int64)
        shards = np.searchsorted(self._starts, keys, side="right") - 1
        rows = (keys - self._starts[shards]).tolist()
        out: list[dict[str, Any]] = [{} for _ in indices]
        for shard in dict.fromkeys(shards.tolist()):
            where = np.flatnonzero(shards == shard).tolist()
            with self._open_shard(shard) as fd:
                for slot in where:
                    out[slot] = self._sample(fd, shard, rows[slot])
            if self._decoders is not None:
                for slot in where:
                    place = f"sample {rows[slot]} of shard {self._shards[shard]!r}"
                    decode_sample(out[slot], self._decoders, place)
        return out

    def _sample(self, fd: int, shard: int, row: int) -> dict[str, Any]:
        index = self._indexes[shard]
        first, stop = int(index.starts[row]), int(index.starts[row + 1])
        sample: dict[str, Any] = {"__key__": index.keys[row], "__url__": self._shards[shard]}
        if first == stop:
            return sample
        offsets, sizes = index.offsets[first:stop].tolist(), index.sizes[first:stop].tolist()
        begin, end = offsets[0], offsets[-1] + sizes[-1]
        data = os.pread(fd, end - begin, begin)
        if len(data) < end - begin:
            raise SourceFileError(
                f"{self._shards[shard]!r} is shorter than when it was indexed: sample {row} "
                f"(key {index.keys[row]!r}) needs bytes up to {end}, the file ends at byte "
                f"{begin + len(data)}. Create a new source from the current shard."
            )
        view = memoryview(data)
        names = index.names
        for field, offset, size in zip(
            index.fields[first:stop].tolist(), offsets, sizes, strict=True
        ):
            start = offset - begin
            sample[names[field]] = data if size == len(data) else bytes(view[start : start + size])
        return sample

    @contextlib.contextmanager
    def _open_shard(self, shard: int) -> Iterator[int]:
        """An open descriptor of `shard` (its local copy), held open during the block."""
        with self._lock:
            self._check_open()
            fd = self._fds.get(shard)
            self._users[shard] += 1
            if fd is not None:
                self._fds.move_to_end(shard)
        try:
            if fd is None:
                opened = self._open_fd(shard)
                with self._lock:
                    fd = self._fds.setdefault(shard, opened)
                    self._fds.move_to_end(shard)
                if fd != opened:
                    os.close(opened)
            yield fd
        finally:
            with self._lock:
                self._users[shard] -= 1
                idle = [s for s in self._fds if self._users[s] == 0]
                closing = [self._fds.pop(s) for s in idle[: max(0, len(self._fds) - _MAX_OPEN)]]
            for extra in closing:
                os.close(extra)

    def _open_fd(self, shard: int) -> int:
        name = self._shards[shard]
        if self._remote is not None and shard in self._remote.infos:
            info = self._remote.infos[shard]
            with self._remote.cache.local(info, client_for(self._remote.options)) as path:
                return os.open(path, os.O_RDONLY)
        fd = _open(name)
        status = os.fstat(fd)
        stamp = (status.st_size, status.st_mtime_ns)
        if stamp != self._indexes[shard].stamp:
            os.close(fd)
            size = self._indexes[shard].stamp[0]
            raise SourceFileError(
                f"{_OWNER}: the shard {name!r} changed after it was indexed (it had {size} "
                f"bytes, now {stamp[0]}, or a new modification time); create a new source "
                "from the current shard."
            )
        return fd

    def prefetch(self, record_keys: Sequence[int]) -> None:
        """Starts downloading the shards in buckets that `record_keys` need (a hint).

        Local shards need nothing. Shards are fetched within
        `StorageOptions.prefetch_bytes`, in the background; returns at once.
        """
        if self._remote is None or self._closed or len(record_keys) == 0:
            return
        keys = np.asarray(record_keys, dtype=np.int64)
        shards = np.searchsorted(self._starts, keys, side="right") - 1
        self._remote.prefetch(dict.fromkeys(shards.tolist()))

    def close(self) -> None:
        """Closes the open shards; reads afterwards raise `SourceClosedError`."""
        with self._lock:
            self._closed = True
            fds, self._fds = list(self._fds.values()), collections.OrderedDict()
        for fd in fds:
            os.close(fd)
        if self._remote is not None:
            self._remote.close()

    def __chute_identity__(self) -> dict[str, Any]:
        """The shards, their sizes and sample counts, and the decoding: the data read."""
        sizes = [index.stamp[0] for index in self._indexes]
        return {"shards": list(self._shards), "bytes": sizes, "samples": self.shard_samples}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for runtime in ("_lock", "_fds", "_users"):
            del state[runtime]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"paths": self._paths_shown, "num_samples": len(self)}
        if self._decode is not False:
            params["decode"] = True if self._decode is True else sorted(self._decoders or ())
        return params


def _open(name: str) -> int:
    try:
        return os.open(name, os.O_RDONLY)
    except IsADirectoryError:
        raise SourceFileError(f"{name!r} is a folder, not a WebDataset shard.") from None
