"""`WebDatasetWriter` and `write_webdataset`: samples to standard tar shards."""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Iterable, Mapping
from typing import Any, BinaryIO, Self

import numpy as np

from chute_core.internal import check_int

from ._paths import PathLike
from ._webdataset_tar import BLOCK, check_field

__all__ = ["WebDatasetWriter", "encode_field", "write_webdataset"]

_OWNER = "WebDatasetWriter"
_END = bytes(2 * BLOCK)  # The end-of-archive blocks.


def encode_field(key: str, field: str, value: Any) -> bytes:
    """The bytes a field is stored as (see `WebDatasetWriter`).

    Example:
        >>> encode_field("k", "cls", 3), encode_field("k", "json", {"a": 1})
        (b'3', b'{"a": 1}')
    """
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    extension = field.rsplit(".", 1)[-1]
    if extension in ("json", "jsn"):
        try:
            return json.dumps(value).encode()
        except (TypeError, ValueError) as error:
            raise TypeError(f"{_OWNER}: field {field!r} of sample {key!r}: {error}") from None
    if extension == "npy" and isinstance(value, np.ndarray | np.generic):
        out = io.BytesIO()
        np.save(out, np.asarray(value), allow_pickle=False)
        return out.getvalue()
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return str(int(value)).encode()
    raise TypeError(
        f"{_OWNER}: field {field!r} of sample {key!r} is a {type(value).__name__}; fields "
        "are bytes, str, int, any JSON value in a `.json` field, or a NumPy array in a "
        "`.npy` field. Encode it to bytes first (e.g. an image with Pillow)."
    )


class WebDatasetWriter:
    """Writes samples to WebDataset tar shards, starting a new shard at a count or size.

    A sample is a dict with a `"__key__"` (a str without a dot after its last `/`) and
    fields `{extension: value}`: member `<key>.<extension>` holds the value's bytes.
    Values are stored as bytes as they are; `str` as UTF-8; `int` in decimal (a `.cls`
    label); in a field whose last extension is `json`, any JSON value; in a `npy` field,
    a NumPy array (`numpy.save`). Other keys that start with `_` (`__url__`, ...) are
    not written, as in WebDataset. Members are plain ustar (pax for long names), mode
    0444, time 0, so equal samples give equal shards.

    Shard `n` is named `pattern % n` (`"out/shard-%06d.tar"`); a pattern without a `%`
    field is one shard, and takes no limit. Each shard is written under a temporary
    name (`.<name>.tmp`) and renamed when it is complete; a writer closed by an
    exception removes its temporary file.

    Args:
        pattern: the shard names, formatted with the shard number.
        max_count: samples per shard at most (None: no limit).
        max_size: bytes per shard at most, tar headers included (None: no limit); a
            sample larger than that gets a shard of its own.

    Example:
        >>> import os, tempfile
        >>> from chute_sources import WebDatasetSource
        >>> pattern = os.path.join(tempfile.mkdtemp(), "shard-%03d.tar")
        >>> with WebDatasetWriter(pattern, max_count=2) as writer:
        ...     for i in range(3):
        ...         writer.write({"__key__": f"s{i}", "txt": "hello", "cls": i})
        >>> [os.path.basename(path) for path in writer.paths]
        ['shard-000.tar', 'shard-001.tar']
        >>> WebDatasetSource(writer.paths)[2]["cls"]
        b'2'
    """

    def __init__(
        self, pattern: PathLike, *, max_count: int | None = None, max_size: int | None = None
    ) -> None:
        self._pattern = os.fspath(pattern)
        self._max_count = _limit(max_count, "max_count")
        self._max_size = _limit(max_size, "max_size")
        if "%" not in self._pattern and (max_count is not None or max_size is not None):
            raise ValueError(
                f"{_OWNER}: max_count and max_size need a pattern with a shard number, such "
                f"as 'out/shard-%06d.tar', got {self._pattern!r}."
            )
        self.paths: list[str] = []
        self._file: BinaryIO | None = None
        self._temporary = ""
        self._count = 0
        self._size = 0

    @staticmethod
    def encode(sample: Mapping[str, Any]) -> dict[str, Any]:
        """The sample as it is written: `__key__`, and each field's bytes (checked).

        Raises:
            TypeError: `sample` is not a dict with a str `__key__`, or a field's value
                cannot be stored (see the class).
            ValueError: the key or a field name would not read back as given, or the
                sample has no field.

        Example:
            >>> WebDatasetWriter.encode({"__key__": "a", "__url__": "x", "cls": 1})
            {'__key__': 'a', 'cls': b'1'}
        """
        if not isinstance(sample, Mapping) or not isinstance(sample.get("__key__"), str):
            raise TypeError(
                f"{_OWNER}: a sample is a dict with a str '__key__' and its fields, got "
                f"{type(sample).__name__} {str(sample)[:80]}."
            )
        key = sample["__key__"]
        encoded: dict[str, Any] = {"__key__": key}
        for field, value in sample.items():
            if not isinstance(field, str):
                raise TypeError(f"{_OWNER}: field names are str, got {field!r} in {key!r}.")
            if field.startswith("_"):
                continue
            check_field(key, field, _OWNER)
            encoded[field] = encode_field(key, field, value)
        if len(encoded) == 1:
            raise ValueError(
                f"{_OWNER}: sample {key!r} has no fields; a tar shard holds a sample only "
                "as its members, so it needs at least one field."
            )
        return encoded

    def write(self, sample: Mapping[str, Any]) -> None:
        """Writes one sample (see the class for what it holds, and `encode`)."""
        encoded = self.encode(sample)
        key = encoded.pop("__key__")
        blocks: list[bytes] = []
        for field, data in encoded.items():
            info = tarfile.TarInfo(f"{key}.{field}")
            info.size, info.mode, info.mtime = len(data), 0o444, 0
            blocks += [info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"), data]
            blocks.append(bytes(-len(data) % BLOCK))
        size = sum(len(block) for block in blocks)
        if self._file is None or self._full(size):
            self._next_shard()
        assert self._file is not None
        self._file.write(b"".join(blocks))
        self._count += 1
        self._size += size

    def _full(self, size: int) -> bool:
        if self._max_count is not None and self._count >= self._max_count:
            return True
        limit = self._max_size
        return limit is not None and self._count > 0 and self._size + size + len(_END) > limit

    def _next_shard(self) -> None:
        self._finish()
        path = self._pattern % len(self.paths) if "%" in self._pattern else self._pattern
        if self.paths and path in self.paths:
            raise ValueError(f"{_OWNER}: the pattern {self._pattern!r} names one shard only.")
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        self._temporary = os.path.join(folder, f".{os.path.basename(path)}.tmp")
        self._file = open(self._temporary, "wb")  # noqa: SIM115 - closed by _finish.
        self.paths.append(path)
        self._count = self._size = 0

    def _finish(self) -> None:
        if self._file is not None:
            self._file.write(_END)
            self._file.close()
            self._file = None
            os.replace(self._temporary, self.paths[-1])

    def close(self) -> list[str]:
        """Completes the last shard (an empty one if nothing was written); the paths."""
        if self._file is None and not self.paths:
            self._next_shard()
        self._finish()
        return list(self.paths)

    def abort(self) -> None:
        """Removes the shard being written; the completed ones stay."""
        if self._file is not None:
            self._file.close()
            self._file = None
            os.unlink(self._temporary)
            self.paths.pop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: object, *exc_info: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


def _limit(value: int | None, name: str) -> int | None:
    return None if value is None else check_int(value, name, _OWNER, minimum=1)


def write_webdataset(
    samples: Iterable[Mapping[str, Any]],
    pattern: PathLike,
    *,
    max_count: int | None = None,
    max_size: int | None = None,
) -> list[str]:
    """Writes samples to WebDataset tar shards; returns the shards' paths, in order.

    A convenience over `WebDatasetWriter` (see it for samples, names and limits): if a
    sample cannot be written, every shard written so far is removed.

    Example:
        >>> import os, tempfile
        >>> from chute_sources import WebDatasetSource
        >>> path = os.path.join(tempfile.mkdtemp(), "one.tar")
        >>> paths = write_webdataset([{"__key__": "a/b", "seg.json": [1, 2]}], path)
        >>> WebDatasetSource(paths, decode=True)[0]["seg.json"]
        [1, 2]
    """
    writer = WebDatasetWriter(pattern, max_count=max_count, max_size=max_size)
    try:
        for sample in samples:
            writer.write(sample)
        return writer.close()
    except BaseException:
        writer.abort()
        for path in writer.paths:
            if os.path.exists(path):
                os.unlink(path)
        raise
