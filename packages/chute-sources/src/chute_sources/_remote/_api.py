"""Whole-object reads and writes by URL, for the layers above (checkpoints, the CLI)."""

from __future__ import annotations

import os

from ._client import ObjectInfo, client_for
from ._options import StorageOptions
from ._urls import is_object_url, parse_object_url

__all__ = ["delete_object", "list_objects", "object_info", "read_object", "write_object"]


def _options(options: StorageOptions | None) -> StorageOptions:
    return options if options is not None else StorageOptions()


def object_info(url: str, options: StorageOptions | None = None) -> ObjectInfo:
    """Size and version (ETag) of the object at `url` (`s3://...` or `gs://...`).

    Raises:
        SourceFileNotFoundError: no such object or bucket.

    Example:
        >>> OFFLINE = StorageOptions(endpoint="http://127.0.0.1:9", anonymous=True, max_attempts=1)
        >>> try:
        ...     object_info("s3://bucket/key", OFFLINE)
        ... except OSError as error:
        ...     print(type(error).__name__)
        ObjectStorageReadError
    """
    return client_for(_options(options)).stat(parse_object_url(url))


def read_object(url: str | os.PathLike[str], options: StorageOptions | None = None) -> bytes:
    """The bytes of the object at `url`, or of the local file if `url` is a path.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.bin")
        >>> write_object(path, b"abc")
        >>> read_object(path)
        b'abc'
    """
    if not is_object_url(url):
        with open(os.fspath(url), "rb") as file:
            return file.read()
    assert isinstance(url, str)
    info = object_info(url, options)
    return bytes(client_for(_options(options)).read(info, 0, info.size))


def write_object(
    url: str | os.PathLike[str], data: bytes | memoryview, options: StorageOptions | None = None
) -> None:
    """Writes `data` as the object at `url` (replacing it), or as a local file.

    An object appears whole or not at all (object stores never show a partial
    upload; a large one is uploaded in parts, which appear together); a local file is
    written to a temporary name and renamed into place. `data` may be a memoryview,
    e.g. of a memory-mapped file, to upload a file without reading it into memory.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "state.json")
        >>> write_object(path, b"{}")
        >>> os.path.getsize(path)
        2
    """
    if not is_object_url(url):
        path = os.fspath(url)
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
        return
    assert isinstance(url, str)
    client_for(_options(options)).put(parse_object_url(url), data)


def list_objects(prefix: str, options: StorageOptions | None = None) -> list[ObjectInfo]:
    """The objects under the folder `prefix` (an `s3://` / `gs://` URL), sorted.

    `prefix` names a folder, with or without its final `/`. Objects whose keys chute
    cannot address (with a `..`, `.` or empty segment) are left out, and do not stop
    the listing.

    Raises:
        InvalidArgumentError: `prefix` itself has such a segment.
        ObjectStorageError: the listing cannot be completed (said why), e.g. a key
            holds a control character.

    Example:
        >>> OFFLINE = StorageOptions(endpoint="http://127.0.0.1:9", anonymous=True, max_attempts=1)
        >>> try:
        ...     list_objects("gs://bucket/data/", OFFLINE)
        ... except OSError as error:
        ...     print(type(error).__name__)
        ObjectStorageReadError
    """
    return client_for(_options(options)).list_objects(parse_object_url(prefix))


def delete_object(url: str, options: StorageOptions | None = None) -> None:
    """Deletes the object at `url`; no error if it does not exist.

    Example:
        >>> OFFLINE = StorageOptions(endpoint="http://127.0.0.1:9", anonymous=True, max_attempts=1)
        >>> try:
        ...     delete_object("s3://bucket/key", OFFLINE)
        ... except OSError as error:
        ...     print(type(error).__name__)
        ObjectStorageReadError
    """
    client_for(_options(options)).delete(parse_object_url(url))
