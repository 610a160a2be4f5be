"""Checking record keys against a source's length, with errors that name the source."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import SupportsIndex

import numpy as np
import numpy.typing as npt

from chute_core import RecordIndexError, RecordKeyTypeError

__all__ = ["normalize_key", "normalize_keys"]


def normalize_key(key: SupportsIndex, length: int, owner: object) -> int:
    """Returns `key` as an int in `[0, length)`; negative keys count from the end.

    Args:
        key: an int or anything with `__index__` (NumPy integers included).
        length: the number of records of `owner`.
        owner: the source, named in the error message.

    Raises:
        RecordKeyTypeError: `key` is not an integer.
        RecordIndexError: `key` is out of range.
    """
    try:
        index = operator.index(key)
    except TypeError:
        raise RecordKeyTypeError(
            f"{owner!r}: record keys are integers, got {type(key).__name__} {key!r}."
        ) from None
    if index < 0:
        index += length
    if not 0 <= index < length:
        raise RecordIndexError(
            f"{owner!r}: record key {operator.index(key)} is out of range; this source "
            f"has {length} records (valid keys are 0..{length - 1}, or negative from the end)."
        )
    return index


def normalize_keys(
    keys: Sequence[SupportsIndex] | npt.NDArray[np.integer], length: int, owner: object
) -> npt.NDArray[np.int64]:
    """Vectorised `normalize_key`: returns an int64 array of keys in `[0, length)`."""
    try:
        array = np.asarray(keys)
    except (TypeError, ValueError):
        array = np.asarray([normalize_key(key, length, owner) for key in keys], dtype=np.int64)
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.dtype.kind not in "iu":
        # Mixed or non-integer input: check one by one to name the offending key.
        return np.asarray([normalize_key(key, length, owner) for key in array.tolist()], np.int64)
    array = array.astype(np.int64, copy=False).reshape(-1)
    if int(array.min()) < 0:  # Two passes (min, max) when every key is in range.
        array = np.where(array < 0, array + length, array)
    if int(array.min()) < 0 or int(array.max()) >= length:
        first = int(np.flatnonzero((array < 0) | (array >= length))[0])
        normalize_key(int(np.asarray(keys).reshape(-1)[first]), length, owner)
    return array
