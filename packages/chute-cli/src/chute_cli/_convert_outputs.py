"""`chute convert --to webdataset|tfrecord`: records to tar or TFRecord shards, and back.

WebDataset: a record becomes a sample as it is when it is a dict with a `"__key__"`
(what a WebDataset input gives, and what an ArrayRecord conversion of one holds);
another dict gets the key `"<record number, 9 digits>"`; each of its other entries is a
field, stored as `chute_sources.WebDatasetWriter` stores it (bytes as they are, str,
int, JSON in `.json` fields, NumPy arrays in `.npy` fields). Entries starting with `_`
(`__url__`) are not written.

TFRecord: a `bytes` record (what a TFRecord input gives) is written as it is; a dict
becomes a `tf.train.Example` (`chute_sources.encode_example`: ints, floats, bytes and
str, scalars or arrays).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from chute_sources import (
    TFRecordSource,
    WebDatasetSource,
    WebDatasetWriter,
    encode_example,
    shard_paths,
    write_tfrecord,
)

from ._common import data_error

__all__ = [
    "OUTPUT_FORMATS",
    "WrittenShards",
    "expected_records",
    "output_kind",
    "output_paths",
    "write_output_shard",
]

OUTPUT_FORMATS = ("array_record", "tfrecord", "webdataset")
"""The formats `chute convert` writes (`--to`)."""
_SUFFIX = {"webdataset": ".tar", "tfrecord": ".tfrecord"}
_CHUNK = 256


def output_paths(stem: str, count: int, to: str) -> list[str]:
    """The shard names of a conversion to `to`, as `shard_paths` names ArrayRecord shards.

    Example:
        >>> output_paths("out/train", 2, "webdataset")
        ['out/train-00000-of-00002.tar', 'out/train-00001-of-00002.tar']
        >>> output_paths("out/train", 1, "tfrecord")
        ['out/train.tfrecord']
    """
    if to not in _SUFFIX:
        return shard_paths(stem, count)
    suffix = _SUFFIX[to]
    stem = stem[: -len(suffix)] if stem.endswith(suffix) else stem
    if count == 1:
        return [stem + suffix]
    return [f"{stem}-{i:05d}-of-{count:05d}{suffix}" for i in range(count)]


def output_kind(path: str | Sequence[str]) -> str:
    """The format of the shard `path` (or the first of them), from its name.

    Example:
        >>> output_kind("out/a-00000-of-00002.tar"), output_kind(["x.array_record"])
        ('webdataset', 'array_record')
    """
    first = os.fspath(path if isinstance(path, str) else path[0])
    for kind, suffix in _SUFFIX.items():
        if first.endswith(suffix):
            return kind
    return "array_record"


def _sample(record: Any, key: int, path: str) -> dict[str, Any]:
    if not isinstance(record, Mapping):
        data_error(
            f"record {key} of {path!r} is a {type(record).__name__}; --to webdataset writes "
            "records that are dicts {field: value} (e.g. from Parquet, JSON Lines objects, "
            "images or WebDataset)"
        )
    if isinstance(record.get("__key__"), str):
        return dict(record)
    return {"__key__": f"{key:09d}", **record}


def _example(record: Any, key: int, path: str) -> bytes:
    if isinstance(record, bytes):
        return record
    if not isinstance(record, Mapping):
        data_error(
            f"record {key} of {path!r} is a {type(record).__name__}; --to tfrecord writes "
            "bytes records as they are and dicts as tf.train.Example records"
        )
    try:
        return encode_example(record)
    except TypeError as error:
        data_error(f"record {key} of {path!r} cannot be a tf.train.Example: {error}")


def _records(opened: Any, start: int, stop: int, bar: Any) -> Any:
    for first in range(start, stop, _CHUNK):
        keys = range(first, min(stop, first + _CHUNK))
        yield from zip(keys, opened.read(keys), strict=True)
        bar.update(len(keys))


def write_output_shard(opened: Any, local: str, start: int, stop: int, bar: Any) -> None:
    """Writes records `[start, stop)` of the input `opened` to the shard `local`."""
    if output_kind(local) == "tfrecord":
        os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
        examples = (_example(r, k, opened.path) for k, r in _records(opened, start, stop, bar))
        write_tfrecord(local, examples, compression=None)
        return
    with WebDatasetWriter(local) as writer:
        for key, record in _records(opened, start, stop, bar):
            try:
                writer.write(_sample(record, key, opened.path))
            except (TypeError, ValueError) as error:
                data_error(
                    f"record {key} of {opened.path!r} cannot be stored as a WebDataset "
                    f"sample: {error}"
                )


def expected_records(opened: Any, keys: Sequence[int], kind: str) -> list[Any]:
    """What reading back records `keys` of `opened` from `kind` shards gives."""
    records = opened.read(keys)
    if kind == "tfrecord":
        return [_example(r, k, opened.path) for k, r in zip(keys, records, strict=True)]
    if kind == "webdataset":
        return [
            WebDatasetWriter.encode(_sample(r, k, opened.path))
            for k, r in zip(keys, records, strict=True)
        ]
    return list(records)


class WrittenShards:
    """Tar or TFRecord shards written by a conversion, read back (tar: without `__url__`).

    Example:
        >>> import os, tempfile
        >>> from chute_sources import write_webdataset
        >>> path = write_webdataset([{"__key__": "a", "txt": "x"}], os.path.join(
        ...     tempfile.mkdtemp(), "a.tar"))[0]
        >>> shards = WrittenShards(path)
        >>> len(shards), shards.__getitems__([0])
        (1, [{'__key__': 'a', 'txt': b'x'}])
    """

    def __init__(self, paths: str | Sequence[str]) -> None:
        listed = paths if isinstance(paths, str) else list(paths)
        self._tar = output_kind(paths) == "webdataset"
        self._source: Any = WebDatasetSource(listed) if self._tar else TFRecordSource(listed)

    def __len__(self) -> int:
        return len(self._source)

    def __getitems__(self, keys: Sequence[int]) -> list[Any]:
        read = self._source.__getitems__(keys)
        if not self._tar:
            return list(read)
        return [{k: v for k, v in sample.items() if k != "__url__"} for sample in read]

    def close(self) -> None:
        """Closes the shards."""
        close = getattr(self._source, "close", None)
        if close is not None:
            close()
