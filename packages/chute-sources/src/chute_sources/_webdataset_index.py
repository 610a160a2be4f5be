"""WebDataset shards: naming them (brace patterns, globs, URLs), grouping, indexing.

A shard's index is built once, from its tar headers only (`scan_shard`): for every
sample its key and the offset and size of each of its members. `WebDatasetSource`
keeps the indexes of its shards (and sends them along when pickled, so worker
processes never scan again); `WebDatasetStream` groups members as it reads and needs
no index.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from chute_core import SourceFileError

from ._paths import PathLike, expand_paths
from ._remote._client import ObjectInfo
from ._remote._expand import expand_url
from ._remote._options import StorageOptions
from ._remote._urls import is_object_url, local_path
from ._webdataset_tar import ReadRange, Sequential, TarMember, members, split_name

__all__ = [
    "ShardIndex",
    "Shards",
    "WebDatasetPaths",
    "expand_braces",
    "file_reader",
    "group_samples",
    "resolve_shards",
    "scan_shard",
]

WebDatasetPaths = PathLike | Sequence[PathLike]
"""A shard, a brace pattern, a glob, a folder or a URL of these, or a list of them."""

_SUFFIXES = (".tar",)
_BRACES = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)$")
_SCAN_CHUNK = 64 << 10


def expand_braces(pattern: str) -> list[str]:
    """The names a brace pattern stands for, as WebDataset (`braceexpand`) expands them.

    `{000..009}` is a range of numbers (zero-padded like its ends), `{a,b}` a choice;
    several braces expand left to right.

    Example:
        >>> expand_braces("shards-{000..002}.tar")
        ['shards-000.tar', 'shards-001.tar', 'shards-002.tar']
        >>> expand_braces("{train,valid}-{0..1}.tar")
        ['train-0.tar', 'train-1.tar', 'valid-0.tar', 'valid-1.tar']
    """
    match = _BRACES.search(pattern)
    if match is None:
        return [pattern]
    body = match.group(1)
    numbers = _RANGE.match(body)
    if numbers is not None:
        first, last = numbers.group(1), numbers.group(2)
        width = max(len(first), len(last)) if first.startswith("0") or last.startswith("0") else 0
        step = 1 if int(last) >= int(first) else -1
        choices = [f"{n:0{width}d}" for n in range(int(first), int(last) + step, step)]
    elif "," in body:
        choices = body.split(",")
    else:  # Not a brace expression: kept as it is.
        head, tail = pattern[: match.end()], pattern[match.end() :]
        return [head + rest for rest in expand_braces(tail)]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [head + choice + rest for choice in choices for rest in expand_braces(tail)]


class Shards(NamedTuple):
    """The shards named by the user: each a local path or an object's URL.

    Attributes:
        names: the shards in reading order (absolute paths, or URLs).
        remote: the objects of the shards in buckets, by their position in `names`.
    """

    names: tuple[str, ...]
    remote: dict[int, ObjectInfo]


def resolve_shards(paths: WebDatasetPaths, owner: str, storage: StorageOptions) -> Shards:
    """Expands brace patterns, globs, folders and URLs into the list of shards.

    Raises:
        SourceFileNotFoundError: an entry names no shard, or no entry is given.
        TypeError: `paths` is not a path or a list of paths.
    """
    entries: list[object]
    if isinstance(paths, str | os.PathLike):
        entries = [paths]
    elif isinstance(paths, Sequence):
        entries = list(paths)
    else:
        raise TypeError(
            f"{owner}: paths must be a shard, a brace pattern ('shards-{{000..009}}.tar'), a "
            f"glob or a list of these, got {type(paths).__name__}."
        )
    names: list[str] = []
    remote: dict[int, ObjectInfo] = {}
    for entry in entries:
        text = os.fspath(entry) if isinstance(entry, str | os.PathLike) else entry
        if not isinstance(text, str):
            raise TypeError(f"{owner}: every path must be a str or os.PathLike, got {entry!r}.")
        for name in expand_braces(text):
            if is_object_url(name):
                for info in expand_url(name, "WebDataset", _SUFFIXES, owner, storage):
                    remote[len(names)] = info
                    names.append(info.url)
            else:
                names.extend(expand_paths(local_path(name, owner), "WebDataset", _SUFFIXES, owner))
    if not names:
        expand_paths([], "WebDataset", _SUFFIXES, owner)  # Raises: no paths given.
    return Shards(tuple(names), remote)


class ShardIndex(NamedTuple):
    """Where each sample of one shard lies.

    Attributes:
        keys: each sample's `__key__`.
        starts: sample `i`'s members are `starts[i]:starts[i + 1]` of the arrays below.
        fields: each member's field name (its extension), as a number into `names`.
        names: the field names.
        offsets: where each member's bytes start in the shard.
        sizes: how many bytes each member has.
        stamp: the shard's (size, modification time in ns) when scanned.
    """

    keys: tuple[str, ...]
    starts: npt.NDArray[np.int64]
    fields: npt.NDArray[np.int32]
    names: tuple[str, ...]
    offsets: npt.NDArray[np.int64]
    sizes: npt.NDArray[np.int64]
    stamp: tuple[int, int]


def group_samples(
    found: Iterable[tuple[TarMember, bytes | None]], shown: str
) -> Iterator[tuple[str, list[tuple[str, TarMember, bytes | None]]]]:
    """Consecutive members with one key, as WebDataset groups them: `(key, members)`.

    Raises:
        SourceFileError: two members of one sample have the same field.
    """
    key: str | None = None
    sample: list[tuple[str, TarMember, bytes | None]] = []
    for member, data in found:
        split = split_name(member.name)
        if split is None:
            continue
        if split[0] != key:
            if key is not None:
                yield key, sample
            key, sample = split[0], []
        elif any(field == split[1] for field, _, _ in sample):
            raise SourceFileError(
                f"{shown}: sample {key!r} has two members with the field {split[1]!r} (the "
                f"second, {member.name!r}, at byte {member.header}); each field of a sample "
                "must appear once."
            )
        sample.append((split[1], member, data))
    if key is not None:
        yield key, sample


def scan_shard(read_range: ReadRange, size: int, shown: str, stamp: tuple[int, int]) -> ShardIndex:
    """Indexes a shard from its tar headers (member bytes are skipped, not read).

    Raises:
        SourceFileError: the shard is not a tar file, is truncated, or a sample repeats
            a field.
    """
    keys: list[str] = []
    starts = [0]
    fields: list[int] = []
    names: dict[str, int] = {}
    offsets: list[int] = []
    sizes: list[int] = []
    reader = Sequential(read_range, size, 0, _SCAN_CHUNK)
    for key, sample in group_samples(members(reader, shown, read_data=False), shown):
        keys.append(key)
        for field, member, _ in sample:
            fields.append(names.setdefault(field, len(names)))
            offsets.append(member.data)
            sizes.append(member.size)
        starts.append(len(offsets))
    return ShardIndex(
        tuple(keys),
        np.asarray(starts, np.int64),
        np.asarray(fields, np.int32),
        tuple(names),
        np.asarray(offsets, np.int64),
        np.asarray(sizes, np.int64),
        stamp,
    )


def file_reader(fd: int) -> ReadRange:
    """`read_range` of an open file, by `os.pread` (thread-safe: no shared position)."""
    return lambda start, end: os.pread(fd, end - start, start)
