"""Grain's `index_shuffle` and `RngPool`, giving the numbers Grain gives.

`index_shuffle(index, max_index, seed, rounds)` is Grain's keyed permutation of
`[0, max_index]`: a Simon-style Feistel cipher on the smallest even block of at least
16 bits holding `max_index`, with round keys from C++'s `std::seed_seq{seed}`, and
cycle walking into range. It is reimplemented here from that description (in
Python integers), so code that builds its own orders on it keeps them. chute's own
shuffles use `chute_samplers.Permutation`.

`RngPool(seed)` hands out `numpy` Philox generators positioned at counter
`[0, 0, op_seed, index]`, as Grain's random maps draw.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from chute_core import InvalidArgumentError

__all__ = ["RngPool", "index_shuffle"]

_MASK32 = 0xFFFFFFFF


def _seed_seq(seed: int, count: int) -> list[int]:
    """`std::seed_seq{seed}.generate(...)`: `count` 32-bit words (the C++ algorithm)."""
    words = [0x8B8B8B8B] * count
    n = count
    t = 11 if n >= 623 else 7 if n >= 68 else 5 if n >= 39 else 3 if n >= 7 else (n - 1) // 2
    p = (n - t) // 2
    q = p + t
    m = max(2, n)  # max(s + 1, n) with one seed word.

    def mix(x: int) -> int:
        return x ^ (x >> 27)

    for k in range(m):
        r1 = (1664525 * mix(words[k % n] ^ words[(k + p) % n] ^ words[(k - 1) % n])) & _MASK32
        extra = 1 if k == 0 else (k % n + seed if k == 1 else k % n)
        r2 = (r1 + extra) & _MASK32
        words[(k + p) % n] = (words[(k + p) % n] + r1) & _MASK32
        words[(k + q) % n] = (words[(k + q) % n] + r2) & _MASK32
        words[k % n] = r2
    for k in range(m, m + n):
        total = (words[k % n] + words[(k + p) % n] + words[(k - 1) % n]) & _MASK32
        r3 = (1566083941 * mix(total)) & _MASK32
        r4 = (r3 - k % n) & _MASK32
        words[(k + p) % n] ^= r3
        words[(k + q) % n] ^= r4
        words[k % n] = r4
    return words


def _encrypt(value: int, keys: list[int], width: int) -> int:
    """One Simon-style encryption of a `2 * width`-bit block."""
    mask = (1 << width) - 1

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (width - r))) & mask

    def f(x: int) -> int:
        return (rotl(x, 1) & rotl(x, 8)) ^ rotl(x, 2)

    left, right = (value >> width) & mask, value & mask
    for i in range(0, len(keys), 2):
        left ^= f(right)
        left ^= keys[i] & mask
        right ^= f(left)
        right ^= keys[i + 1] & mask
    return (left << width) | right


def index_shuffle(index: int, max_index: int, seed: int, rounds: int) -> int:
    """The position of `index` in Grain's permutation of `[0, max_index]`.

    Args:
        index: an int in `[0, max_index]`.
        max_index: the largest index.
        seed: a 32-bit seed.
        rounds: an even number of rounds in `[4, 1024]`.

    Raises:
        ValueError: `rounds` or `index` out of range (Grain's errors).

    Example:
        >>> order = [index_shuffle(i, max_index=9, seed=3, rounds=4) for i in range(10)]
        >>> sorted(order) == list(range(10))
        True
    """
    for name, value in (("index", index), ("max_index", max_index), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"index_shuffle: {name} must be an int, got {value!r}.")
    if isinstance(rounds, bool) or not isinstance(rounds, int):
        raise TypeError(f"index_shuffle: rounds must be an int, got {rounds!r}.")
    if rounds < 4 or rounds % 2 or rounds > 1024:
        raise InvalidArgumentError(
            f"index_shuffle: rounds must be an even integer between 4 and 1024, got {rounds}."
        )
    if not 0 <= index <= max_index:
        raise InvalidArgumentError(
            f"index_shuffle: index must be in [0, max_index], got index {index} and "
            f"max_index {max_index}."
        )
    if not 0 <= seed <= _MASK32:
        raise InvalidArgumentError(f"index_shuffle: seed must be in [0, 2**32), got {seed}.")
    if max_index == 0:
        return 0
    block = math.ceil(math.log2(max_index))
    block = max(block + block % 2, 16)
    width = min(block, 64) // 2
    keys = _seed_seq(seed, rounds)
    value = index
    while True:
        value = _encrypt(value, keys, width)
        if value <= max_index:
            return value


class RngPool:
    """Reused NumPy Philox generators, each positioned for one draw site (Grain's).

    `acquire_rng(index, op_seed=...)` gives a generator whose counter is
    `[0, 0, op_seed, index]` under key `seed`, so the numbers depend only on
    `(seed, op_seed, index)`; `release_rng` returns it for reuse. Thread-safe.

    Example:
        >>> pool = RngPool(7)
        >>> rng = pool.acquire_rng(3)
        >>> first = rng.integers(1000)
        >>> pool.release_rng(rng)
        >>> int(pool.acquire_rng(3).integers(1000)) == int(first)
        True
    """

    def __init__(self, seed: int) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise TypeError(f"RngPool: seed must be an int >= 0, got {seed!r}.")
        self._seed = seed
        self._free: list[np.random.Generator] = []
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[RngPool], tuple[int]]:
        return (RngPool, (self._seed,))

    def acquire_rng(self, index: int, *, op_seed: int = 0) -> np.random.Generator:
        """A generator for draw site `(op_seed, index)`."""
        with self._lock:
            rng = self._free.pop() if self._free else None
        if rng is None:
            rng = np.random.Generator(np.random.Philox(self._seed))
        state: dict[str, Any] = dict(rng.bit_generator.state)
        state["state"]["counter"] = np.array([0, 0, op_seed, index], dtype=np.uint64)
        state["buffer"] = np.zeros(4, dtype=np.uint64)
        state["buffer_pos"] = 4
        state["has_uint32"] = 0
        state["uinteger"] = 0
        rng.bit_generator.state = state
        return rng

    def release_rng(self, rng: np.random.Generator) -> None:
        """Returns `rng` to the pool."""
        with self._lock:
            self._free.append(rng)
