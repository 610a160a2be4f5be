"""Tar headers read by hand, and members grouped into WebDataset samples.

Only what WebDataset shards use is read: regular files (types `0`, NUL, `7`), their
names from the ustar header, its prefix field, a GNU long name (`L`) or a pax header
(`x`, its `path` and `size`). Other members (folders, links, global pax headers) are
skipped, as WebDataset skips them. Nothing here opens a file: the caller gives a
`read_range(start, end)` function, so local files and objects in buckets are parsed
the same way, and the index of a shard (`scan_shard`) reads its headers only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

from chute_core import SourceFileError

__all__ = [
    "BLOCK",
    "ReadRange",
    "Sequential",
    "TarMember",
    "check_field",
    "members",
    "split_name",
]

BLOCK = 512
ReadRange = Callable[[int, int], bytes | memoryview]
"""`read_range(start, end)`: the bytes `[start, end)` of a file (fewer at its end)."""

_REGULAR = (b"0", b"\0", b"7")
_NO_DATA = (b"1", b"2", b"3", b"4", b"5", b"6")  # Links, devices, folders: sizes say nothing.
_KEY = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")  # WebDataset's `base_plus_ext`.
_META = re.compile(r"__[^/]*__($|/)")  # WebDataset's `skip_meta`: `__meta__` files.
_GZIP = b"\x1f\x8b"


class TarMember(NamedTuple):
    """A regular file of a tar file.

    Attributes:
        name: its path in the archive.
        header: where its first header block starts (a pax or long-name block, if any).
        data: where its bytes start.
        size: how many bytes it has.
    """

    name: str
    header: int
    data: int
    size: int


def split_name(name: str) -> tuple[str, str] | None:
    """(key, field) of a member's name as WebDataset splits it; None for a skipped name.

    The key is the name up to the first dot of its last part (folders included), the
    field the rest, in lower case. Names without such a dot, and WebDataset's metadata
    files (`__name__`), are skipped.

    Example:
        >>> split_name("train/cat.0001.seg.PNG"), split_name("README"), split_name("__x__")
        (('train/cat', '0001.seg.png'), None, None)
    """
    if _META.match(name):
        return None
    match = _KEY.match(name)
    if match is None:
        return None
    return match.group(1), match.group(2).lower()


def check_field(key: str, field: str, owner: str) -> None:
    """Raises `ValueError` unless `key` and `field` name a member WebDataset reads back.

    Example:
        >>> check_field("a/b", "seg.png", "writer")
        >>> check_field("a.b", "png", "writer")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: writer: the key 'a.b' holds a dot after its last '/'; a reader would ...
    """
    name = f"{key}.{field}"
    if split_name(name) == (key, field):
        return
    if not key or key.endswith("/") or "." in key.rpartition("/")[2]:
        found = split_name(name)
        cut = f" (key {found[0]!r}, field {found[1]!r})" if found else ""
        raise ValueError(
            f"{owner}: the key {key!r} holds a dot after its last '/'; a reader would cut "
            f"the member name {name!r} at that dot{cut}. Use keys without dots in their "
            "last part."
            if found
            else f"{owner}: the key {key!r} cannot start a member name (it is empty, ends "
            "with '/', or names a metadata file `__x__`)."
        )
    raise ValueError(
        f"{owner}: the field {field!r} of sample {key!r} is not a member name's extension "
        "(it must be non-empty, in lower case, without '/')."
    )


class Sequential:
    """Reads a file front to back through `read_range`, in chunks of `chunk` bytes.

    `skip` moves past bytes without reading them when they are beyond the chunk held,
    so scanning headers of large members reads little more than the headers.
    """

    def __init__(self, read_range: ReadRange, size: int, start: int, chunk: int) -> None:
        self._read_range = read_range
        self.size = size
        self._chunk = chunk
        self._buffer: bytes | memoryview = b""
        self._buffer_start = start
        self.position = start

    def read(self, count: int) -> bytes:
        """The next `count` bytes (fewer only at the end of the file)."""
        offset = self.position - self._buffer_start
        if offset + count <= len(self._buffer):
            self.position += count
            return bytes(self._buffer[offset : offset + count])
        end = min(self.size, self.position + max(count, self._chunk))
        held = self._buffer[offset:] if 0 <= offset < len(self._buffer) else b""
        more = self._read_range(self.position + len(held), end) if end > self.position else b""
        data = bytes(held) + bytes(more)
        self._buffer, self._buffer_start = data, self.position
        taken = data[:count]
        self.position += len(taken)
        return taken

    def skip(self, count: int) -> None:
        """Moves `count` bytes on."""
        self.position += count


def _number(field: bytes, shown: str, offset: int) -> int:
    if field[:1] and field[0] & 0x80:  # GNU base-256, for sizes of 8 GiB and more.
        value = int.from_bytes(field[1:], "big")
        return value - (1 << (8 * len(field) - 8)) if field[0] & 0x40 else value
    text = field.split(b"\0", 1)[0].strip(b" \0")
    try:
        return int(text, 8) if text else 0
    except ValueError:
        raise SourceFileError(
            f"{shown}: the tar header at byte {offset} is damaged (the number {text!r} is "
            "not octal); the file is corrupt."
        ) from None


def _checksum_ok(header: bytes) -> bool:
    stored = header[148:156].split(b"\0", 1)[0].strip(b" \0")
    try:
        expected = int(stored, 8)
    except ValueError:
        return False
    unsigned = sum(header[:148]) + 256 + sum(header[156:])
    if expected == unsigned:
        return True
    high = sum(1 for byte in header[:148] + header[156:] if byte > 127)  # Old signed sums.
    return expected == unsigned - 256 * high


def _pax(data: bytes) -> dict[str, str]:
    """The records `<length> <key>=<value>` (each ending in a newline) of a pax header."""
    found: dict[str, str] = {}
    position = 0
    while position < len(data):
        space = data.find(b" ", position)
        if space < 0:
            break
        try:
            length = int(data[position:space])
        except ValueError:
            break
        if length <= 0:
            break
        key, _, value = data[space + 1 : position + length - 1].partition(b"=")
        found[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        position += length
    return found


def _not_tar(shown: str, offset: int, header: bytes) -> SourceFileError:
    if offset == 0 and header.startswith(_GZIP):
        return SourceFileError(
            f"{shown} is gzip-compressed; WebDataset shards are read as uncompressed .tar "
            "files here (random access needs them): decompress it first (gunzip)."
        )
    what = "is not a tar file" if offset == 0 else "is corrupt"
    return SourceFileError(
        f"{shown} {what}: no valid tar header at byte {offset} (bad checksum); expected a "
        "tar file such as WebDataset's shards or `tar cf` write."
    )


def _truncated(shown: str, offset: int, size: int, what: str) -> SourceFileError:
    return SourceFileError(
        f"{shown} is truncated: {what} at byte {offset} goes past the end of the file "
        f"({size} bytes). Was it copied or written only in part?"
    )


def members(
    reader: Sequential, shown: str, read_data: bool
) -> Iterator[tuple[TarMember, bytes | None]]:
    """The regular files of the tar file from `reader.position` on, with their bytes.

    Yields `(member, data)`, `data` None unless `read_data`. Stops at the end-of-archive
    block or at the end of the file (at a block boundary, as `tarfile` does).

    Raises:
        SourceFileError: a header is not a tar header (naming the file and the byte),
            or the file ends inside a header or a member.
    """
    long_name: str | None = None
    pax: dict[str, str] = {}
    first = -1  # Where the headers of the member being read start.
    while True:
        offset = reader.position
        header = reader.read(BLOCK)
        if not header:
            if first >= 0:
                raise _truncated(shown, first, reader.size, "a member's header")
            return
        if len(header) < BLOCK:
            raise _truncated(shown, offset, reader.size, "a tar header")
        if header.count(0) == BLOCK:
            return  # The end-of-archive block.
        if not _checksum_ok(header):
            raise _not_tar(shown, offset, header)
        if first < 0:
            first = offset
        kind = header[156:157]
        size = 0 if kind in _NO_DATA else _number(header[124:136], shown, offset)
        if "size" in pax and kind not in _NO_DATA:
            size = int(pax["size"])
        padded = -size % BLOCK
        if reader.position + size > reader.size:
            raise _truncated(shown, offset, reader.size, f"the data of a member ({size} bytes)")
        if kind in (b"L", b"x", b"g", b"K"):
            data = reader.read(size)
            reader.skip(padded)
            if kind == b"L":
                long_name = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            elif kind == b"x":
                pax.update(_pax(data))
            continue
        name = long_name or pax.get("path")
        if name is None:
            raw = header[:100].split(b"\0", 1)[0]
            if header[257:263] == b"ustar\0":  # POSIX: a prefix holds the leading folders.
                prefix = header[345:500].split(b"\0", 1)[0]
                raw = prefix + b"/" + raw if prefix else raw
            name = raw.decode("utf-8", "surrogateescape")
        member = TarMember(name, first, reader.position, size)
        long_name, pax, first = None, {}, -1
        if kind in _REGULAR:
            yield member, reader.read(size) if read_data else None
            if not read_data:
                reader.skip(size)
        else:
            reader.skip(size)
        reader.skip(padded)
