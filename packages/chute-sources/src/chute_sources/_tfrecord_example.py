"""`tf.train.Example` records read and written without TensorFlow or protobuf.

An Example is a small protobuf message, decoded here from its wire format:

    Example   { Features features = 1; }
    Features  { map<string, Feature> feature = 1; }   (entries: key = 1, value = 2)
    Feature   { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                             Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }
    FloatList { repeated float value = 1 [packed]; }
    Int64List { repeated int64 value = 1 [packed]; }

Repeated numbers are accepted packed (as TensorFlow writes them) and unpacked (one field
per value, as proto2 writers may); unknown fields are skipped, and repeated message
fields merge as protobuf merges them (a later map entry with the same key replaces the
earlier one). Packed varints are decoded with NumPy, a whole list at once.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from chute_core import CorruptRecordError

__all__ = ["Example", "encode_example", "parse_example"]

Example: TypeAlias = dict[str, "npt.NDArray[np.int64] | npt.NDArray[np.float32] | list[bytes]"]
"""A parsed `tf.train.Example`: feature name -> int64 array, float32 array or list of bytes."""

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_BYTES, _FLOATS, _INTS = 1, 2, 3
_SHORT_VARINTS = 24  # Packed varints up to this many bytes are decoded in Python.
_F32 = struct.Struct("<f")


def _varint(data: bytes, position: int, end: int) -> tuple[int, int]:
    """The varint at `position`, and the position after it."""
    result = shift = 0
    while True:
        if position >= end or shift > 63:
            raise CorruptRecordError("not a tf.train.Example: a varint runs past its field")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7


def _fields(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(field, wire type, start, end or value) of each field of a message in data[start:end].

    For a LEN field, its bytes are data[start:end]; for a varint, `end` is its value;
    for fixed32 / fixed64, their bytes are data[start:end].
    """
    fields = []
    position = start
    while position < end:
        key, position = _varint(data, position, end)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, position = _varint(data, position, end)
            fields.append((number, wire, position, value))
            continue
        if wire == _LEN:
            size, position = _varint(data, position, end)
            stop = position + size
        elif wire == _FIXED32:
            stop = position + 4
        elif wire == _FIXED64:
            stop = position + 8
        else:
            raise CorruptRecordError(
                f"not a tf.train.Example: field {number} has wire type {wire}, which an "
                "Example never holds"
            )
        if stop > end:
            raise CorruptRecordError(
                f"not a tf.train.Example: field {number} runs {stop - end} bytes past the "
                "end of its message (a truncated or foreign record)"
            )
        fields.append((number, wire, position, stop))
        position = stop
    return fields


def _packed_varints(data: bytes, start: int, end: int) -> npt.NDArray[np.int64]:
    if end - start <= _SHORT_VARINTS:
        values = []
        position = start
        while position < end:
            value, position = _varint(data, position, end)
            values.append(value)
        return _signed(values)
    raw = np.frombuffer(data, np.uint8, end - start, start)
    ends = np.flatnonzero(raw < 0x80)
    if not ends.size or ends[-1] != raw.size - 1:
        raise CorruptRecordError("not a tf.train.Example: a packed int64 list ends mid-varint")
    if ends.size == raw.size:  # Every value below 128: one byte each.
        return raw.astype(np.int64)
    starts = np.concatenate([[0], ends[:-1] + 1])
    lengths = ends - starts + 1
    if lengths.max() > 10:
        raise CorruptRecordError("not a tf.train.Example: a varint is longer than 10 bytes")
    shifts = (np.arange(raw.size) - np.repeat(starts, lengths)) * 7
    parts = (raw & 0x7F).astype(np.uint64) << shifts.astype(np.uint64)
    return np.bitwise_or.reduceat(parts, starts).view(np.int64)


def _signed(values: list[int]) -> npt.NDArray[np.int64]:
    """int64s from varints (negative int64s are written as their 64-bit two's complement)."""
    return np.array([v - (1 << 64) if v >= 1 << 63 else v for v in values], np.int64)


def _feature(data: bytes, start: int, end: int) -> Any:
    """One `Feature`'s list: an int64 array, a float32 array or a list of bytes."""
    kind = 0
    parts: list[Any] = []
    for number, wire, first, last in _fields(data, start, end):
        if number not in (_BYTES, _FLOATS, _INTS) or wire != _LEN:
            continue
        if number != kind:  # A oneof: the last kind set wins; the same kind merges.
            kind, parts = number, []
        for value_number, value_wire, at, stop in _fields(data, first, last):
            if value_number != 1:
                continue
            if kind == _BYTES and value_wire == _LEN:
                parts.append(data[at:stop])
            elif kind == _FLOATS and value_wire == _LEN:
                if (stop - at) % 4:
                    raise CorruptRecordError(
                        "not a tf.train.Example: a packed float list of "
                        f"{stop - at} bytes (not a multiple of 4)"
                    )
                parts.append(np.frombuffer(data, "<f4", (stop - at) // 4, at))
            elif kind == _FLOATS and value_wire == _FIXED32:
                parts.append(np.frombuffer(data, "<f4", 1, at))
            elif kind == _INTS and value_wire == _LEN:
                parts.append(_packed_varints(data, at, stop))
            elif kind == _INTS and value_wire == _VARINT:
                parts.append(_signed([stop]))
            else:
                raise CorruptRecordError(
                    f"not a tf.train.Example: a list value of wire type {value_wire}"
                )
    if kind == _BYTES:
        return parts
    if kind == 0:
        return []
    dtype = np.float32 if kind == _FLOATS else np.int64
    if not parts:
        return np.zeros(0, dtype)
    return np.concatenate(parts).astype(dtype)  # A copy: writable, native byte order.


def parse_example(data: bytes | bytearray | memoryview) -> Example:
    """Decodes a serialized `tf.train.Example` into `{name: values}`.

    `int64_list` becomes an `int64` array, `float_list` a `float32` array, and
    `bytes_list` a list of `bytes` (text stays encoded, as TensorFlow keeps it). A
    feature with no list set becomes `[]`. Features keep the order of the record.

    Raises:
        CorruptRecordError: `data` is not a serialized Example (TFRecordSource adds the
            file and the record).

    Example:
        >>> example = parse_example(encode_example({"label": 3, "image": b"png", "x": [0.5]}))
        >>> example["label"], example["image"], example["x"]
        (array([3]), [b'png'], array([0.5], dtype=float32))
    """
    if not isinstance(data, bytes):
        data = bytes(data)
    example: Example = {}
    for number, wire, start, end in _fields(data, 0, len(data)):
        if number != 1 or wire != _LEN:
            continue
        for entry, entry_wire, first, last in _fields(data, start, end):
            if entry != 1 or entry_wire != _LEN:
                continue
            name, value = "", []
            for part, part_wire, at, stop in _fields(data, first, last):
                if part == 1 and part_wire == _LEN:
                    try:
                        name = data[at:stop].decode()
                    except UnicodeDecodeError as error:
                        raise CorruptRecordError(
                            f"not a tf.train.Example: a feature name is not UTF-8 ({error})"
                        ) from None
                elif part == 2 and part_wire == _LEN:
                    value = _feature(data, at, stop)
            example.pop(name, None)  # A repeated key moves to where it is last set.
            example[name] = value
    return example


def _key(number: int, wire: int) -> bytes:
    return _varint_bytes(number << 3 | wire)


def _varint_bytes(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _key(number, _LEN) + _varint_bytes(len(payload)) + payload


def _list_of(name: str, value: Any) -> bytes:
    """The serialized `Feature` of one value (see `encode_example`)."""
    if isinstance(value, bytes | str):
        value = [value]
    array: npt.NDArray[Any] | None = None
    if isinstance(value, np.ndarray) and value.dtype.kind not in "SUO":
        array = value
    elif isinstance(value, np.ndarray):
        items = value.ravel().tolist()
    else:
        items = list(value) if isinstance(value, list | tuple) else [value]
    if array is None:
        texts = [isinstance(item, bytes | str) for item in items]
        if items and all(texts):
            entries = b"".join(
                _len_field(1, item.encode() if isinstance(item, str) else item) for item in items
            )
            return _len_field(_BYTES, entries)
        if any(texts):
            raise TypeError(f"encode_example: feature {name!r} mixes text and numbers")
        array = np.asarray(items) if items else np.zeros(0, np.float32)
    if array.dtype.kind in "biu":
        if array.dtype.kind == "u" and array.size and int(array.max()) >= 1 << 63:
            raise OverflowError(f"encode_example: feature {name!r} holds values above int64")
        payload = b"".join(_varint_bytes(int(v)) for v in array.ravel().tolist())
        return _len_field(_INTS, _len_field(1, payload) if payload else b"")
    if array.dtype.kind == "f":
        payload = np.ascontiguousarray(array, "<f4").tobytes()
        return _len_field(_FLOATS, _len_field(1, payload) if payload else b"")
    raise TypeError(
        f"encode_example: feature {name!r} is {type(value).__name__} of dtype {array.dtype}; "
        "give ints, floats, bytes or str (or lists / arrays of them)"
    )


def encode_example(features: Mapping[str, Any]) -> bytes:
    """Serializes `{name: values}` as a `tf.train.Example`, as TensorFlow would.

    Integers and bools (scalars, lists, integer arrays) become an `int64_list`, floats
    a `float_list` (stored as float32), and `bytes` / `str` (UTF-8) a `bytes_list`;
    arrays of any shape are flattened. Numbers are written packed; features keep the
    mapping's order. `parse_example` reads the result back.

    Raises:
        TypeError: a value of another kind (e.g. a dict), or a name that is not a str.

    Example:
        >>> data = encode_example({"id": [1, -2], "score": 0.25, "text": "hi"})
        >>> parse_example(data)
        {'id': array([ 1, -2]), 'score': array([0.25], dtype=float32), 'text': [b'hi']}
    """
    entries = []
    for name, value in features.items():
        if not isinstance(name, str):
            raise TypeError(
                f"encode_example: feature names are str, got {type(name).__name__} {name!r}"
            )
        entry = _len_field(1, name.encode()) + _len_field(2, _list_of(name, value))
        entries.append(_len_field(1, entry))
    return _len_field(1, b"".join(entries))
