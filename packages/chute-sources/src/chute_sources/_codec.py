"""chute's record codec: pytrees of NumPy arrays, numbers, str and bytes <-> bytes.

A record is laid out as

    MAGIC (8 bytes) | header length (uint32, little-endian) | header (JSON, UTF-8) |
    padding to 16 bytes | data section (array and bytes payloads, each 16-byte aligned)

The header is a JSON tree: `null`, booleans, numbers and strings stand for themselves;
every other node is a list whose first item is a tag:

    ["a", dtype, shape, offset]   NumPy array (dtype as `numpy.dtype.str`)
    ["n", dtype, offset]          NumPy scalar
    ["b", offset, length]         bytes
    ["l", child, ...]             list
    ["t", child, ...]             tuple
    ["d", {key: child, ...}]      dict with str keys (order kept)
    ["m", [key, child], ...]      dict with other keys

Offsets count from the start of the data section. Decoding never imports or calls
anything named by the data (no pickle), so reading a file cannot run code. Arrays come
back as read-only views of the record's bytes: no copy is made.

A record from an untrusted file decodes to no more memory than its bytes justify:

- payloads are laid out one after another, as the encoder writes them; a record whose
  payloads overlap or repeat (many arrays viewing one block of bytes, which a batch
  would copy once each) is corrupt. So the arrays and bytes of a record add up to at
  most its data section.
- arrays of zero-size dtypes (`'S0'`, `'U0'`, `'V0'`: any number of elements in no
  bytes, and a copy of them allocates one byte each), object and structured dtypes are
  refused.
- the header (the JSON tree, whose lists, dicts, numbers and strings become Python
  objects of up to some tens of bytes per header byte) is at most
  `max_header_bytes()`: 64 MiB unless the environment variable
  `CHUTE_MAX_RECORD_HEADER_BYTES` says otherwise (in bytes; set it before workers start).
"""

from __future__ import annotations

import json
import math
import os
import struct
from typing import Any, TypeAlias

import numpy as np

from chute_core import CorruptRecordError, RecordCodecError

__all__ = [
    "HEADER_LIMIT_ENV",
    "MAGIC",
    "BytesLike",
    "decode_record",
    "encode_record",
    "is_encoded_record",
    "max_header_bytes",
]

MAGIC = b"\x89CHUTE\x01\n"
"""The first 8 bytes of every encoded record (format version 1)."""

HEADER_LIMIT_ENV = "CHUTE_MAX_RECORD_HEADER_BYTES"
"""The environment variable that sets the largest record header decoded (bytes)."""
_DEFAULT_HEADER_LIMIT = 64 << 20

_ALIGN = 16
_PREFIX = struct.Struct("<8sI")
BytesLike: TypeAlias = bytes | bytearray | memoryview
"""Anything the decoder reads from: bytes, or a buffer (e.g. a view of shared memory)."""

_scan_json = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # the C scanner: json.loads minus ~2 us of overhead
_DTYPES: dict[str, np.dtype[Any]] = {}
_SUPPORTED = "None, bool, int, float, str, bytes, NumPy arrays and scalars, list, tuple, dict"


def max_header_bytes() -> int:
    """The largest record header (JSON tree) decoded: `$CHUTE_MAX_RECORD_HEADER_BYTES`, or 64 MiB.

    Raises:
        RecordCodecError: the variable is set but is not a positive whole number.

    Example:
        >>> max_header_bytes() >= 1
        True
    """
    text = os.environ.get(HEADER_LIMIT_ENV)
    if not text:
        return _DEFAULT_HEADER_LIMIT
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise RecordCodecError(
            f"{HEADER_LIMIT_ENV}={text!r} must be a positive number of bytes (the largest "
            "record header decoded); unset it for the default of 64 MiB."
        )
    return value


def _pad(size: int) -> int:
    return -size % _ALIGN


class _Encoder:
    __slots__ = ("buffers", "size")

    def __init__(self) -> None:
        self.buffers: list[Any] = []
        self.size = 0

    def _add(self, buffer: Any) -> int:
        nbytes = memoryview(buffer).nbytes
        offset = self.size
        self.buffers.append(buffer)
        pad = _pad(nbytes)
        if pad:
            self.buffers.append(b"\0" * pad)
        self.size += nbytes + pad
        return offset

    def node(self, value: Any, path: str) -> Any:
        kind = type(value)
        if value is None or kind is bool or kind is str or kind is int:
            return value
        if kind is float:
            return value if math.isfinite(value) else ["f", repr(value)]
        if isinstance(value, np.generic):  # Before float/str/bytes: np.float64 is a float.
            dtype = self._dtype(value.dtype, path)
            return ["n", dtype, self._add(value.tobytes())]
        if isinstance(value, str):  # Subclasses (StrEnum, IntEnum, ...) as the base type.
            return str(value)
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return float(value) if math.isfinite(value) else ["f", repr(float(value))]
        if isinstance(value, np.ndarray):
            array = value if value.flags.c_contiguous else value.copy(order="C")
            dtype = self._dtype(array.dtype, path)
            if array.dtype.itemsize == 0:
                raise RecordCodecError(
                    f"{path}: NumPy arrays of dtype {array.dtype} have elements of 0 bytes, "
                    "which no reader accepts (any number of them fits in no bytes); use a "
                    "dtype of 1 byte or more."
                )
            offset = self._add(array.reshape(-1).view(np.uint8))
            return ["a", dtype, list(array.shape), offset]
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
            return ["b", self._add(data), len(data)]
        if isinstance(value, dict):
            if all(type(key) is str for key in value):
                return ["d", {k: self.node(v, f"{path}[{k!r}]") for k, v in value.items()}]
            return [
                "m",
                *(
                    [self.node(k, f"{path}.keys()"), self.node(v, f"{path}[{k!r}]")]
                    for k, v in value.items()
                ),
            ]
        if isinstance(value, list):
            return ["l", *(self.node(v, f"{path}[{i}]") for i, v in enumerate(value))]
        if isinstance(value, tuple):
            return ["t", *(self.node(v, f"{path}[{i}]") for i, v in enumerate(value))]
        raise RecordCodecError(
            f"{path}: cannot encode a value of type {type(value).__qualname__}; "
            f"the record codec supports {_SUPPORTED}. Convert it first (e.g. to a NumPy "
            "array or a dict)."
        )

    @staticmethod
    def _dtype(dtype: np.dtype[Any], path: str) -> str:
        if dtype.hasobject or dtype.fields is not None or np.dtype(dtype.str) != dtype:
            raise RecordCodecError(
                f"{path}: NumPy dtype {dtype} is not supported (object and structured dtypes "
                "would need pickle); use plain numeric, bool, bytes ('S') or str ('U') dtypes."
            )
        return dtype.str


def encode_record(record: Any) -> bytes:
    """Encodes a record (a pytree of arrays, numbers, str and bytes) as bytes.

    Args:
        record: None, bool, int, float, str, bytes, a NumPy array or scalar, or a list,
            tuple or dict of these, nested to any depth.

    Returns:
        The encoded bytes; `decode_record` gives back an equal record.

    Raises:
        RecordCodecError: a value of an unsupported type, naming where it is.

    Example:
        >>> import numpy as np
        >>> data = encode_record({"image": np.zeros((2, 2), np.uint8), "label": 3})
        >>> decode_record(data)
        {'image': array([[0, 0],
               [0, 0]], dtype=uint8), 'label': 3}
    """
    encoder = _Encoder()
    tree = encoder.node(record, "record")
    header = json.dumps(tree, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    header_bytes = header.encode()
    head_size = _PREFIX.size + len(header_bytes)
    parts: list[Any] = [_PREFIX.pack(MAGIC, len(header_bytes)), header_bytes]
    parts.append(b"\0" * _pad(head_size))
    parts.extend(encoder.buffers)
    return b"".join(parts)


def is_encoded_record(data: BytesLike) -> bool:
    """Tells whether `data` starts with the codec's magic bytes.

    Example:
        >>> is_encoded_record(encode_record(1)), is_encoded_record(b"raw")
        (True, False)
    """
    return bytes(memoryview(data)[: len(MAGIC)]) == MAGIC


def _dtype_of(dtype_str: Any) -> np.dtype[Any]:
    dtype = _DTYPES.get(dtype_str)
    if dtype is None:
        if type(dtype_str) is not str:
            raise CorruptRecordError(f"bad dtype {dtype_str!r}")
        try:
            dtype = np.dtype(dtype_str)
        except Exception as error:  # numpy's parser raises many types on junk.
            raise CorruptRecordError(f"bad dtype {dtype_str!r}") from error
        if dtype.hasobject or dtype.fields is not None or dtype.str != dtype_str:
            raise CorruptRecordError(f"dtype {dtype_str!r} is not allowed")
        if len(_DTYPES) < 1024:
            _DTYPES[dtype_str] = dtype
    return dtype


class _Decoder:
    __slots__ = ("buffer", "data_start", "end", "free")

    def __init__(self, buffer: Any, data_start: int, end: int) -> None:
        self.buffer = buffer
        self.data_start = data_start
        self.end = end
        self.free = data_start  # Where the next payload may start: they never overlap.

    def _span(self, offset: Any, nbytes: int) -> int:
        if type(offset) is not int or offset < 0:
            raise CorruptRecordError(f"bad payload offset {offset!r}")
        start = self.data_start + offset
        if start + nbytes > self.end:
            raise CorruptRecordError(
                f"payload [{start}, {start + nbytes}) runs past the record's end ({self.end})"
            )
        if start < self.free:
            raise CorruptRecordError(
                f"payload [{start}, {start + nbytes}) overlaps an earlier one (which ends at "
                f"{self.free}): each payload's bytes belong to one value"
            )
        self.free = start + nbytes
        return start

    def node(self, node: Any) -> Any:
        if type(node) is not list:
            return node
        tag = node[0]
        if tag == "a":
            _, dtype_str, shape, offset = node
            dtype = _dtype_of(dtype_str)
            if type(shape) is not list or any(type(n) is not int or n < 0 for n in shape):
                raise CorruptRecordError(f"bad array shape {shape!r}")
            if dtype.itemsize == 0:  # Any count fits in no bytes; a copy takes 1 each.
                raise CorruptRecordError(f"array dtype {dtype_str!r} has elements of 0 bytes")
            count = math.prod(shape)
            start = self._span(offset, count * dtype.itemsize)
            array = np.frombuffer(self.buffer, dtype=dtype, count=count, offset=start)
            return array.reshape(shape)
        if tag == "n":
            _, dtype_str, offset = node
            dtype = _dtype_of(dtype_str)
            start = self._span(offset, dtype.itemsize)
            if dtype.itemsize == 0:  # np.bytes_(b"") and np.str_(""): one empty value.
                return np.zeros((), dtype)[()]
            return np.frombuffer(self.buffer, dtype=dtype, count=1, offset=start)[0]
        if tag == "b":
            _, offset, length = node
            if type(length) is not int or length < 0:
                raise CorruptRecordError(f"bad bytes length {length!r}")
            start = self._span(offset, length)
            return bytes(memoryview(self.buffer)[start : start + length])
        if tag == "d":
            return {key: self.node(child) for key, child in node[1].items()}
        if tag == "l":
            return [self.node(child) for child in node[1:]]
        if tag == "t":
            return tuple(self.node(child) for child in node[1:])
        if tag == "m":
            return {self.node(key): self.node(child) for key, child in node[1:]}
        if tag == "f":
            value = float(node[1])
            if math.isfinite(value):
                raise CorruptRecordError(f"bad non-finite float {node[1]!r}")
            return value
        raise CorruptRecordError(f"unknown node tag {tag!r}")


def decode_record(data: BytesLike) -> Any:
    """Decodes bytes written by `encode_record`.

    Arrays in the result are read-only views of `data` (no copy); call `.copy()` on one
    to modify it.

    Args:
        data: the encoded record (bytes, or any buffer).

    Returns:
        The record.

    Raises:
        CorruptRecordError: `data` is not an encoded record, or is truncated or corrupt.

    Example:
        >>> decode_record(encode_record([1, "two", b"three", (4.0, None)]))
        [1, 'two', b'three', (4.0, None)]
    """
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    size = len(view)
    if size < _PREFIX.size:
        raise CorruptRecordError(
            f"a chute record is at least {_PREFIX.size} bytes, got {size}: truncated or not "
            "written by chute's encode_record"
        )
    magic, header_len = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise CorruptRecordError(
            f"not a chute record: it starts with {bytes(magic)!r}, expected {MAGIC!r} "
            "(read raw bytes with decode=False, or pass your own decoder)"
        )
    limit = max_header_bytes()
    if header_len > limit:
        raise CorruptRecordError(
            f"corrupt chute record: its header is {header_len} bytes, more than the limit of "
            f"{limit} ({HEADER_LIMIT_ENV}; raise it if you wrote records this large)"
        )
    head_size = _PREFIX.size + header_len
    if head_size > size:
        raise CorruptRecordError(
            f"truncated chute record: the header needs {head_size} bytes, the record has {size}"
        )
    try:
        header = str(view[_PREFIX.size : head_size], "utf-8")
        tree, end = _scan_json(header, 0)
        if end != len(header):
            raise CorruptRecordError("trailing bytes after the header")
        return _Decoder(data, head_size + _pad(head_size), size).node(tree)
    except CorruptRecordError as error:
        raise CorruptRecordError(f"corrupt chute record: {error}") from None
    except StopIteration:
        raise CorruptRecordError("corrupt chute record: the header is not JSON") from None
    except (Exception, RecursionError) as error:  # Malformed data may fail in any way.
        raise CorruptRecordError(f"corrupt chute record: {error!r}") from error
