"""`write_tfrecord`: records to a TFRecord file (optionally GZIP), atomically."""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterable
from typing import Any, BinaryIO

from ._paths import PathLike
from ._tfrecord_files import Compression
from ._tfrecord_format import frame

__all__ = ["write_tfrecord"]


def write_tfrecord(
    path: PathLike, records: Iterable[bytes], *, compression: Compression = "auto"
) -> int:
    """Writes `records` to the TFRecord file `path`; returns how many were written.

    Each record is framed with its length and the masked CRC32C of the length and of
    the data, as TensorFlow's `tf.io.TFRecordWriter` writes them, so TensorFlow, TFDS
    and `TFRecordSource` read the file. `records` may be any iterable (a generator, a
    source): it is consumed once. The file is written under a temporary name beside
    `path` (`.<name>.tmp`) and renamed when complete, so a reader never sees half a
    file; an existing file is replaced.

    Args:
        path: the file to write.
        records: the records, each `bytes` (or another bytes-like object, e.g. a
            `memoryview`); use `encode_example` to write `tf.train.Example`s, or
            `encode_record` for chute's own record codec.
        compression: `"auto"` (default): GZIP if `path` ends in `.gz`; `"GZIP"`; or
            `None`. A GZIP file is written reproducibly (no name or time in its header).

    Raises:
        TypeError: a record is not bytes-like (the message says which one).

    Example:
        >>> import os, tempfile
        >>> from chute_sources import TFRecordSource
        >>> path = os.path.join(tempfile.mkdtemp(), "data.tfrecord")
        >>> write_tfrecord(path, (str(i).encode() for i in range(3)))
        3
        >>> list(TFRecordSource(path))
        [b'0', b'1', b'2']
    """
    target = os.fspath(path)
    if compression not in ("auto", "GZIP", None):
        raise ValueError(
            f"write_tfrecord: compression must be 'auto' (GZIP for *.gz), 'GZIP' or None, "
            f"got {compression!r}."
        )
    zipped = compression == "GZIP" or (compression == "auto" and target.lower().endswith(".gz"))
    folder, name = os.path.split(os.path.abspath(target))
    temporary = os.path.join(folder, f".{name}.tmp")
    count = 0
    try:
        with open(temporary, "wb") as raw:
            stream: BinaryIO | Any = (
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if zipped else raw
            )
            with stream:
                for record in records:
                    try:
                        data = bytes(memoryview(record))
                    except TypeError:
                        raise TypeError(
                            f"write_tfrecord: record {count} is {type(record).__name__}, not "
                            "bytes; encode records first (encode_example for tf.train.Example, "
                            "encode_record for chute's codec)."
                        ) from None
                    stream.write(frame(data))
                    count += 1
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return count
