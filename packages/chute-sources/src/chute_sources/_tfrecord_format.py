"""TFRecord framing: the masked CRC32C, framing a record, and indexing a file's records.

A TFRecord file is a sequence of frames, one per record:

    uint64 length (little-endian) | uint32 masked CRC32C of those 8 bytes
    data (length bytes)           | uint32 masked CRC32C of the data

where masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8, modulo 2**32. A GZIP file
(TensorFlow's `compression_type="GZIP"`) is these frames gzip-compressed as one stream.
CRC32C comes from `google-crc32c` (its C extension: about 0.07 µs for a short input).
"""

from __future__ import annotations

import array
import struct
from typing import Any

import google_crc32c
import numpy as np
import numpy.typing as npt

from chute_core import CorruptRecordError, SourceFileError

__all__ = ["HEADER_BYTES", "check_data", "check_records", "frame", "index_frames", "masked_crc"]

HEADER_BYTES = 12
"""The length field and its CRC, before each record's data."""
FOOTER_BYTES = 4
_MASK_DELTA = 0xA282EAD8
_LENGTH = struct.Struct("<Q")
_HEADER = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_GZIP_MAGIC = b"\x1f\x8b"


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC32C of `data`.

    Example:
        >>> hex(masked_crc(b""))
        '0xa282ead8'
        >>> hex(masked_crc(b"123456789"))  # CRC32C("123456789") is 0xe3069283.
        '0xc78ab0e5'
    """
    crc: int = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(record: bytes) -> bytes:
    """`record` framed as TFRecord stores it: length, its CRC, the data, the data's CRC.

    Example:
        >>> framed = frame(b"abc")
        >>> len(framed), framed[12:15]
        (19, b'abc')
    """
    length = _LENGTH.pack(len(record))
    return b"".join((length, _CRC.pack(masked_crc(length)), record, _CRC.pack(masked_crc(record))))


def _hint(data: Any) -> str:
    if bytes(data[:2]) == _GZIP_MAGIC:
        return (
            " The file starts like a GZIP file: pass compression='GZIP' (or name it *.gz) "
            "if it is a compressed TFRecord file."
        )
    return " The file is damaged, truncated, or not a TFRecord file."


def index_frames(data: Any, shown: str, *, verify: bool = True) -> npt.NDArray[np.int64]:
    """Where each frame of the TFRecord bytes `data` starts, then where the last one ends.

    Reads the 12-byte header of each frame, one after the other, so it touches only
    the headers' pages of a mapped file. Record `i`'s data is `data[offsets[i] + 12 :
    offsets[i + 1] - 4]`.

    Args:
        data: the file's bytes (an `mmap.mmap`, `bytes`, ...).
        shown: the file, named in errors.
        verify: check the CRC of each length field.

    Raises:
        SourceFileError: a length field's CRC is wrong (with `verify`), or the file
            ends inside a frame; the message names the file, the record and its byte.

    Example:
        >>> index_frames(frame(b"ab") + frame(b""), "x.tfrecord").tolist()
        [0, 18, 34]
    """
    size = len(data)
    offsets = array.array("q")
    append = offsets.append
    unpack = _HEADER.unpack_from
    position = 0
    while position < size:
        if size - position < HEADER_BYTES:
            raise SourceFileError(
                f"TFRecord file {shown!r} is truncated: record {len(offsets)} starts at byte "
                f"{position} but only {size - position} of its 12 header bytes are there "
                f"(the file has {size} bytes).{_hint(data)}"
            )
        length, length_crc = unpack(data, position)
        if verify:
            expected = masked_crc(data[position : position + 8])
            if length_crc != expected:
                raise SourceFileError(
                    f"TFRecord file {shown!r} is corrupt: the length of record "
                    f"{len(offsets)} (at byte {position}) has the CRC {length_crc:#010x}, "
                    f"expected {expected:#010x}.{_hint(data)}"
                )
        end = position + HEADER_BYTES + length + FOOTER_BYTES
        if end > size:
            raise SourceFileError(
                f"TFRecord file {shown!r} is truncated: record {len(offsets)} at byte "
                f"{position} needs {length} data bytes and ends at byte {end}, but the file "
                f"has {size} bytes.{_hint(data)}"
            )
        append(position)
        position = end
    append(size)
    return np.frombuffer(offsets, np.int64).copy()


def check_data(record: bytes, footer: bytes, shown: str, index: int, position: int) -> None:
    """Raises `CorruptRecordError` unless `footer` holds the masked CRC of `record`.

    Example:
        >>> framed = frame(b"abc")
        >>> check_data(b"abc", framed[-4:], "x.tfrecord", 0, 0)
        >>> try:
        ...     check_data(b"abd", framed[-4:], "x.tfrecord", 0, 0)
        ... except CorruptRecordError as error:
        ...     print(str(error)[:73])
        TFRecord file 'x.tfrecord' is corrupt: the data of record 0 (at byte 0, 3
    """
    (found,) = _CRC.unpack(footer)
    expected = masked_crc(record)
    if found != expected:
        raise CorruptRecordError(
            f"TFRecord file {shown!r} is corrupt: the data of record {index} (at byte "
            f"{position}, {len(record)} bytes) has the CRC {found:#010x}, expected "
            f"{expected:#010x}; the file is damaged (TFRecordSource(..., verify=False) reads "
            "it without checking)"
        )


def check_records(data: Any, records: list[bytes], ends: npt.NDArray[np.int64]) -> int | None:
    """The position in `records` of the first whose data CRC is wrong; None if all match.

    `ends[i]` is where record `i`'s data ends in `data`, and its CRC starts. The CRCs
    are computed one call a record and compared all at once; `check_data` then says
    what is wrong with the record found.

    Example:
        >>> data = frame(b"ab") + frame(b"cd")
        >>> check_records(data, [b"ab", b"cd"], np.array([14, 32])) is None
        True
        >>> check_records(data, [b"ab", b"cx"], np.array([14, 32]))
        1
    """
    crcs = np.fromiter(map(google_crc32c.value, records), np.uint32, len(records))
    expected = ((crcs >> 15) | (crcs << 17)) + np.uint32(_MASK_DELTA)
    raw = np.frombuffer(data, np.uint8)
    found = raw[ends[:, None] + np.arange(FOOTER_BYTES)].view("<u4").ravel()
    del raw  # A view of the mapping: the mapping cannot close while one exists.
    wrong = np.flatnonzero(found != expected)
    return int(wrong[0]) if wrong.size else None
