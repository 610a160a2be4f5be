"""Per-record randomness: a NumPy `Generator` that is a pure function of (seed, op, position).

The bit generator is Philox-4x64 (counter-based): the 128-bit key is a hash of
`(seed, op)` and the record's position sits in the upper half of the 256-bit counter,
so the streams of different positions never overlap (each has 2**128 counter steps of
its own) and any position's generator is built in O(1). The hash is chute's own integer
mixing (`_hashing`) and Philox is specified bit for bit, so the draws are the same on
every platform and NumPy version; the tests pin a few of them.

Building a `Philox` with `key=` makes NumPy hash a throw-away `SeedSequence` first (about
10 µs); handing it the key through a tiny seed-sequence object instead builds the very
same bit generator in about 2 µs. The object also implements `spawn`, so
`rng.spawn(n)` works and is deterministic too.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.random.bit_generator import ISpawnableSeedSequence

from chute_core import StageTraits, declare_op
from chute_core.internal import check_int, check_seed

from ._hashing import MASK64, hash_ints, tag

__all__ = ["SEED", "record_rng", "record_rngs"]

_TAG = tag("chute.record_rng")
_SPAWN_TAG = tag("chute.record_rng.spawn")


class _PhiloxKey(ISpawnableSeedSequence):
    """Hands a precomputed Philox key to `numpy.random.Philox` (see the module docstring)."""

    __slots__ = ("_array", "_key", "n_children_spawned")

    def __init__(self, key: tuple[int, int], array: npt.NDArray[np.uint64] | None = None) -> None:
        self._key = key
        self._array = np.array(key, dtype=np.uint64) if array is None else array
        self.n_children_spawned = 0

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> npt.NDArray[Any]:
        if n_words != 2 or np.dtype(dtype) != np.uint64:
            raise ValueError("chute's record generators hold a Philox key (2 uint64 words) only.")
        return self._array  # Philox copies the words into its own state.

    def spawn(self, n_children: int) -> list[_PhiloxKey]:
        start = self.n_children_spawned
        self.n_children_spawned += n_children
        return [
            _PhiloxKey(
                (
                    hash_ints(_SPAWN_TAG, *self._key, child, 0),
                    hash_ints(_SPAWN_TAG, *self._key, child, 1),
                )
            )
            for child in range(start, start + n_children)
        ]

    def __reduce__(self) -> tuple[type[_PhiloxKey], tuple[tuple[int, int]]]:
        return (_PhiloxKey, (self._key,))


def _op_value(op: int | str) -> int:
    if isinstance(op, str):
        return tag(op)
    return check_int(op, "op", "record_rng", maximum=MASK64)


@functools.lru_cache(maxsize=256)
def _key_words(seed: int, op: int | str) -> tuple[int, int]:
    seed = check_seed(seed, "record_rng")
    value = _op_value(op)
    return (hash_ints(_TAG, seed, value, 0), hash_ints(_TAG, seed, value, 1))


@functools.lru_cache(maxsize=256)
def _key_array(seed: int, op: int | str) -> npt.NDArray[np.uint64]:
    """`_key_words` as the array Philox copies; shared, so never handed out to change."""
    array = np.array(_key_words(seed, op), dtype=np.uint64)
    array.flags.writeable = False
    return array


_NO_COUNTER = np.zeros(4, dtype=np.uint64)


def record_rng(seed: int, position: int, op: int | str = 0) -> np.random.Generator:
    """Returns the generator of the record at `position` for the op `op` under `seed`.

    Args:
        seed: an int in `[0, 2**64)`.
        position: the record's position in the stream, `0 <= position < 2**128`.
        op: which operation draws (an int, or a name hashed stably), so two random ops
            on the same record get independent streams.

    Returns:
        A fresh `numpy.random.Generator(Philox)`; the same arguments always give the
        same draws.

    Example:
        >>> rng = record_rng(seed=0, position=5)
        >>> rng.random() == record_rng(seed=0, position=5).random()
        True
        >>> type(rng.bit_generator).__name__
        'Philox'
    """
    counter = _NO_COUNTER.copy()
    if type(position) is int and 0 <= position <= MASK64:  # The common case, checked fast.
        counter[2] = position
    else:
        position = check_int(position, "position", "record_rng", maximum=2**128 - 1)
        counter[2], counter[3] = position & MASK64, position >> 64
    # A new key object per call: `spawn` counts children on it, as SeedSequence does.
    key = _PhiloxKey(_key_words(seed, op), _key_array(seed, op))
    # numpy accepts any ISeedSequence at runtime; its stubs name only SeedSequence.
    bit_generator = np.random.Philox(key, counter=counter)  # type: ignore[arg-type]
    return np.random.Generator(bit_generator)


def record_rngs(
    seed: int, positions: Sequence[int] | npt.NDArray[np.integer], op: int | str = 0
) -> list[np.random.Generator]:
    """Returns `[record_rng(seed, p, op) for p in positions]`, built faster.

    Args:
        seed: an int in `[0, 2**64)`.
        positions: non-negative positions below `2**63`.
        op: as in `record_rng`.

    Returns:
        One fresh generator per position, in order.

    Example:
        >>> [g.random() for g in record_rngs(0, [5, 6])] == [
        ...     record_rng(0, 5).random(), record_rng(0, 6).random()]
        True
    """
    words = _key_words(seed, op)
    shared = np.array(words, dtype=np.uint64)
    array = np.asarray(positions)
    if array.size and (array.dtype.kind not in "iu" or int(array.min()) < 0):
        raise ValueError(f"record_rngs: positions must be non-negative integers, got {array!r}.")
    counters = np.zeros((array.size, 4), dtype=np.uint64)
    counters[:, 2] = array.reshape(-1)
    philox, generator = np.random.Philox, np.random.Generator
    # One key object per generator: each counts its own spawned children.
    return [
        generator(philox(_PhiloxKey(words, shared), counter=counter))  # type: ignore[arg-type]
        for counter in counters
    ]


SEED = declare_op("seed", StageTraits(keeps_positions=True))
"""The op's declaration (see `chute_core.declare_op`)."""
