"""JSON Lines objects in buckets: downloaded whole to the shard cache, read from there.

Counting a JSON Lines file's records means finding its line ends, so each object is
downloaded into the per-machine `ShardCache` when the source is created (concurrently
for several), and read from that local copy as a local file is. At most `MAX_OPEN`
copies stay mapped at once, so that the cache can evict the others; a file mapped
again is taken from the cache (downloaded again if it was evicted), at the version
(ETag) listed when the source was created.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from ._remote._cache import ShardCache
from ._remote._client import ObjectInfo, client_for
from ._remote._expand import expand_url
from ._remote._options import StorageOptions

__all__ = ["MAX_OPEN", "RemoteFiles"]

MAX_OPEN = 8
"""Objects kept mapped at once (their local copies cannot leave the cache meanwhile)."""
_SUFFIXES = (".jsonl", ".ndjson")


class RemoteFiles:
    """The objects of a `JsonLinesSource` URL (an object, a glob or a folder).

    Args:
        infos: the objects, in record order.
        options: how to reach them, and the cache's folder and limit.
    """

    def __init__(self, infos: tuple[ObjectInfo, ...], options: StorageOptions) -> None:
        self.infos = infos
        self.options = options
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._cache: ShardCache | None = None
        self._mapped: collections.OrderedDict[int, None] = collections.OrderedDict()

    @classmethod
    def expand(cls, url: str, options: StorageOptions) -> RemoteFiles:
        """The objects `url` names; a folder's are those named `*.jsonl*` / `*.ndjson*`.

        Raises:
            SourceFileNotFoundError: nothing matches, or no such bucket.
        """
        infos = expand_url(url, "JSON Lines", _SUFFIXES, "JsonLinesSource", options)
        return cls(tuple(infos), options)

    def __getstate__(self) -> dict[str, Any]:
        return {"infos": self.infos, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    @contextlib.contextmanager
    def local(self, index: int) -> Iterator[str]:
        """The path of a complete local copy of object `index` (downloaded if needed).

        Map or open it inside the block; the copy stays readable after that even if
        the cache evicts it.
        """
        with self._lock:
            if self._cache is None:
                self._cache = ShardCache(self.options.cache_folder, self.options.cache_bytes)
            cache = self._cache
        with cache.local(self.infos[index], client_for(self.options)) as path:
            yield path

    def used(self, index: int) -> list[int]:
        """Notes a use of mapped `index`; returns the least recently used beyond `MAX_OPEN`."""
        with self._lock:
            self._mapped[index] = None
            self._mapped.move_to_end(index)
            closing = []
            while len(self._mapped) > MAX_OPEN:
                closing.append(self._mapped.popitem(last=False)[0])
            return closing
