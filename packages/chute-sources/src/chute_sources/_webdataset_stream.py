"""`WebDatasetStream`: the samples of WebDataset shards, read in order, checkpointable."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Self

from chute_core import InvalidStateError, IteratorState, SourceClosedError, SourceFileError

from ._paths import display_paths
from ._remote._client import ObjectInfo, client_for
from ._remote._options import StorageOptions
from ._webdataset import WebDatasetDecode, check_decode, decode_sample
from ._webdataset_index import WebDatasetPaths, file_reader, resolve_shards
from ._webdataset_tar import BLOCK, Sequential, TarMember, members, split_name

__all__ = ["WebDatasetStream"]

_OWNER = "WebDatasetStream"
_STATE_KEYS = ("shard", "offset")
_LOCAL_CHUNK = 1 << 20  # Bytes read at once from a local shard.
_REMOTE_CHUNK = 8 << 20  # Bytes of a shard in a bucket fetched by one ranged read.


class WebDatasetStream:
    """The samples of WebDataset tar shards, in order, as a checkpointable iterator.

    Yields the same samples as `WebDatasetSource` (same grouping, same `decode`) but
    builds no index: it reads each shard front to back once, local shards in chunks of
    1 MiB and shards in buckets by ranged reads of 8 MiB (nothing goes to the shard
    cache), so its memory stays at one chunk and one sample.

    The state is where the next sample starts, as JSON: `{"shard": i, "offset": b}`,
    `b` the byte of the sample's first tar header in shard `i` (the end is
    `{"shard": len(shards), "offset": 0}`). `set_state` seeks straight there. A stream
    is an iterator: `iter(stream)` returns it, and a finished stream stays finished
    until `set_state` moves it back. Not safe to share between threads.

    Args:
        paths: as for `WebDatasetSource`: a shard, a brace pattern
            (`"shards-{000000..000009}.tar"`), a glob, a folder, a URL, or a list.
        decode: as for `WebDatasetSource`: False (bytes), True, or `{extension: function}`.
        storage_options: how to reach shards in buckets (default: from the environment).

    Raises:
        SourceFileNotFoundError: a path, pattern or URL names no shard.
        SourceFileError: (when read) a shard is not a tar file, is truncated, or a
            sample has two members with one field, naming the shard and the byte.

    Example:
        >>> import json, os, tempfile
        >>> from chute_sources import write_webdataset
        >>> pattern = os.path.join(tempfile.mkdtemp(), "s-%d.tar")
        >>> samples = [{"__key__": f"k{i}", "txt": f"t{i}"} for i in range(3)]
        >>> _ = write_webdataset(samples, pattern, max_count=2)
        >>> stream = WebDatasetStream(pattern.replace("%d", "{0..1}"), decode=True)
        >>> [s["txt"] for s in (next(stream), next(stream))]
        ['t0', 't1']
        >>> checkpoint = json.dumps(stream.get_state())
        >>> checkpoint
        '{"shard": 1, "offset": 0}'
        >>> with WebDatasetStream(pattern.replace("%d", "*")) as resumed:
        ...     resumed.set_state(json.loads(checkpoint))
        ...     [s["__key__"] for s in resumed]
        ['k2']
    """

    def __init__(
        self,
        paths: WebDatasetPaths,
        *,
        decode: WebDatasetDecode = False,
        storage_options: StorageOptions | None = None,
    ) -> None:
        self._decoders = check_decode(decode, _OWNER)
        self._paths_shown = display_paths(paths)
        self._options = storage_options if storage_options is not None else StorageOptions()
        shards = resolve_shards(paths, _OWNER, self._options)
        self._shards = shards.names
        self._remote: dict[int, ObjectInfo] = shards.remote
        self._closed = False
        self._shard = 0  # Where the next sample starts.
        self._offset = 0
        self._init_runtime()

    def _init_runtime(self) -> None:
        """Creates what is not pickled: the open shard and the member read ahead."""
        self._fd = -1
        self._members: Iterator[tuple[TarMember, bytes | None]] | None = None
        self._pending: tuple[TarMember, bytes | None] | None = None

    @property
    def shards(self) -> tuple[str, ...]:
        """The shards read, in order: absolute paths, or the objects' URLs."""
        return self._shards

    def __iter__(self) -> Self:
        """Returns the stream itself (it is an iterator)."""
        return self

    def __next__(self) -> dict[str, Any]:
        """Returns the next sample; raises `StopIteration` after the last shard's."""
        if self._closed:
            raise SourceClosedError(f"{self!r} was closed; create a new stream.")
        while self._shard < len(self._shards):
            if self._members is None:
                self._members = self._open(self._shard, self._offset)
            sample = self._gather()
            if sample is not None:
                if self._decoders is not None:
                    where = f"shard {sample['__url__']!r}"
                    decode_sample(sample, self._decoders, where)
                return sample
        raise StopIteration

    def _gather(self) -> dict[str, Any] | None:
        """The next sample of the open shard; None (and the next shard) at its end."""
        name = self._shards[self._shard]
        sample: dict[str, Any] | None = None
        assert self._members is not None
        while True:
            item = self._pending or next(self._members, None)
            self._pending = None
            if item is None:
                self._release()
                self._shard, self._offset = self._shard + 1, 0
                return sample
            member, data = item
            split = split_name(member.name)
            if split is None:
                continue
            key, field = split
            if sample is None:
                sample = {"__key__": key, "__url__": name}
            elif key != sample["__key__"]:
                self._pending, self._offset = item, member.header
                return sample
            elif field in sample:
                self._fail_duplicate(sample["__key__"], field, member)
            sample[field] = data

    def _fail_duplicate(self, key: str, field: str, member: TarMember) -> None:
        raise SourceFileError(
            f"{self._shards[self._shard]}: sample {key!r} has two members with the field "
            f"{field!r} (the second, {member.name!r}, at byte {member.header}); each field of "
            "a sample must appear once."
        )

    def _open(self, shard: int, offset: int) -> Iterator[tuple[TarMember, bytes | None]]:
        name = self._shards[shard]
        if shard in self._remote:
            info = self._remote[shard]
            client = client_for(self._options)
            reader = Sequential(
                lambda start, end: client.read(info, start, end), info.size, offset, _REMOTE_CHUNK
            )
        else:
            self._fd = os.open(name, os.O_RDONLY)
            size = os.fstat(self._fd).st_size
            reader = Sequential(file_reader(self._fd), size, offset, _LOCAL_CHUNK)
        return members(reader, name, read_data=True)

    def _size(self, shard: int) -> int:
        if shard in self._remote:
            return self._remote[shard].size
        return os.path.getsize(self._shards[shard])

    def get_state(self) -> IteratorState:
        """Returns where the next sample starts, as `{"shard": i, "offset": b}`."""
        return {"shard": self._shard, "offset": self._offset}

    def set_state(self, state: IteratorState, /) -> None:
        """Moves to the sample that `state` (from `get_state`) names.

        Raises:
            InvalidStateError: `state` is not such a dict, or names a shard or an offset
                these shards do not have.
        """
        if self._closed:
            raise SourceClosedError(f"{self!r} was closed; create a new stream.")
        example = '{"shard": 0, "offset": 0}'
        if not isinstance(state, dict) or sorted(state) != sorted(_STATE_KEYS):
            raise InvalidStateError(
                f"{self!r}: a state is a dict like {example} (from get_state()), got {state!r}."
            )
        for key, value in state.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidStateError(
                    f"{self!r}: state[{key!r}] must be an int >= 0, got {value!r}."
                )
        shard, offset = int(state["shard"]), int(state["offset"])  # type: ignore[arg-type]
        count = len(self._shards)
        if shard > count or (shard == count and offset != 0):
            raise InvalidStateError(
                f"{self!r}: state {state!r} is out of range: this stream reads {count} shards "
                f"(valid shards: 0..{count}, {count} with offset 0 meaning the end). Was the "
                "state saved with other shards?"
            )
        if shard < count and (offset % BLOCK or offset > self._size(shard)):
            raise InvalidStateError(
                f"{self!r}: state['offset'] = {offset} is not where a tar header of shard "
                f"{self._shards[shard]!r} can start (a multiple of {BLOCK} within its "
                f"{self._size(shard)} bytes)."
            )
        self._release()
        self._shard, self._offset = shard, offset

    def _release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._init_runtime()

    def close(self) -> None:
        """Closes the open shard; `next()` afterwards raises `SourceClosedError`."""
        self._closed = True
        self._release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        runtime = ("_fd", "_members", "_pending")
        return {key: value for key, value in self.__dict__.items() if key not in runtime}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def __repr__(self) -> str:
        return f"WebDatasetStream(paths={self._paths_shown!r}, shards={len(self._shards)})"
