"""`ObjectClient`: stat, list, ranged reads, downloads and writes of objects, via obstore.

One client per `StorageOptions` per process (`client_for`); its connections are made
again in a forked or spawned worker, never shared with the parent. obstore's own
retries are off: `with_retries` retries, so that errors name the URL, the byte range
and the attempts; it also counts each request (`chute_core.internal.COUNTERS`), and
the reads here count the body bytes they receive.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import threading
from collections.abc import Sequence
from typing import Any

from chute_core import ObjectStorageError, SourceFileNotFoundError
from chute_core.internal import COUNTERS, STORAGE_BYTES

from ._listing import StorePages, list_folder
from ._options import StorageOptions
from ._retry import Request, translate, with_retries
from ._urls import ObjectUrl, parse_object_url

__all__ = ["ObjectClient", "ObjectInfo", "client_for", "require_obstore"]

_CHUNK = 8 << 20  # Bytes per piece of a streamed download.


@dataclasses.dataclass(frozen=True)
class ObjectInfo:
    """What a source remembers of an object: where, how big, which version.

    Attributes:
        url: the object's URL.
        size: its size in bytes.
        version: its ETag (every read asks for exactly this version), or None if the
            server gives none.

    Example:
        >>> info = ObjectInfo("s3://bucket/train.parquet", size=1024, version='"abc"')
        >>> info.location.key, info.size
        ('train.parquet', 1024)
    """

    url: str
    size: int
    version: str | None

    @property
    def location(self) -> ObjectUrl:
        """The parsed URL."""
        return parse_object_url(self.url)


def require_obstore(owner: str) -> Any:
    """Imports obstore, or says which extra to install."""
    try:
        import obstore
    except ImportError as error:  # pragma: no cover - obstore is in the dev group
        raise ImportError(
            f"{owner}: reading s3:// or gs:// URLs needs obstore: pip install "
            "'chute-sources[s3]' (or [gcs])."
        ) from error
    return obstore


def _seconds(value: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=value)


class ObjectClient:
    """Reads and writes objects of `s3://` and `gs://` URLs with `options`.

    Example:
        >>> client = client_for(StorageOptions())
        >>> client.options.max_attempts
        6
    """

    def __init__(self, options: StorageOptions) -> None:
        self.options = options
        self._stores: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def store(self, url: ObjectUrl) -> Any:
        """The obstore store of `url`'s bucket (made once per bucket)."""
        key = (url.scheme, url.bucket)
        store = self._stores.get(key)
        if store is None:
            with self._lock:
                store = self._stores.get(key)
                if store is None:
                    store = self._make_store(url)
                    self._stores[key] = store
        return store

    def _client_options(self, endpoint: str | None) -> dict[str, Any]:
        options: dict[str, Any] = {
            "timeout": _seconds(self.options.request_timeout),
            "connect_timeout": _seconds(self.options.connect_timeout),
        }
        if endpoint is not None and endpoint.startswith("http://"):
            options["allow_http"] = True
        return options

    def _make_store(self, url: ObjectUrl) -> Any:
        require_obstore("chute")
        from obstore.store import GCSStore, S3Store

        options = self.options
        retry: dict[str, Any] = {
            "max_retries": 0,
            "retry_timeout": _seconds(options.request_timeout),
        }
        if url.scheme == "s3":
            endpoint = (
                options.endpoint
                or os.environ.get("AWS_ENDPOINT_URL_S3")
                or os.environ.get("AWS_ENDPOINT_URL")
            )
            config: dict[str, Any] = {}
            if endpoint:
                config["endpoint"] = endpoint
            region = options.region or os.environ.get("AWS_REGION")
            region = region or os.environ.get("AWS_DEFAULT_REGION")
            if region:
                config["region"] = region
            elif endpoint:
                config["region"] = "us-east-1"  # S3-compatible servers ignore it.
            if options.access_key_id is not None:
                config["access_key_id"] = options.access_key_id
                config["secret_access_key"] = options.secret_access_key
                if options.session_token is not None:
                    config["session_token"] = options.session_token
            if options.anonymous:
                config["skip_signature"] = True
            return S3Store(url.bucket, **self._settings(config, endpoint, retry))
        emulator = options.endpoint or os.environ.get("STORAGE_EMULATOR_HOST")
        gcs: dict[str, Any] = {}
        if emulator:
            if "://" not in emulator:
                emulator = f"http://{emulator}"
            gcs["base_url"] = emulator.rstrip("/")
            if options.service_account_path is None and not options.anonymous:
                # An emulator takes no credentials (Google's own clients send none to
                # STORAGE_EMULATOR_HOST); obstore wants one for writes, so a placeholder.
                gcs["bearer_token"] = "emulator"
        if options.service_account_path is not None:
            gcs["service_account"] = options.service_account_path
        if options.anonymous:
            gcs["skip_signature"] = True
        return GCSStore(url.bucket, **self._settings(gcs, emulator, retry))

    def _settings(
        self, config: dict[str, Any], endpoint: str | None, retry: dict[str, Any]
    ) -> dict[str, Any]:
        """A store's keyword arguments: its config, timeouts and (no) retries."""
        return {
            "config": config,
            "client_options": self._client_options(endpoint),
            "retry_config": retry,
        }

    def stat(self, url: ObjectUrl) -> ObjectInfo:
        """Size and version of the object at `url`.

        Raises:
            SourceFileNotFoundError: no such object, or no such bucket (said which).
            ObjectStoragePermissionError: the credentials may not read it.
        """
        obstore = require_obstore("chute")
        request = Request("HEAD", str(url))
        try:
            meta = with_retries(
                lambda: obstore.head(self.store(url), url.key), request, self.options
            )
        except SourceFileNotFoundError:
            self.check_bucket(url)
            raise
        return ObjectInfo(str(url), int(meta["size"]), meta.get("e_tag"))

    def check_bucket(self, url: ObjectUrl) -> None:
        """Raises a clear error if `url`'s bucket does not exist (or cannot be listed)."""
        obstore = require_obstore("chute")
        from obstore.exceptions import InvalidPathError

        request = Request("LIST", f"{url.scheme}://{url.bucket}/")

        def first() -> None:
            try:
                next(iter(obstore.list(self.store(url), chunk_size=1)), None)
            except InvalidPathError:
                pass  # A key chute cannot address: the bucket exists.

        try:
            with_retries(first, request, self.options)
        except SourceFileNotFoundError as error:
            raise SourceFileNotFoundError(
                f"the bucket {url.bucket!r} of {url} does not exist (or this endpoint does "
                "not serve it); check the URL and, for a local or other S3-compatible "
                "server, the endpoint (AWS_ENDPOINT_URL / STORAGE_EMULATOR_HOST)."
            ) from error

    def list_objects(self, prefix: ObjectUrl) -> list[ObjectInfo]:
        """The objects under the folder `prefix.key`, sorted by key (see `listing`)."""
        return self.listing(prefix)[0]

    def listing(self, prefix: ObjectUrl) -> tuple[list[ObjectInfo], list[str]]:
        """The objects under the folder `prefix.key`, sorted, and the keys left out.

        `prefix.key` names a folder, with or without its final `/`. Keys chute cannot
        address (with a `..`, `.` or empty segment, see `_keys`) are left out, returned
        second, and do not stop the listing (see `_listing` for its one limit).

        Raises:
            SourceFileNotFoundError: no such bucket (named).
            ObjectStorageError: the listing cannot be completed (said why): a key with
                a control character, for one.
        """
        require_obstore("chute")
        folder = prefix.key if not prefix.key or prefix.key.endswith("/") else prefix.key + "/"
        bucket = str(prefix.child("")).rstrip("/")
        try:
            found = list_folder(StorePages(self.store(prefix), bucket, self.options), folder)
        except SourceFileNotFoundError:
            self.check_bucket(prefix)
            raise
        infos = [
            ObjectInfo(str(prefix.child(meta["path"])), int(meta["size"]), meta.get("e_tag"))
            for meta in found.objects
        ]
        return sorted(infos, key=lambda info: info.url), found.skipped

    def _get(self, info: ObjectInfo, start: int, end: int) -> Any:
        obstore = require_obstore("chute")
        location = info.location
        options: dict[str, Any] = {"range": (start, end)}
        if info.version is not None:
            options["if_match"] = info.version
        result = obstore.get(self.store(location), location.key, options=options)
        data = result.bytes()
        COUNTERS.add(STORAGE_BYTES, len(data))
        if len(data) != end - start:
            raise ConnectionError(
                f"short read: {len(data)} bytes of {end - start} (connection cut)"
            )
        return data

    def read(self, info: ObjectInfo, start: int, end: int) -> memoryview:
        """Bytes `[start, end)` of the object, of exactly the version `info` names.

        Raises:
            ObjectChangedError: the object was replaced since `info` was taken.
            ObjectStorageReadError: transient failures outlasted the attempts.
        """
        if not 0 <= start <= end <= info.size:
            raise ValueError(f"{info.url}: bytes [{start}, {end}) outside [0, {info.size}).")
        if start == end:
            return memoryview(b"")
        request = Request("GET", info.url, (start, end))
        return memoryview(with_retries(lambda: self._get(info, start, end), request, self.options))

    def read_ranges(self, info: ObjectInfo, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """Several byte ranges of one object, fetched concurrently."""
        if len(ranges) <= 1:
            return [self.read(info, start, end) for start, end in ranges]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(16, len(ranges))) as pool:
            return list(pool.map(lambda r: self.read(info, r[0], r[1]), ranges))

    def download(self, info: ObjectInfo, file: Any) -> None:
        """Writes the whole object into the open binary file `file`, resuming on failures.

        A transient failure mid-body continues from the bytes already written (of the
        same version), so a large shard is not fetched again from the start.
        """
        obstore = require_obstore("chute")
        location = info.location
        written = 0
        attempts = 0

        def rest() -> None:
            nonlocal written, attempts
            attempts += 1
            options: dict[str, Any] = {}
            if written:
                options["range"] = (written, info.size)
            if info.version is not None:
                options["if_match"] = info.version
            result = obstore.get(self.store(location), location.key, options=options)
            for piece in result.stream(min_chunk_size=_CHUNK):
                file.write(piece)
                written += len(piece)
                COUNTERS.add(STORAGE_BYTES, len(piece))
            if written != info.size:
                raise ConnectionError(f"short body: {written} of {info.size} bytes")

        if info.size == 0:
            return
        with_retries(rest, Request("GET", info.url, (0, info.size)), self.options)

    def put(self, url: ObjectUrl, data: bytes | memoryview) -> None:
        """Writes `data` as the object at `url` (replacing it)."""
        obstore = require_obstore("chute")
        with_retries(
            lambda: obstore.put(self.store(url), url.key, data),
            Request("PUT", str(url)),
            self.options,
        )

    def delete(self, url: ObjectUrl) -> None:
        """Deletes the object at `url` (no error if it is missing)."""
        obstore = require_obstore("chute")
        request = Request("DELETE", str(url))
        try:
            with_retries(lambda: obstore.delete(self.store(url), url.key), request, self.options)
        except SourceFileNotFoundError:
            pass


_CLIENTS: dict[tuple[int, StorageOptions], ObjectClient] = {}
_CLIENTS_LOCK = threading.Lock()
_FORKED_AFTER_USE = False


def _after_fork_in_child() -> None:
    global _FORKED_AFTER_USE
    _FORKED_AFTER_USE = _FORKED_AFTER_USE or bool(_CLIENTS)
    _CLIENTS.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def client_for(options: StorageOptions) -> ObjectClient:
    """This process's client for `options` (a worker makes its own).

    Raises:
        ObjectStorageError: this process was forked (`os.fork`, or multiprocessing's
            "fork" start method) from one that had already used a bucket: obstore's
            runtime does not survive a fork, and a request would hang forever.
    """
    if _FORKED_AFTER_USE:
        raise ObjectStorageError(
            "chute: this process was forked from one that had already read from a bucket, "
            "and the object-storage client cannot work after fork (its requests would hang). "
            "Start worker processes with the 'spawn' or 'forkserver' start method (chute's "
            "own workers do), or fork before the first bucket read."
        )
    key = (os.getpid(), options)
    client = _CLIENTS.get(key)
    if client is None:
        with _CLIENTS_LOCK:
            client = _CLIENTS.setdefault(key, ObjectClient(options))
    return client


def translate_error(error: BaseException, url: str) -> Exception:
    """`translate` for callers outside this module (a failed request to `url`)."""
    if isinstance(error, ObjectStorageError | SourceFileNotFoundError):
        return error
    return translate(error, Request("GET", url))
