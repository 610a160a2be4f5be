"""The header of a `.npy` array: reading it from a stream, and checking what it says.

Shared by `NumpySource`'s local files (and `.npz` members) and its files in buckets,
whose header comes from a ranged read.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import struct
import tokenize
from typing import IO, Any

import numpy as np
from numpy.lib import format as npy_format

from chute_core import SourceFileError

__all__ = ["FIX", "MAX_HEADER_SIZE", "NpyHeader", "check_header", "read_header"]

MAX_HEADER_SIZE = 10_000
"""The longest header accepted (what numpy's header readers accept by default)."""
FIX = "save arrays with np.save / np.savez (or pass the arrays themselves)"
"""How to make a file chute reads, for messages."""


@dataclasses.dataclass(frozen=True)
class NpyHeader:
    """What a `.npy` header says, and how many bytes the magic plus header take."""

    shape: tuple[int, ...]
    fortran_order: bool
    dtype: np.dtype[Any]
    size: int

    @property
    def nbytes(self) -> int:
        """The bytes of the array's data."""
        return math.prod(self.shape) * self.dtype.itemsize


def read_header(stream: IO[bytes], where: str) -> NpyHeader:
    """Reads a `.npy` magic and header from `stream`'s position."""
    start = stream.tell()
    try:
        version = npy_format.read_magic(stream)
        if version == (1, 0):
            shape, fortran_order, dtype = npy_format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, fortran_order, dtype = npy_format.read_array_header_2_0(stream)
        elif version == (3, 0):
            shape, fortran_order, dtype = _read_array_header_3_0(stream)
        else:
            raise ValueError(f"unknown .npy format version {version}")
    except (ValueError, SyntaxError, EOFError, tokenize.TokenError) as error:
        # numpy parses the header as a Python literal: junk can fail in the tokenizer.
        raise SourceFileError(
            f"NumpySource: {where} is not a readable .npy array (the header is truncated or "
            f"corrupt: {error}); {FIX}."
        ) from error
    return NpyHeader(tuple(shape), bool(fortran_order), dtype, stream.tell() - start)


def _read_array_header_3_0(stream: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    """Format 3.0 is 2.0 with a UTF-8 header (for field names outside Latin-1)."""
    length_bytes = stream.read(4)
    if len(length_bytes) != 4:
        raise ValueError("ran out of data reading the header length")
    (length,) = struct.unpack("<I", length_bytes)
    if length > MAX_HEADER_SIZE:
        raise ValueError(f"the header is {length} bytes, more than {MAX_HEADER_SIZE}")
    text = stream.read(length)
    if len(text) != length:
        raise ValueError("ran out of data reading the header")
    header = ast.literal_eval(text.decode("utf8"))
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise ValueError(f"the header is not a .npy header dict: {header!r}")
    shape, fortran_order = header["shape"], header["fortran_order"]
    if not isinstance(shape, tuple) or not all(isinstance(n, int) for n in shape):
        raise ValueError(f"shape is not a tuple of ints: {shape!r}")
    if not isinstance(fortran_order, bool):
        raise ValueError(f"fortran_order is not a bool: {fortran_order!r}")
    try:
        dtype = npy_format.descr_to_dtype(header["descr"])
    except TypeError as error:
        raise ValueError(f"descr is not a dtype: {header['descr']!r}") from error
    return shape, fortran_order, dtype


def check_header(header: NpyHeader, where: str, data_bytes: int) -> None:
    """Refuses object and 0-d arrays, and data shorter than the header promises."""
    if header.dtype.hasobject:
        raise SourceFileError(
            f"NumpySource: {where} holds an object array (dtype {header.dtype}); object arrays "
            "are not supported because reading them would unpickle (and so could run) "
            "arbitrary code; save numeric, bool or fixed-width string arrays instead."
        )
    if not header.shape:
        raise SourceFileError(
            f"NumpySource: {where} is a 0-d array (a single value); NumpySource needs at least "
            "one axis, whose entries are the records; save np.atleast_1d(value) instead."
        )
    if data_bytes < header.nbytes:
        raise SourceFileError(
            f"NumpySource: {where} is truncated: its header promises shape {header.shape} of "
            f"{header.dtype} ({header.nbytes} bytes of data), but only {max(data_bytes, 0)} "
            "bytes follow the header; write the file again."
        )
