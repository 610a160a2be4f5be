"""Randomness keyed by the record: `random_map(..., key="record")`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from chute_core import InvalidArgumentError
from chute_samplers import EpochArray, PositionArray, reader_dataset, record_keys, record_rng

from ._adapters import as_random_map_fn

__all__ = ["KEY_KINDS", "OriginRecords", "check_key_kind", "random_map_parts", "record_key_rngs"]

KEY_KINDS = ("position", "record")
"""What a random map's generator is keyed by."""

_TAG = "random_map_record"


def check_key_kind(key: object, owner: str) -> bool:
    """Whether `key` asks for record keys; raises for anything but "position"/"record".

    Example:
        >>> check_key_kind("record", "random_map"), check_key_kind("position", "random_map")
        (True, False)
    """
    if key not in KEY_KINDS:
        raise InvalidArgumentError(
            f"{owner}: key must be 'position' (draws keyed by the element's position) or "
            f"'record' (keyed by the record's key in the source), got {key!r}."
        )
    return key == "record"


def record_key_rngs(
    seed: int, keys: PositionArray, passes: EpochArray
) -> list[np.random.Generator]:
    """One generator per record: a pure function of (seed, key, pass).

    Example:
        >>> a, b = record_key_rngs(0, np.array([5, 5]), np.array([0, 1], np.uint64))
        >>> a.random() == record_key_rngs(0, np.array([5]), np.array([0], np.uint64))[0].random()
        True
    """
    return [
        record_rng(seed, (int(p) << 64) | int(k), _TAG)
        for k, p in zip(keys.tolist(), passes.tolist(), strict=True)
    ]


class OriginRecords:
    """The record (key, pass) behind a stream element's origin `(p,)`, for a stream op.

    Finds the dataset the stream reads in order (`chute_samplers.reader_dataset`) on
    first use, then follows `p` down to the source (`chute_samplers.record_keys`).

    Example:
        >>> from chute_samplers import SequentialIter, ShuffleMap
        >>> reader = SequentialIter(ShuffleMap(range(4), seed=0))
        >>> first = next(reader)
        >>> OriginRecords(reader, "op").record(reader.origin)[0] == first
        True
    """

    def __init__(self, parent: Any, op: str) -> None:
        self._parent, self._op, self._records = parent, op, None

    def record(self, origin: tuple[int, ...] | None) -> tuple[int, int]:
        """`(key, pass)` of the record read at `origin`.

        Raises:
            InvalidArgumentError: the origin is not a position of a dataset read in order.
        """
        if self._records is None:
            self._records = reader_dataset(self._parent)
        if origin is None or len(origin) != 1 or self._records is None:
            raise InvalidArgumentError(
                f"{self._op}: the element's origin {origin} is not a position of a "
                "random-access dataset read in order, so its record is not known (after a "
                "flat map, a mix, a repeat of the stream, or over a stream source such as "
                "ParquetStream or a custom iterator); use it before those stages, or draw "
                'by position (key="position").'
            )
        keys, passes = record_keys(
            self._records, np.array(origin, np.int64), np.zeros(1, np.uint64)
        )
        return int(keys[0]), int(passes[0])


def random_map_parts(
    fn: Any, seed: int, key: str, owner: str
) -> tuple[Callable[[Any, np.random.Generator], Any], int, bool]:
    """A random map's function, its seed (checked now, not in a worker) and its key kind.

    What `RandomMapMap` and `RandomMapIter` both make of their arguments: the function
    (a `RandomMapTransform` or a callable of `(element, rng)`), the seed, and whether
    the generators are keyed by record (`key="record"`) rather than by position.

    Example:
        >>> fn, seed, by_record = random_map_parts(lambda x, rng: x, 3, "record", "docs")
        >>> seed, by_record
        (3, True)
    """
    record_rng(seed, 0, "random_map")  # Raises now for a seed the generators refuse.
    return as_random_map_fn(fn), seed, check_key_kind(key, owner)
