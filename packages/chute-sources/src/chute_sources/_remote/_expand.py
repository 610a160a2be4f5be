"""Expanding object URLs, URL glob patterns and URL "folders" into objects."""

from __future__ import annotations

import re

from chute_core import SourceFileNotFoundError

from ._client import ObjectInfo, client_for
from ._keys import key_problem
from ._options import StorageOptions
from ._urls import ObjectUrl, parse_object_url

__all__ = ["expand_url", "glob_regex"]

_GLOB_CHARS = ("*", "?", "[")


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a key glob: `*` and `?` stay inside a folder, `**` crosses folders.

    Example:
        >>> bool(glob_regex("data/*.parquet").match("data/a.parquet"))
        True
        >>> bool(glob_regex("data/*.parquet").match("data/x/a.parquet"))
        False
        >>> bool(glob_regex("data/**/*.parquet").match("data/x/y/a.parquet"))
        True
    """
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            close = pattern.find("]", i + 2)
            if close == -1:
                out.append(re.escape(char))
            else:
                body = pattern[i + 1 : close].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = close
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out) + r"\Z")


def expand_url(
    text: str, what: str, suffixes: tuple[str, ...], owner: str, options: StorageOptions
) -> list[ObjectInfo]:
    """The objects an `s3://` / `gs://` entry names: an object, a glob, or a folder.

    A folder is a URL ending in `/`, or a key under which objects exist but which is
    not itself an object; its objects whose names contain one of `suffixes` are
    taken (sorted). Glob matches are sorted by URL. Keys chute cannot address (a
    `..`, `.` or empty segment) are never matched: a listing leaves them out.

    Raises:
        SourceFileNotFoundError: nothing matches (or the bucket does not exist); names
            a key left out of the listing, if any.
        InvalidArgumentError: `text` itself names a key chute cannot address.
    """
    url = parse_object_url(text, owner)
    client = client_for(options)
    if any(char in url.key for char in _GLOB_CHARS):
        cut = min(url.key.find(c) for c in _GLOB_CHARS if c in url.key)
        prefix = url.key[:cut].rpartition("/")[0]
        regex = glob_regex(url.key)
        listed, skipped = client.listing(url.child(prefix + "/" if prefix else ""))
        found = [info for info in listed if regex.match(parse_object_url(info.url).key)]
        if not found:
            raise SourceFileNotFoundError(
                f"{owner}: the pattern {text!r} matches no {what} object; check the bucket, "
                f"the prefix and the file extension.{_left_out(url, skipped)}"
            )
        return found
    if url.key and not url.key.endswith("/"):
        try:
            return [client.stat(url)]
        except SourceFileNotFoundError as error:
            listed, skipped = client.listing(url.child(url.key + "/"))
            folder = _folder(listed, url, suffixes)
            if folder:
                return folder
            if skipped:
                raise SourceFileNotFoundError(
                    f"{owner}: {text!r} does not exist.{_left_out(url, skipped)}"
                ) from error
            raise
    listed, skipped = client.listing(url)
    folder = _folder(listed, url, suffixes)
    if not folder:
        raise SourceFileNotFoundError(
            f"{owner}: {text!r} holds no {what} object (no name contains "
            f"{' or '.join(suffixes)}); pass the objects or a pattern such as "
            f"{text.rstrip('/') + '/*' + suffixes[0]!r}.{_left_out(url, skipped)}"
        )
    return folder


def _left_out(url: ObjectUrl, skipped: list[str]) -> str:
    """A note on the keys a listing left out, for a message ("" if none)."""
    if not skipped:
        return ""
    return (
        f" Left out, as keys chute cannot address: {url.child(skipped[0])}"
        f" ({key_problem(skipped[0])})"
        + (f" and {len(skipped) - 1} more" if len(skipped) > 1 else "")
        + "; rename such objects to read them."
    )


def _folder(
    listed: list[ObjectInfo], base: ObjectUrl, suffixes: tuple[str, ...]
) -> list[ObjectInfo]:
    """The objects directly in folder `base` whose names contain one of `suffixes`."""
    prefix = base.key if base.key.endswith("/") or not base.key else base.key + "/"
    found = []
    for info in listed:
        rest = parse_object_url(info.url).key[len(prefix) :]
        if "/" not in rest and any(s in rest for s in suffixes):
            found.append(info)
    return found
