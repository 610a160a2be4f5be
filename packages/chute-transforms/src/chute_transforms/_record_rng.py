"""Randomness keyed by the record: `random_map(..., key="record")`."""

from __future__ import annotations

import numpy as np

from chute_samplers import EpochArray, PositionArray, record_rng
from chute_sources import InvalidArgumentError

__all__ = ["KEY_KINDS", "check_key_kind", "record_key_rngs"]

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
