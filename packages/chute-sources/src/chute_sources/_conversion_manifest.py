"""Whether a set of ArrayRecord shards is a finished `chute convert`: its manifest says.

`chute convert` writes `<stem>.chute-convert.json` next to the shards it writes
(`<stem>-00000-of-00004.array_record`, or `<stem>.array_record` for one shard) and sets
`"complete": true` in it only once every shard is written and verified. A conversion
that was killed or failed leaves `"complete": false` and only some of the shards, which
read like a whole, smaller data set. `ArrayRecordSource` and `chute inspect` ask this
module before reading: one `stat` per distinct stem (nearly always one), and a read of
the small manifest only where there is one.

Local shards are checked by `ArrayRecordSource`; shards in a bucket only by
`chute inspect` (`buckets=True`: one or two requests), so that opening a source of
objects costs no request more than before.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from collections.abc import Iterable
from typing import Any

from chute_core import SourceFileError, SourceFileNotFoundError

from ._remote._api import read_object
from ._remote._urls import is_object_url

__all__ = [
    "MANIFEST_SUFFIX",
    "MANIFEST_VERSION",
    "IncompleteShardsWarning",
    "UnfinishedConversion",
    "check_conversions_finished",
    "manifest_of",
    "unfinished_conversions",
]

MANIFEST_VERSION = 1
"""The version of the manifest's format."""
MANIFEST_SUFFIX = ".chute-convert.json"
"""Appended to the output stem of `chute convert` to name its manifest."""

_MAX_MANIFEST_BYTES = 64 * 2**20
"""A larger file is no manifest chute wrote (10,000 shards take about 1 MiB)."""
_SHARD = re.compile(r"-\d{5,}-of-\d{5,}\.array_record$")


class IncompleteShardsWarning(UserWarning):
    """Shards read with `allow_incomplete=True` although their conversion did not finish.

    Example:
        >>> issubclass(IncompleteShardsWarning, UserWarning)
        True
    """


@dataclasses.dataclass(frozen=True)
class UnfinishedConversion:
    """A manifest of `chute convert` that does not say the conversion is complete.

    Attributes:
        manifest: the manifest's path (or URL).
        shards_done: shards the manifest lists as written.
        shards_total: shards the conversion writes (None: the manifest does not say).
        records_done: records in the written shards.
        records_total: records the conversion writes (None: the manifest does not say).
        source: the input the conversion reads (None: the manifest does not say).
        problem: why the manifest could not be read, if it could not.

    Example:
        >>> unfinished = UnfinishedConversion("out/t.chute-convert.json", 1, 4, 250, 1000)
        >>> unfinished.describe().split(": ")[-1]
        '1 of 4 shards written (250 of 1,000 records)'
    """

    manifest: str
    shards_done: int = 0
    shards_total: int | None = None
    records_done: int = 0
    records_total: int | None = None
    source: str | None = None
    problem: str | None = None

    def describe(self) -> str:
        """What the manifest says, as a clause for a message (see the class example)."""
        if self.problem is not None:
            return (
                f"its manifest {self.manifest!r} cannot be read ({self.problem}), so nothing "
                "says the conversion finished"
            )
        shards = f"{self.shards_done:,}" + (
            f" of {self.shards_total:,}" if self.shards_total is not None else ""
        )
        records = f"{self.records_done:,}" + (
            f" of {self.records_total:,}" if self.records_total is not None else ""
        )
        said = f"its manifest {self.manifest!r} says the conversion is not complete: "
        if self.shards_total is not None and self.shards_done >= self.shards_total:
            total = self.shards_total
            return said + f"all {total:,} shards written ({records} records), not verified"
        count = self.shards_total if self.shards_total is not None else self.shards_done
        return said + f"{shards} shard{'' if count == 1 else 's'} written ({records} records)"

    def message(self, what: str, allow: str) -> str:
        """The whole error: `what` was refused, why, and how to finish or to `allow` it.

        Example:
            >>> unfinished = UnfinishedConversion("t.chute-convert.json", 1, 2, 5, 10, "a.npy")
            >>> print(unfinished.message("the shards", "pass allow_incomplete=True"))
            ... # doctest: +NORMALIZE_WHITESPACE
            the shards are the output of an unfinished chute convert: its manifest
            't.chute-convert.json' says the conversion is not complete: 1 of 2 shards
            written (5 of 10 records). Finish it by running the same chute convert command
            again (of 'a.npy'; it resumes, keeping the finished shards), or pass
            allow_incomplete=True to read the shards that are there.
        """
        of = f"of {self.source!r}; " if self.source else ""
        return (
            f"{what} are the output of an unfinished chute convert: {self.describe()}. Finish "
            f"it by running the same chute convert command again ({of}it resumes, keeping the "
            f"finished shards), or {allow} to read the shards that are there."
        )


def manifest_of(shard: str) -> str | None:
    """The manifest `chute convert` would write beside `shard`, or None for other names.

    Example:
        >>> manifest_of("out/train-00002-of-00004.array_record")
        'out/train.chute-convert.json'
        >>> manifest_of("out/train.array_record"), manifest_of("train.tfrecord")
        ('out/train.chute-convert.json', None)
    """
    match = _SHARD.search(shard)
    if match is not None:
        return shard[: match.start()] + MANIFEST_SUFFIX
    if shard.endswith(".array_record"):
        return shard.removesuffix(".array_record") + MANIFEST_SUFFIX
    return None


def unfinished_conversions(
    files: Iterable[str], *, buckets: bool = False
) -> list[UnfinishedConversion]:
    """The manifests beside `files` that do not say their conversion is complete.

    Local files cost one `stat` per distinct manifest name; objects in buckets (with
    `buckets=True`, else they are skipped) one or two requests.

    Example:
        >>> import json, os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> with open(os.path.join(folder, "t" + MANIFEST_SUFFIX), "w") as file:
        ...     json.dump({"version": 1, "complete": False, "shards": {}}, file)
        >>> shard = os.path.join(folder, "t.array_record")
        >>> [unfinished.shards_done for unfinished in unfinished_conversions([shard])]
        [0]
    """
    found: list[UnfinishedConversion] = []
    for manifest in dict.fromkeys(filter(None, map(manifest_of, files))):
        if is_object_url(manifest) and not buckets:
            continue
        unfinished = _read(manifest)
        if unfinished is not None:
            found.append(unfinished)
    return found


def check_conversions_finished(
    files: Iterable[str], *, allow_incomplete: bool, owner: str, buckets: bool = False
) -> list[UnfinishedConversion]:
    """Refuses (or, with `allow_incomplete`, warns about) shards of an unfinished conversion.

    Returns the unfinished conversions (empty when none), for a caller that reports them.

    Raises:
        SourceFileError: a manifest beside `files` does not say its conversion is
            complete, and `allow_incomplete` is False.

    Example:
        >>> check_conversions_finished(["x.array_record"], allow_incomplete=False, owner="me")
        []
    """
    unfinished = unfinished_conversions(files, buckets=buckets)
    if not unfinished:
        return unfinished
    first = unfinished[0]
    if not allow_incomplete:
        raise SourceFileError(
            f"{owner}: " + first.message("these shards", "pass allow_incomplete=True")
        )
    warnings.warn(
        f"{owner}: reading the shards of an unfinished chute convert (allow_incomplete=True): "
        f"{first.describe()}.",
        IncompleteShardsWarning,
        stacklevel=3,
    )
    return unfinished


def _read(manifest: str) -> UnfinishedConversion | None:
    """The manifest at `manifest` if it exists and is not complete, else None."""
    try:
        if is_object_url(manifest):
            data = read_object(manifest)
        else:
            size = os.stat(manifest).st_size
            if size > _MAX_MANIFEST_BYTES:
                return UnfinishedConversion(
                    manifest, problem=f"{size:,} bytes, too large to be a manifest"
                )
            with open(manifest, "rb") as file:
                data = file.read(_MAX_MANIFEST_BYTES + 1)
    except (FileNotFoundError, SourceFileNotFoundError):
        return None
    except OSError as error:
        return UnfinishedConversion(manifest, problem=str(error))
    try:
        content = json.loads(data)
    except (ValueError, RecursionError) as error:  # Recursion: nested too deeply.
        return UnfinishedConversion(manifest, problem=f"not JSON: {error}")
    if not isinstance(content, dict):
        return UnfinishedConversion(manifest, problem="not a JSON object")
    if content.get("complete") is True:
        return None
    return _unfinished(manifest, content)


def _unfinished(manifest: str, content: dict[str, Any]) -> UnfinishedConversion:
    shards = content.get("shards")
    done = list(shards.values()) if isinstance(shards, dict) else []
    layout = content.get("layout")
    planned = layout.get("shard_records") if isinstance(layout, dict) else None
    planned_counts = (
        [n for n in planned if _count(n) is not None] if isinstance(planned, list) else None
    )
    source = content.get("source")
    path = source.get("path") if isinstance(source, dict) else None
    return UnfinishedConversion(
        manifest,
        shards_done=len(done),
        shards_total=None if planned_counts is None else len(planned_counts),
        records_done=sum(
            _count(entry.get("records")) or 0 for entry in done if isinstance(entry, dict)
        ),
        records_total=None if planned_counts is None else sum(planned_counts),
        source=path if isinstance(path, str) else None,
    )


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
