"""Inputs and outputs of `chute convert` and `chute inspect` in buckets (`s3://`, `gs://`).

Through `chute_sources`' object API (credentials and endpoints from the environment:
`AWS_*` for S3, `GOOGLE_APPLICATION_CREDENTIALS` / `STORAGE_EMULATOR_HOST` for GCS).
A URL ending in `/` is a folder (a key prefix); a URL with `*`, `?` or `[` a pattern.
"""

from __future__ import annotations

import fnmatch
import mmap
import os
from collections.abc import Sequence
from typing import Any

from chute_core import SourceFileNotFoundError
from chute_sources import is_object_url, list_objects, object_info, write_object

from ._common import usage_error

__all__ = [
    "GLOB_CHARS",
    "existing",
    "file_bytes",
    "file_stamp",
    "parent_url",
    "strip_file_scheme",
    "upload",
    "url_matches",
    "url_names",
]

GLOB_CHARS = ("*", "?", "[")


def strip_file_scheme(path: str) -> str:
    """`file:///a/b` as the path `/a/b`; anything else as it is.

    Example:
        >>> strip_file_scheme("file:///data/train.parquet"), strip_file_scheme("s3://b/k")
        ('/data/train.parquet', 's3://b/k')
    """
    return path[len("file://") :] if path.startswith("file:///") else path


def parent_url(url: str) -> str:
    """The folder of `url`, ending in `/`.

    Example:
        >>> parent_url("s3://bucket/out/train.array_record")
        's3://bucket/out/'
    """
    return url.rsplit("/", 1)[0] + "/"


def url_matches(pattern: str) -> list[str]:
    """The objects a URL glob pattern matches, sorted (`*` may cross `/` here).

    Example:
        >>> url_matches("s3://bucket/no-glob.parquet")
        ['s3://bucket/no-glob.parquet']
    """
    if not any(char in pattern for char in GLOB_CHARS):
        return [pattern]
    cut = min(pattern.find(char) for char in GLOB_CHARS if char in pattern)
    prefix = parent_url(pattern[:cut]) if "/" in pattern[:cut].split("://", 1)[1] else pattern
    return [info.url for info in _listed(prefix) if fnmatch.fnmatchcase(info.url, pattern)]


def url_names(url: str) -> list[str]:
    """The URLs of the objects under folder `url` (a missing bucket is a usage error)."""
    return [info.url for info in _listed(url.rstrip("/") + "/")]


def _listed(prefix: str) -> list[Any]:
    try:
        return list(list_objects(prefix))
    except SourceFileNotFoundError as error:
        usage_error(str(error))


def existing(paths: Sequence[str]) -> list[str]:
    """Which of `paths` (local paths or URLs of one folder) exist.

    Example:
        >>> existing(["/no/such/file"])
        []
    """
    if not paths or not is_object_url(paths[0]):
        return [path for path in paths if os.path.exists(path)]
    found = {info.url for info in _listed(parent_url(paths[0]))}
    return [path for path in paths if path in found]


def file_bytes(path: str) -> int:
    """The size of a local file or an object.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x")
        >>> with open(path, "wb") as file:
        ...     _ = file.write(b"abc")
        >>> file_bytes(path)
        3
    """
    return object_info(path).size if is_object_url(path) else os.path.getsize(path)


def file_stamp(path: str) -> str:
    """What tells a file's version: name, size and mtime, or URL, size and ETag.

    Example:
        >>> file_stamp("/no/such/file")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        FileNotFoundError: ...
    """
    if is_object_url(path):
        info = object_info(path)
        return f"{info.url}\0{info.size}\0{info.version}"
    stat = os.stat(path)
    return f"{os.path.abspath(path)}\0{stat.st_size}\0{stat.st_mtime_ns}"


def upload(local: str, url: str) -> None:
    """Uploads the file `local` as the object `url` (whole or not at all), mapped."""
    with open(local, "rb") as file:
        if os.fstat(file.fileno()).st_size == 0:
            write_object(url, b"")
            return
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                write_object(url, view)
            finally:
                view.release()
