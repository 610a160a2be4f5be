"""Each library (and the two references) reading ranges and whole objects."""

from __future__ import annotations

import abc
import http.client
import http.server
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ._setup import BUCKET, FIRST, KEY_ID, MIB, REGION, SECRET, Endpoint, Reads

# --------------------------------------------------------------------------- libraries


class Library(abc.ABC):
    """One way of reading the objects; `ranges` and `whole` are what gets timed."""

    name = ""
    label = ""  # the name in tables

    def __init__(self, endpoint: Endpoint, threads: int) -> None:
        self.endpoint = endpoint
        self.pool = ThreadPoolExecutor(threads)
        self.pool8 = ThreadPoolExecutor(8)

    def path(self, key: str) -> str:
        return f"{BUCKET}/{key}"

    @abc.abstractmethod
    def ranges(self, reads: Reads) -> list[Any]:
        """Every read of `reads`, as this library does many range reads at once."""

    @abc.abstractmethod
    def read(self, key: str) -> Any:
        """The whole object `key`."""

    def whole(self, keys: Sequence[str], at_once: bool) -> list[Any]:
        if at_once:
            return list(self.pool8.map(self.read, keys))
        return [self.read(key) for key in keys]

    @staticmethod
    @abc.abstractmethod
    def first_byte(endpoint: Endpoint, key: str) -> bytes:
        """HEAD and the first FIRST bytes, with a client made for this call."""

    def close(self) -> None:
        self.pool.shutdown()
        self.pool8.shutdown()


class LocalPread(Library):
    name, label = "pread", "os.pread (local file)"

    def __init__(self, endpoint: Endpoint, threads: int) -> None:
        super().__init__(endpoint, threads)
        self.fds: dict[str, int] = {}

    def _fd(self, key: str) -> int:
        if key not in self.fds:
            self.fds[key] = os.open(os.path.join(self.endpoint.root, key), os.O_RDONLY)
        return self.fds[key]

    def ranges(self, reads: Reads) -> list[Any]:
        return [os.pread(self._fd(key), length, start) for key, start, length in reads.items]

    def read(self, key: str) -> Any:
        fd = self._fd(key)
        return os.pread(fd, os.fstat(fd).st_size, 0)

    @staticmethod
    def first_byte(endpoint: Endpoint, key: str) -> bytes:
        path = os.path.join(endpoint.root, key)
        os.stat(path)
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.pread(fd, FIRST, 0)
        finally:
            os.close(fd)

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        super().close()


def _http(port: int, method: str, path: str, headers: dict[str, str]) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(method, path, headers=headers)
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    if response.status not in (200, 206):
        raise OSError(f"{method} {path}: HTTP {response.status}")
    return body


class RawHttp(Library):
    """Unsigned GETs with the standard library: the server's own cost, nearly no client's."""

    name, label = "http", "http.client (no library)"

    def get(self, key: str, start: int, length: int) -> bytes:
        rng = {"Range": f"bytes={start}-{start + length - 1}"}
        return _http(self.endpoint.port, "GET", "/" + self.path(key), rng)

    def ranges(self, reads: Reads) -> list[Any]:
        return list(self.pool.map(lambda r: self.get(*r), reads.items))

    def read(self, key: str) -> Any:
        return _http(self.endpoint.port, "GET", "/" + self.path(key), {})

    @staticmethod
    def first_byte(endpoint: Endpoint, key: str) -> bytes:
        _http(endpoint.port, "HEAD", f"/{BUCKET}/{key}", {})
        return _http(endpoint.port, "GET", f"/{BUCKET}/{key}", {"Range": f"bytes=0-{FIRST - 1}"})


def obstore_s3(endpoint: Endpoint, **options: Any) -> Any:
    from obstore.store import S3Store

    client_options = {"allow_http": True, **options.pop("client_options", {})}
    return S3Store(
        BUCKET,
        endpoint=endpoint.url,
        region=REGION,
        access_key_id=KEY_ID,
        secret_access_key=SECRET,
        client_options=client_options,
        **options,
    )


class Obstore(Library):
    """`get_ranges` per object (no coalescing: one request per read, as the others make)."""

    name, label = "obstore", "obstore"
    coalesce = 0

    def __init__(self, endpoint: Endpoint, threads: int) -> None:
        super().__init__(endpoint, threads)
        self.store = obstore_s3(endpoint)

    def ranges(self, reads: Reads) -> list[Any]:
        import obstore

        out: list[Any] = [None] * len(reads.items)

        def one(key: str) -> None:
            positions, starts, lengths = reads.by_key[key]
            got = obstore.get_ranges(
                self.store, key, starts=starts, lengths=lengths, coalesce=self.coalesce
            )
            for position, buffer in zip(positions, got, strict=True):
                out[position] = buffer

        # One call per object; calls for several objects run side by side in threads
        # (each call releases the GIL and runs up to 10 requests at once).
        list(self.pool.map(one, reads.by_key))
        return out

    def read(self, key: str) -> Any:
        import obstore

        return obstore.get(self.store, key).bytes()

    @staticmethod
    def first_byte(endpoint: Endpoint, key: str) -> bytes:
        import obstore

        store = obstore_s3(endpoint)
        obstore.head(store, key)
        return bytes(obstore.get_range(store, key, start=0, length=FIRST))


class ObstoreCoalesced(Obstore):
    """`get_ranges` with its default: ranges less than 1 MiB apart share a request."""

    name, label = "obstore-c", "obstore, coalescing"
    coalesce = MIB


class ObstoreConditional(Obstore):
    """A HEAD per object, then one `get` per read with its ETag as If-Match, from threads.

    What a reader that must notice a replaced object does: `get_ranges` and `get_range`
    take no If-Match, `get` does (one range per call).
    """

    name, label = "obstore-m", "obstore, get + If-Match x threads"

    def ranges(self, reads: Reads) -> list[Any]:
        import obstore

        keys = list(reads.by_key)
        heads = self.pool.map(lambda key: obstore.head(self.store, key)["e_tag"], keys)
        etags = dict(zip(keys, heads, strict=True))

        def one(read: tuple[str, int, int]) -> Any:
            key, start, length = read
            options = {"range": (start, start + length), "if_match": etags[key]}
            return obstore.get(self.store, key, options=options).bytes()

        return list(self.pool.map(one, reads.items))


def s3fs_fs(endpoint: Endpoint, **options: Any) -> Any:
    import s3fs

    return s3fs.S3FileSystem(
        key=KEY_ID,
        secret=SECRET,
        endpoint_url=endpoint.url,
        client_kwargs={"region_name": REGION},
        skip_instance_cache=True,
        **options,
    )


class S3fs(Library):
    """`cat_ranges` (asyncio underneath, in fsspec's I/O thread) and `cat`."""

    name, label = "s3fs", "s3fs (fsspec)"

    def __init__(self, endpoint: Endpoint, threads: int) -> None:
        super().__init__(endpoint, threads)
        self.fs = s3fs_fs(endpoint)

    def ranges(self, reads: Reads) -> list[Any]:
        paths = [self.path(key) for key, _, _ in reads.items]
        starts = [start for _, start, _ in reads.items]
        ends = [start + length for _, start, length in reads.items]
        return list(self.fs.cat_ranges(paths, starts, ends, on_error="raise"))

    def read(self, key: str) -> Any:
        return self.fs.cat_file(self.path(key))

    def whole(self, keys: Sequence[str], at_once: bool) -> list[Any]:
        if at_once:
            paths = [self.path(key) for key in keys]
            got = self.fs.cat(paths, on_error="raise")
            return [got[path] for path in paths]
        return super().whole(keys, at_once)

    @staticmethod
    def first_byte(endpoint: Endpoint, key: str) -> bytes:
        fs = s3fs_fs(endpoint)
        fs.info(f"{BUCKET}/{key}")
        return bytes(fs.cat_file(f"{BUCKET}/{key}", start=0, end=FIRST))


def arrow_s3(endpoint: Endpoint, **options: Any) -> Any:
    import pyarrow.fs

    return pyarrow.fs.S3FileSystem(
        access_key=KEY_ID,
        secret_key=SECRET,
        region=REGION,
        scheme="http",
        endpoint_override=f"127.0.0.1:{endpoint.port}",
        **options,
    )


class PyArrow(Library):
    """`open_input_file` per object (a HEAD each), then `read_at` from a thread pool."""

    name, label = "pyarrow", "pyarrow.fs"

    def __init__(self, endpoint: Endpoint, threads: int) -> None:
        super().__init__(endpoint, threads)
        self.fs = arrow_s3(endpoint)

    def ranges(self, reads: Reads) -> list[Any]:
        keys = list(reads.by_key)
        opened = self.pool.map(self.fs.open_input_file, map(self.path, keys))
        files = dict(zip(keys, opened, strict=True))
        return list(self.pool.map(lambda r: files[r[0]].read_at(r[2], r[1]), reads.items))

    def read(self, key: str) -> Any:
        with self.fs.open_input_file(self.path(key)) as file:
            return file.read()

    @staticmethod
    def first_byte(endpoint: Endpoint, key: str) -> bytes:
        fs = arrow_s3(endpoint)
        with fs.open_input_file(f"{BUCKET}/{key}") as file:  # HEAD
            return bytes(file.read_at(FIRST, 0))


LIBRARIES: dict[str, type[Library]] = {
    cls.name: cls
    for cls in (LocalPread, RawHttp, Obstore, ObstoreCoalesced, ObstoreConditional, S3fs, PyArrow)
}
REFERENCES = ("pread", "http")  # not candidates: never "the best library"
