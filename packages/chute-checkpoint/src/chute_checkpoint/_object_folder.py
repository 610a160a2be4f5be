"""Checkpoint folders in buckets (`s3://...`, `gs://...`), as `_elastic` uses folders.

A folder in a bucket is a key prefix: `s3://bucket/run/step_100` holds the objects
`s3://bucket/run/step_100/process_0-of-2.json`, ... Each state file is one object,
written by one request: object stores show an object whole or not at all, never half
written, so no temporary name is needed. `ObjectFolder` and `ObjectFile` offer the few
`pathlib.Path` methods that finding a state uses, through `chute_sources`' object API.

A missing bucket is an error of its own (`SourceFileNotFoundError` naming the bucket),
not "no checkpoint yet": a misspelt bucket must not start a training run afresh.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from chute_core import SourceFileNotFoundError
from chute_sources import StorageOptions, list_objects, object_info, read_object

from ._errors import CheckpointNotFoundError

__all__ = ["ObjectFile", "ObjectFolder", "read_url"]


def _check_bucket(url: str, options: StorageOptions | None) -> None:
    """Raises `SourceFileNotFoundError` naming the bucket if `url`'s does not exist."""
    list_objects(url, options)  # A listing of a missing bucket says which bucket.


def read_url(url: str, options: StorageOptions | None) -> bytes:
    """The object at `url`.

    Raises:
        CheckpointNotFoundError: no such object.
        SourceFileNotFoundError: no such bucket (named).

    Example:
        >>> from chute_sources import StorageOptions
        >>> OFFLINE = StorageOptions(endpoint="http://127.0.0.1:9", max_attempts=1, anonymous=True)
        >>> try:
        ...     read_url("s3://bucket/run/process_0-of-1.json", OFFLINE)
        ... except OSError as error:
        ...     print(type(error).__name__)
        ObjectStorageReadError
    """
    try:
        return read_object(url, options)
    except SourceFileNotFoundError as error:
        _check_bucket(url, options)
        raise CheckpointNotFoundError(f"no checkpoint file at {url}.") from error


class ObjectFile:
    """An object, with the `pathlib.Path` methods that reading a state uses.

    Example:
        >>> ObjectFile("gs://bucket/run/process_0-of-1.json", None).name
        'process_0-of-1.json'
    """

    def __init__(self, url: str, options: StorageOptions | None) -> None:
        self.url = url
        self.options = options

    @property
    def name(self) -> str:
        """The object's name: the last part of its key."""
        return self.url.rsplit("/", 1)[-1]

    def __fspath__(self) -> str:
        return self.url

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"ObjectFile({self.url!r})"

    def exists(self) -> bool:
        """Whether the object exists (a missing bucket raises, naming it)."""
        try:
            object_info(self.url, self.options)
        except SourceFileNotFoundError:
            _check_bucket(self.url, self.options)
            return False
        return True

    def read_bytes(self) -> bytes:
        """The object's bytes (`CheckpointNotFoundError` if it is gone)."""
        return read_url(self.url, self.options)


class ObjectFolder:
    """A key prefix as a folder: `folder / name`, `glob`, `is_dir`.

    Example:
        >>> folder = ObjectFolder("s3://bucket/run/step_100/", None)
        >>> str(folder), (folder / "process_0-of-1.json").url
        ('s3://bucket/run/step_100', 's3://bucket/run/step_100/process_0-of-1.json')
    """

    def __init__(self, url: str, options: StorageOptions | None) -> None:
        self.url = url.rstrip("/")
        self.options = options

    def __truediv__(self, name: str) -> ObjectFile:
        return ObjectFile(f"{self.url}/{name}", self.options)

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"ObjectFolder({self.url!r})"

    def _children(self) -> list[Any]:
        prefix = self.url + "/"
        listed = list_objects(prefix, self.options)
        return [info for info in listed if "/" not in info.url[len(prefix) :]]

    def glob(self, pattern: str) -> list[ObjectFile]:
        """The objects directly in the folder whose names match `pattern`, sorted."""
        return [
            ObjectFile(info.url, self.options)
            for info in self._children()
            if fnmatch.fnmatchcase(info.url.rsplit("/", 1)[-1], pattern)
        ]

    def is_dir(self) -> bool:
        """Whether any object lies under the prefix (a missing bucket raises, naming it)."""
        return bool(list_objects(self.url + "/", self.options))
