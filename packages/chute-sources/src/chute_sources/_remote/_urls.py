"""Object URLs (`s3://bucket/key`, `gs://bucket/key`) and telling them from local paths."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from chute_core import InvalidArgumentError

from ._keys import key_problem

__all__ = ["ObjectUrl", "is_object_url", "local_path", "parse_object_url"]

SCHEMES = ("s3", "gs")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# Bucket names of both clouds: 3-63 (GCS: up to 222 with dots) lower-case letters,
# digits, dots, dashes and (GCS) underscores.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,221}[a-z0-9]$")


@dataclasses.dataclass(frozen=True, order=True)
class ObjectUrl:
    """One object (or a key prefix) in a bucket.

    Attributes:
        scheme: `"s3"` or `"gs"`.
        bucket: the bucket's name.
        key: the object's key (may be empty or a prefix for a listing).

    Example:
        >>> url = parse_object_url("s3://my-bucket/data/train-0.parquet")
        >>> url.bucket, url.key, str(url)
        ('my-bucket', 'data/train-0.parquet', 's3://my-bucket/data/train-0.parquet')
    """

    scheme: str
    bucket: str
    key: str

    def __str__(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.key}"

    def child(self, key: str) -> ObjectUrl:
        """The URL of `key` in the same bucket."""
        return ObjectUrl(self.scheme, self.bucket, key)

    @property
    def name(self) -> str:
        """The last part of the key (the object's file name)."""
        return self.key.rsplit("/", 1)[-1]


def _scheme_of(text: str) -> str | None:
    match = _SCHEME.match(text)
    return None if match is None else match.group(1).lower()


def is_object_url(path: Any) -> bool:
    """Whether `path` is an `s3://` or `gs://` URL (not a local path, not `file://`).

    Example:
        >>> is_object_url("gs://b/k"), is_object_url("file:///tmp/x"), is_object_url("/tmp")
        (True, False, False)
    """
    return isinstance(path, str) and _scheme_of(path) in SCHEMES


def local_path(path: str, owner: str) -> str:
    """`path` with a `file://` prefix removed; any other URL scheme is a clear error.

    Example:
        >>> local_path("file:///tmp/data.parquet", "ParquetSource")
        '/tmp/data.parquet'
    """
    scheme = _scheme_of(path)
    if scheme is None or len(scheme) == 1:  # A Windows drive letter is not a scheme.
        return path
    if scheme == "file":
        rest = path[len("file://") :]
        if rest and not rest.startswith("/"):
            raise InvalidArgumentError(
                f"{owner}: {path!r} is not a local file URL (write file:///absolute/path)."
            )
        return rest
    if scheme in SCHEMES:  # pragma: no cover - callers check is_object_url first
        return path
    raise InvalidArgumentError(
        f"{owner}: {path!r} uses the scheme {scheme}://, which chute does not read; use "
        "s3://bucket/key, gs://bucket/key, file:///path or a local path."
    )


def parse_object_url(text: str, owner: str = "chute") -> ObjectUrl:
    """Parses `s3://bucket/key` or `gs://bucket/key`.

    Raises:
        InvalidArgumentError: not such a URL, its bucket name is not a valid one, or its
            key has a segment `.`, `..` or empty, or a control character.

    Example:
        >>> parse_object_url("gs://bucket/a/b.npy")
        ObjectUrl(scheme='gs', bucket='bucket', key='a/b.npy')
    """
    scheme = _scheme_of(text) if isinstance(text, str) else None
    if scheme not in SCHEMES:
        raise InvalidArgumentError(
            f"{owner}: {text!r} is not an object URL (s3://bucket/key or gs://bucket/key)."
        )
    rest = text[len(scheme) + 3 :]
    bucket, _, key = rest.partition("/")
    if not _BUCKET.match(bucket):
        raise InvalidArgumentError(
            f"{owner}: {text!r} has no valid bucket name ({bucket!r}); write "
            f"{scheme}://bucket-name/path/to/object."
        )
    if "//" in key:
        raise InvalidArgumentError(f"{owner}: {text!r} has an empty path segment ('//').")
    problem = key_problem(key)
    if problem is not None:
        raise InvalidArgumentError(
            f"{owner}: {text!r} names a key with {problem}, which chute cannot address "
            "(object stores accept such keys, but obstore refuses them, and a path tool "
            "would read another object); rename the object, or name the objects beside it."
        )
    return ObjectUrl(scheme, bucket, key)
