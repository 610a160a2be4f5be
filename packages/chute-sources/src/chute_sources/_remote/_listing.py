"""Listing a folder of a bucket that holds keys chute cannot address.

obstore fails a whole listing page (up to 1,000 keys) that holds a key it cannot name,
such as `run/../x` (see `_keys`). `list_folder` lists on past such a key from an offset
(`skip_offset`), and gets back what the failed page held before it by listing the
folders on the way down to the key's own folder one level at a time: a level listing
of `data/` does not fail on `data/sub/../x`, whose only trace there is `data/sub/`.

What no request through obstore can give back: the objects directly in the key's own
folder that the failed page held before it, that is whose names sort before the bad
one. Before a `.`, `..` or empty segment those are names beginning with one of
`` !"#$%&'()*+,-`` (or, before an empty segment, `.`); they are left out and the bad
key is reported in `Listing.skipped`. Before a control character any name may sort, so
meeting such a key is an error that names it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

from chute_core import ObjectStorageError, SourceFileNotFoundError
from chute_core.internal import COUNTERS, STORAGE_REQUESTS

from ._keys import key_problem, keys_in_error, problem_folder, problem_kind, skip_offset
from ._options import StorageOptions
from ._retry import Request, with_retries

__all__ = ["Listing", "Pages", "StorePages", "list_folder"]

Meta = Mapping[str, Any]
"""obstore's record of an object: its "path" (the key), "size", "e_tag", ..."""

_PAGE = 1000  # Objects per chunk of a listing stream (servers send 1,000 per page).


class Pages(Protocol):
    """The three requests `list_folder` makes of a bucket."""

    def flat(self, folder: str, offset: str | None) -> tuple[list[Meta], str | None]:
        """Objects under `folder` after `offset`, in key order, and where they stop.

        `(objects, key)`: the objects up to the first page holding the unaddressable
        `key`; `(objects, None)` if none holds one.
        """

    def level(self, folder: str) -> tuple[list[Meta], list[str]] | None:
        """The objects directly in `folder` and its sub-folders (ending in `/`).

        None if an unaddressable key is among them.
        """

    def head(self, key: str) -> Meta | None:
        """The object `key`, or None if there is none."""

    def url(self, key: str) -> str:
        """`key`'s URL, for messages."""


@dataclasses.dataclass(frozen=True)
class Listing:
    """The objects of a folder, and the unaddressable keys met there (left out).

    Example:
        >>> Listing([{"path": "run/a", "size": 1}], ["run/.."]).skipped
        ['run/..']
    """

    objects: list[Meta]
    skipped: list[str]


def list_folder(pages: Pages, folder: str, offset: str | None = None) -> Listing:
    """Every addressable object under `folder` (after `offset`), in key order.

    Raises:
        ObjectStorageError: an unaddressable key with a control character, or another
            one on the way down to an unaddressable key's folder, hides objects that no
            listing can reach.
    """
    found: list[Meta] = []
    skipped: list[str] = []
    while True:
        metas, bad = pages.flat(folder, offset)
        found += metas
        if bad is None:
            return Listing(found, skipped)
        skipped.append(bad)
        last = metas[-1]["path"] if metas else offset
        found += _before(pages, folder, last, bad, skipped)
        offset = skip_offset(bad)
        boundary = pages.head(offset)  # The one key the listing from `offset` misses.
        if boundary is not None:
            found.append(boundary)


def _before(
    pages: Pages, folder: str, last: str | None, bad: str, skipped: list[str]
) -> list[Meta]:
    """The objects under `folder` after `last` and before `bad`, found level by level."""
    if problem_kind(bad) == "control":  # Any name may sort before it, in its page.
        raise ObjectStorageError(
            f"{pages.url(bad)} has {key_problem(bad)}, which chute cannot address, and a "
            f"listing of {pages.url(folder)} that meets it loses the objects beside it "
            "(obstore refuses the whole page); rename or delete that object."
        )
    found: list[Meta] = []
    target = problem_folder(bad)
    level = folder
    while level != target:
        child = target[: target.index("/", len(level)) + 1]
        listed = pages.level(level)
        if listed is None:
            raise ObjectStorageError(
                f"{pages.url(bad)} has {key_problem(bad)}, which chute cannot address, and "
                f"{pages.url(level)} holds another such key directly: the objects listed "
                "beside the first cannot be found (obstore refuses every listing page "
                "that holds such a key, and a page holds up to 1,000); rename or delete "
                "those objects."
            )
        objects, subfolders = listed
        found += [m for m in objects if (last is None or m["path"] > last) and m["path"] < bad]
        for sub in subfolders:
            if sub >= child or (last is not None and last > sub and not last.startswith(sub)):
                continue  # After `bad`, the way down, or listed before `last`.
            after = last if last is not None and last.startswith(sub) else None
            listing = list_folder(pages, sub, after)
            found += listing.objects
            skipped += listing.skipped
        level = child
    found.sort(key=lambda meta: str(meta["path"]))
    return found


class StorePages:
    """`Pages` of one bucket through obstore, each request retried as configured.

    Example:
        >>> StorePages(None, "s3://bucket", StorageOptions()).url("run/x")
        's3://bucket/run/x'
    """

    def __init__(self, store: Any, bucket_url: str, options: StorageOptions) -> None:
        self.store, self.bucket_url, self.options = store, bucket_url, options

    def url(self, key: str) -> str:
        """`key`'s URL."""
        return f"{self.bucket_url}/{key}"

    def flat(self, folder: str, offset: str | None) -> tuple[list[Meta], str | None]:
        """See `Pages.flat`."""
        import obstore
        from obstore.exceptions import InvalidPathError

        metas: list[Meta] = []

        def attempt() -> str | None:
            metas.clear()
            stream = obstore.list(
                self.store, prefix=folder or None, offset=offset, chunk_size=_PAGE
            )
            pages, failed = 0, True  # A chunk of `_PAGE` objects is a page, one request.
            try:
                for chunk in stream:
                    pages += 1
                    metas.extend(chunk)
                failed = False
            except InvalidPathError as error:
                return self._bad_key(error, folder, offset)
            finally:
                _more_pages(pages + failed)  # A page that failed was a request too.
            return None

        bad = with_retries(attempt, Request("LIST", self.url(folder)), self.options)
        return metas, bad

    def _bad_key(self, error: Exception, folder: str, offset: str | None) -> str:
        """The unaddressable key `error` names (after `offset`), or `error` itself."""
        for key in keys_in_error(str(error)):
            if (
                key_problem(key) is not None
                and key.startswith(folder)
                and (offset is None or key > offset)
            ):
                return key
        raise error

    def level(self, folder: str) -> tuple[list[Meta], list[str]] | None:
        """See `Pages.level`."""
        import obstore
        from obstore.exceptions import InvalidPathError

        def attempt() -> Any:
            try:
                return obstore.list_with_delimiter(self.store, prefix=folder or None)
            except InvalidPathError:
                return None

        result = with_retries(attempt, Request("LIST", self.url(folder)), self.options)
        if result is None:
            return None
        # obstore gathers every page: objects and sub-folders count toward a page's 1,000.
        _more_pages(-(-(len(result["objects"]) + len(result["common_prefixes"])) // _PAGE))
        return list(result["objects"]), [f"{p}/" for p in result["common_prefixes"]]

    def head(self, key: str) -> Meta | None:
        """See `Pages.head`."""
        import obstore

        try:
            meta: Meta = with_retries(
                lambda: obstore.head(self.store, key), Request("HEAD", self.url(key)), self.options
            )
        except SourceFileNotFoundError:
            return None
        return meta


def _more_pages(pages: int) -> None:
    """Counts the requests of a listing of `pages` pages beyond the first (`with_retries`'s)."""
    if pages > 1:
        COUNTERS.add(STORAGE_REQUESTS, pages - 1, op="list")
