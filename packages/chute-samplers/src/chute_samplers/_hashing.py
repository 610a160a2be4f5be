"""64-bit mixing and key derivation: the integer hashing every sampler's randomness uses.

Pure Python integers, so the values are the same on every platform and NumPy version;
`mix64_array` is the same function on `uint64` arrays (NumPy wraps array arithmetic
modulo 2**64 without warnings).
"""

from __future__ import annotations

import hashlib

import numpy as np
import numpy.typing as npt

__all__ = ["MASK64", "hash_ints", "mix64", "mix64_array", "origin_key", "tag"]

MASK64 = (1 << 64) - 1
_MUL1 = 0xBF58476D1CE4E5B9
_MUL2 = 0x94D049BB133111EB
_GOLDEN = 0x9E3779B97F4A7C15
_START = 0x243F6A8885A308D3


def mix64(x: int) -> int:
    """The SplitMix64 finaliser: a bijection of 64-bit integers with full avalanche."""
    x &= MASK64
    x = ((x ^ (x >> 30)) * _MUL1) & MASK64
    x = ((x ^ (x >> 27)) * _MUL2) & MASK64
    return x ^ (x >> 31)


def mix64_array(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """`mix64` applied in place to a 1-d `uint64` array (which is also returned)."""
    x ^= x >> 30
    x *= _MUL1
    x ^= x >> 27
    x *= _MUL2
    x ^= x >> 31
    return x


def hash_ints(*values: int) -> int:
    """Hashes a sequence of integers (each taken modulo 2**64) to one 64-bit integer."""
    h = _START
    for value in values:
        h = mix64(((h ^ (value & MASK64)) + _GOLDEN) & MASK64)
    return h


def tag(name: str) -> int:
    """A stable 64-bit integer for a name (BLAKE2b, not Python's salted `hash`)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


_ORIGIN_TAG = tag("chute.origin_key")
_ORIGIN_LANES = (hash_ints(_ORIGIN_TAG, 0), hash_ints(_ORIGIN_TAG, 1))
_TOP_BIT = 1 << 127
_LOW63 = (1 << 63) - 1


def origin_key(origin: tuple[int, ...]) -> int:
    """A 128-bit `record_rng` position for an element's origin of two or more ints.

    `2**127 | (hash_ints(t, 0, *origin) % 2**63) << 64 | hash_ints(t, 1, *origin)`, `t`
    the tag of "chute.origin_key": two independent 64-bit lanes over the tag, the lane
    and the origin's ints (each taken modulo 2**64), with the top bit set, so it never
    equals a plain position (< 2**63) nor a `(epoch << 64) | position` key of an epoch
    below 2**63. Computed in one loop from the lanes' precomputed prefixes: the same
    values as those `hash_ints` calls, in about half the time.

    Example:
        >>> key = origin_key((3, 0))
        >>> key >= 2**127, key == origin_key((3, 0)), key != origin_key((3, 0, 0))
        (True, True, True)
        >>> key & MASK64 == hash_ints(tag("chute.origin_key"), 1, 3, 0)
        True
    """
    high, low = _ORIGIN_LANES
    for value in origin:
        value &= MASK64
        x = ((high ^ value) + _GOLDEN) & MASK64
        x = ((x ^ (x >> 30)) * _MUL1) & MASK64
        x = ((x ^ (x >> 27)) * _MUL2) & MASK64
        high = x ^ (x >> 31)
        x = ((low ^ value) + _GOLDEN) & MASK64
        x = ((x ^ (x >> 30)) * _MUL1) & MASK64
        x = ((x ^ (x >> 27)) * _MUL2) & MASK64
        low = x ^ (x >> 31)
    return _TOP_BIT | (high & _LOW63) << 64 | low
