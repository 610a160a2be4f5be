"""`write_array_record`: records to sharded ArrayRecord files, atomically."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sized
from typing import Any

from array_record.python.array_record_module import ArrayRecordWriter

from chute_core import RecordCodecError
from chute_core.internal import check_int

from ._codec import encode_record
from ._paths import PathLike

__all__ = ["shard_paths", "write_array_record"]

_DEFAULT_OPTIONS = "group_size:1"


def shard_paths(path: PathLike, num_shards: int) -> list[str]:
    """The file names `write_array_record` uses for `num_shards` shards of `path`.

    One shard is written to `path` itself (`.array_record` appended when missing);
    several to `<stem>-00000-of-00004.array_record` and so on.

    Example:
        >>> shard_paths("data/train", 2)
        ['data/train-00000-of-00002.array_record', 'data/train-00001-of-00002.array_record']
    """
    text = os.fspath(path)
    stem = text[: -len(".array_record")] if text.endswith(".array_record") else text
    if num_shards == 1:
        return [stem + ".array_record"]
    return [f"{stem}-{i:05d}-of-{num_shards:05d}.array_record" for i in range(num_shards)]


def write_array_record(
    records: Iterable[Any],
    path: PathLike,
    *,
    num_shards: int = 1,
    encode: bool = True,
    options: str = _DEFAULT_OPTIONS,
) -> list[str]:
    """Writes records to ArrayRecord files, split into `num_shards` consecutive shards.

    Records keep their order: shard 0 holds the first records, shard 1 the next, so
    reading the shards in order (`ArrayRecordSource(paths)`) gives the records back as
    they were given. Each shard is written under a temporary name and renamed when
    complete, so a file with the final name is never partial.

    Args:
        records: the records; with `num_shards > 1` a sized collection (a list, a
            source, ...), so that shards can be cut evenly.
        path: the output path (see `shard_paths` for the names).
        num_shards: the number of files.
        encode: encode each record with chute's record codec (any pytree of arrays,
            numbers, str and bytes); False writes records that are already bytes as is.
        options: ArrayRecord writer options; `group_size:1` makes random reads fast.

    Returns:
        The paths written, in record order.

    Raises:
        RecordCodecError: a record the codec cannot encode, or a non-bytes record with
            `encode=False`; nothing is left on disk.

    Example:
        >>> import tempfile, os
        >>> from chute_sources import ArrayRecordSource
        >>> paths = write_array_record(["a", "b", "c"], os.path.join(tempfile.mkdtemp(), "x"))
        >>> list(ArrayRecordSource(paths))
        ['a', 'b', 'c']
    """
    num_shards = check_int(num_shards, "num_shards", "write_array_record", minimum=1)
    if num_shards > 1 and not isinstance(records, Sized):
        raise TypeError(
            "write_array_record needs a sized collection (e.g. a list) to cut records into "
            f"{num_shards} shards; got {type(records).__name__}."
        )
    paths = shard_paths(path, num_shards)
    folder = os.path.dirname(paths[0])
    if folder:
        os.makedirs(folder, exist_ok=True)
    total = len(records) if isinstance(records, Sized) else 0
    per_shard = math.ceil(total / num_shards) if num_shards > 1 else math.inf
    temporaries = [os.path.join(os.path.dirname(p), f".{os.path.basename(p)}.tmp") for p in paths]
    writer: ArrayRecordWriter | None = None
    shard = -1
    try:
        for count, record in enumerate(records):
            if writer is None or count >= (shard + 1) * per_shard:
                if writer is not None:
                    writer.close()
                shard += 1
                writer = ArrayRecordWriter(temporaries[shard], options)
            writer.write(_to_bytes(record, encode, count))
        for empty in range(shard + 1, num_shards):  # Empty trailing shards, or no records.
            if writer is not None:
                writer.close()
            writer = ArrayRecordWriter(temporaries[empty], options)
        if writer is not None:
            writer.close()
            writer = None
    except BaseException:
        if writer is not None:
            writer.close()
        for temporary in temporaries:
            if os.path.exists(temporary):
                os.unlink(temporary)
        raise
    for temporary, final in zip(temporaries, paths, strict=True):
        os.replace(temporary, final)
    return paths


def _to_bytes(record: Any, encode: bool, count: int) -> bytes:
    if encode:
        return encode_record(record)
    if isinstance(record, (bytes, bytearray, memoryview)):
        return bytes(record)
    raise RecordCodecError(
        f"record {count} is a {type(record).__name__}; with encode=False every record must be "
        "bytes (or pass encode=True to use chute's record codec)."
    )
