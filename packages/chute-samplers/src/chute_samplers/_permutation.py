"""`Permutation`: a stateless keyed bijection of `[0, size)`, scalar and vectorised.

The cipher is an alternating (possibly unbalanced) Feistel network on the smallest
power-of-two domain `2**bits >= size` (`bits >= 2`), with `_ROUNDS` rounds whose round
function is the SplitMix64 finaliser of the right half XOR a round key. Round keys are
hashes of `(seed, epoch, round)`. Every round is a bijection of the domain, so the
network is one; *cycle walking* (re-encrypting until the value lands in `[0, size)`)
turns it into a bijection of `[0, size)`. Because the domain is less than twice the size,
a lookup takes fewer than two encryptions on average.

Nothing is stored but the keys: O(1) memory, O(1) per lookup, any position reachable
directly, for every size (no off-by-one at powers of two, the failure of Grain 0.2.18's
index shuffle at 65537 records).

Vectorised lookups of sizes up to 2**32 compute each round function once per value of
the half it reads (at most 2**16 values) into a table, after enough lookups to pay
for it (as many as the largest table has entries): a round is then a gather and an XOR
instead of the finaliser's eight array operations, several times faster, with the same
values.

Small sizes (up to `TABLE_SIZE`) are different: a Feistel network on a domain of a few
bits reaches only a small, uneven family of permutations (each round is an even
permutation of the domain). There the permutation is a table built once by a
Fisher-Yates shuffle whose swaps come from the same keyed hash, so every permutation is
(up to a 2**-50 bias) equally likely. The table is at most `TABLE_SIZE` int64s.
"""

from __future__ import annotations

import operator
from typing import SupportsIndex

import numpy as np
import numpy.typing as npt

from chute_core import RecordIndexError
from chute_core.internal import check_int, check_seed

from ._hashing import hash_ints, mix64, mix64_array, tag

__all__ = ["MAX_SIZE", "TABLE_SIZE", "Permutation"]

_ROUNDS = 6
_CHUNK = 1 << 14
_TABLE_CHUNK = 1 << 15
_TAG = tag("chute.permutation")
MAX_SIZE = 2**63
"""The largest supported size (positions are int64)."""
TABLE_SIZE = 1 << 12
"""Sizes up to this use a Fisher-Yates table instead of the Feistel network."""
_ROUND_TABLE_BITS = 16  # Halves of up to this many bits get round tables.


def _fisher_yates(size: int, key0: int, key1: int) -> npt.NDArray[np.int64]:
    steps = np.arange(size, dtype=np.uint64)
    draws = mix64_array(mix64_array(steps ^ np.uint64(key0)) ^ np.uint64(key1))
    draws %= np.maximum(steps, np.uint64(1)) + np.uint64(
        1
    )  # draws[i] is uniform in [0, i] (bias < 2**-50).
    swaps: list[int] = draws.tolist()
    table = list(range(size))
    for i in range(size - 1, 0, -1):
        j = swaps[i]
        table[i], table[j] = table[j], table[i]
    return np.array(table, dtype=np.int64)


class Permutation:
    """A pseudo-random permutation of `range(size)`, chosen by `(seed, epoch)`.

    `perm[i]` is the value at position `i`, computed in O(1) without storing the
    permutation; `perm.take(positions)` computes many at once with NumPy and returns the
    same values. `perm.index(value)` inverts it. Different epochs give unrelated
    permutations, so a sampler reshuffles each epoch by changing `epoch` only.

    Args:
        size: the number of elements, `0 <= size <= 2**63`.
        seed: an int in `[0, 2**64)`.
        epoch: an int in `[0, 2**64)`; one permutation per epoch.

    Example:
        >>> perm = Permutation(10, seed=0)
        >>> values = [perm[i] for i in range(10)]
        >>> sorted(values) == list(range(10))
        True
        >>> perm.take([0, 1, 2]).tolist() == values[:3]
        True
        >>> perm.index(values[7])
        7
        >>> Permutation(10, seed=0, epoch=1).take(range(10)).tolist() != values
        True
    """

    __slots__ = (
        "_bits",
        "_epoch",
        "_inverse",
        "_keys",
        "_left_bits",
        "_right_bits",
        "_round_tables",
        "_seed",
        "_size",
        "_table",
        "_walked",
    )

    def __init__(self, size: int, seed: int, epoch: int = 0) -> None:
        self._size = check_int(size, "size", "Permutation", maximum=MAX_SIZE)
        self._seed = check_seed(seed, "Permutation")
        self._epoch = check_int(epoch, "epoch", "Permutation", maximum=2**64 - 1)
        self._bits = max(2, (self._size - 1).bit_length())
        self._right_bits = self._bits // 2
        self._left_bits = self._bits - self._right_bits
        self._keys = tuple(hash_ints(_TAG, self._seed, self._epoch, r) for r in range(_ROUNDS))
        self._table: npt.NDArray[np.int64] | None = None
        self._inverse: npt.NDArray[np.int64] | None = None
        self._round_tables: tuple[npt.NDArray[np.int64], ...] | None = None
        self._walked = 0  # Positions the vectorised path computed without round tables.
        if self._size <= TABLE_SIZE:
            self._table = _fisher_yates(self._size, self._keys[0], self._keys[1])

    @property
    def size(self) -> int:
        """The number of elements."""
        return self._size

    @property
    def seed(self) -> int:
        """The seed."""
        return self._seed

    @property
    def epoch(self) -> int:
        """The epoch."""
        return self._epoch

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"Permutation(size={self._size}, seed={self._seed}, epoch={self._epoch})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Permutation):
            return NotImplemented
        return (self._size, self._seed, self._epoch) == (other._size, other._seed, other._epoch)

    def __hash__(self) -> int:
        return hash((Permutation, self._size, self._seed, self._epoch))

    def __reduce__(self) -> tuple[type[Permutation], tuple[int, int, int]]:
        return (Permutation, (self._size, self._seed, self._epoch))

    # Scalar path -------------------------------------------------------------------

    def _check_position(self, position: SupportsIndex, what: str = "position") -> int:
        try:
            value = operator.index(position)
        except TypeError:
            raise TypeError(
                f"{self!r}: {what}s are integers, got {type(position).__name__} {position!r}."
            ) from None
        checked = value + self._size if value < 0 else value
        if not 0 <= checked < self._size:
            raise RecordIndexError(
                f"{self!r}: {what} {value} is out of range [0, {self._size}) "
                "(negative values count from the end)."
            )
        return checked

    def _encrypt(self, x: int) -> int:
        left_bits, right_bits = self._left_bits, self._right_bits
        left, right = x >> right_bits, x & ((1 << right_bits) - 1)
        for key in self._keys:
            left, right = right, left ^ (mix64(right ^ key) & ((1 << left_bits) - 1))
            left_bits, right_bits = right_bits, left_bits
        return (left << right_bits) | right

    def _decrypt(self, y: int) -> int:
        left_bits, right_bits = self._left_bits, self._right_bits
        if _ROUNDS % 2:
            left_bits, right_bits = right_bits, left_bits
        left, right = y >> right_bits, y & ((1 << right_bits) - 1)
        for key in reversed(self._keys):
            left, right = right ^ (mix64(left ^ key) & ((1 << right_bits) - 1)), left
            left_bits, right_bits = right_bits, left_bits
        return (left << right_bits) | right

    def __getitem__(self, position: SupportsIndex) -> int:
        """Returns the value at `position` (pure Python, O(1))."""
        if self._table is not None:
            return int(self._table[self._check_position(position)])
        x = self._encrypt(self._check_position(position))
        while x >= self._size:
            x = self._encrypt(x)
        return x

    def index(self, value: SupportsIndex) -> int:
        """Returns the position at which `value` appears (the inverse permutation)."""
        if self._table is not None:
            return int(self._inverse_table()[self._check_position(value, "value")])
        y = self._decrypt(self._check_position(value, "value"))
        while y >= self._size:
            y = self._decrypt(y)
        return y

    # Vectorised path ---------------------------------------------------------------

    def _check_array(self, values: npt.ArrayLike, what: str) -> npt.NDArray[np.uint64]:
        array = np.asarray(values)
        if array.size == 0:
            return np.zeros(array.shape, dtype=np.uint64)
        if array.dtype.kind not in "iu":
            raise TypeError(f"{self!r}: {what}s must be integers, got an array of {array.dtype}.")
        if array.dtype.kind == "i" and int(array.min()) < 0:
            # `+ (size - 1) + 1`, not `+ size`: size may be 2**63, beyond int64.
            array = np.where(array < 0, array + (self._size - 1) + 1, array)
            low = int(array.min())
            if low < 0:
                raise RecordIndexError(
                    f"{self!r}: {what} {low - self._size} is out of range [0, {self._size}) "
                    "(negative values count from the end)."
                )
        high = int(array.max())
        if high >= self._size:
            raise RecordIndexError(f"{self!r}: {what} {high} is out of range [0, {self._size}).")
        if array.dtype == np.int64:
            return array.view(np.uint64)  # Non-negative: the same values, no copy (never written).
        return array.astype(np.uint64)

    def _encrypt_array(self, x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        left_bits, right_bits = self._left_bits, self._right_bits
        left, right = x >> np.uint64(right_bits), x & np.uint64((1 << right_bits) - 1)
        for key in self._keys:
            f = mix64_array(right ^ np.uint64(key))
            f &= np.uint64((1 << left_bits) - 1)
            f ^= left
            left, right = right, f
            left_bits, right_bits = right_bits, left_bits
        left <<= np.uint64(right_bits)
        left |= right
        return left

    def _decrypt_array(self, y: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        left_bits, right_bits = self._left_bits, self._right_bits
        if _ROUNDS % 2:
            left_bits, right_bits = right_bits, left_bits
        left, right = y >> np.uint64(right_bits), y & np.uint64((1 << right_bits) - 1)
        for key in reversed(self._keys):
            f = mix64_array(left ^ np.uint64(key))
            f &= np.uint64((1 << right_bits) - 1)
            f ^= right
            left, right = f, left
            left_bits, right_bits = right_bits, left_bits
        left <<= np.uint64(right_bits)
        left |= right
        return left

    def _inverse_table(self) -> npt.NDArray[np.int64]:
        assert self._table is not None
        if self._inverse is None:
            inverse = np.empty_like(self._table)
            inverse[self._table] = np.arange(self._size, dtype=np.int64)
            self._inverse = inverse
        return self._inverse

    def _walk(self, x: npt.NDArray[np.uint64], step: str) -> npt.NDArray[np.int64]:
        if self._table is not None:
            table = self._table if step == "encrypt" else self._inverse_table()
            return table[x.astype(np.int64)]
        flat = x.reshape(-1)
        tables = self._tables_for(flat.size)
        if tables is not None:
            return self._walk_tables(flat, tables, step).reshape(x.shape)
        cipher = self._encrypt_array if step == "encrypt" else self._decrypt_array
        out = np.empty(flat.shape, dtype=np.int64)
        # Chunks that fit in the L2 cache: several times faster than whole-array passes.
        for begin in range(0, flat.size, _CHUNK):
            chunk = cipher(flat[begin : begin + _CHUNK])
            pending = np.flatnonzero(chunk >= self._size)
            while pending.size:
                again = cipher(chunk[pending])
                chunk[pending] = again
                pending = pending[again >= self._size]
            out[begin : begin + _CHUNK] = chunk
        return out.reshape(x.shape)

    def _tables_for(self, count: int) -> tuple[npt.NDArray[np.int64], ...] | None:
        """The round tables, built once `count` more lookups make them pay; else None."""
        tables = self._round_tables
        if tables is not None or self._left_bits > _ROUND_TABLE_BITS:
            return tables
        self._walked += count
        if self._walked < 1 << self._left_bits:
            return None
        built = []
        left_bits, right_bits = self._left_bits, self._right_bits
        for key in self._keys:
            # Round r maps the `right_bits` half to `left_bits` bits: one entry per value.
            f = mix64_array(np.arange(1 << right_bits, dtype=np.uint64) ^ np.uint64(key))
            f &= np.uint64((1 << left_bits) - 1)
            built.append(f.astype(np.int64))
            left_bits, right_bits = right_bits, left_bits
        self._round_tables = tables = tuple(built)
        return tables

    def _cipher_tables(
        self, x: npt.NDArray[np.int64], tables: tuple[npt.NDArray[np.int64], ...], step: str
    ) -> npt.NDArray[np.int64]:
        """`_encrypt_array` / `_decrypt_array` with each round function looked up."""
        left_bits, right_bits = self._left_bits, self._right_bits
        if step == "encrypt":
            left, right = x >> right_bits, x & ((1 << right_bits) - 1)
            for table in tables:
                f = table.take(right)
                f ^= left
                left, right = right, f
                left_bits, right_bits = right_bits, left_bits
        else:
            if _ROUNDS % 2:
                left_bits, right_bits = right_bits, left_bits
            left, right = x >> right_bits, x & ((1 << right_bits) - 1)
            for table in reversed(tables):
                f = table.take(left)
                f ^= right
                left, right = f, left
                left_bits, right_bits = right_bits, left_bits
        left <<= right_bits
        left |= right
        return left

    def _walk_tables(
        self, flat: npt.NDArray[np.uint64], tables: tuple[npt.NDArray[np.int64], ...], step: str
    ) -> npt.NDArray[np.int64]:
        """`_walk` with round tables (values below 2**32, so int64 throughout)."""
        out = np.empty(flat.shape, dtype=np.int64)
        values = flat.view(np.int64)  # Below 2**32: the same bits.
        for begin in range(0, flat.size, _TABLE_CHUNK):
            chunk = self._cipher_tables(values[begin : begin + _TABLE_CHUNK], tables, step)
            pending = np.flatnonzero(chunk >= self._size)
            while pending.size:
                again = self._cipher_tables(chunk[pending], tables, step)
                chunk[pending] = again
                pending = pending[again >= self._size]
            out[begin : begin + _TABLE_CHUNK] = chunk
        return out

    def take(self, positions: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Returns the values at many positions at once, as an int64 array.

        Identical to `[perm[i] for i in positions]`, computed with NumPy (cycle walking
        repeats only on the elements that are still out of range).
        """
        return self._walk(self._check_array(positions, "position"), "encrypt")

    def index_many(self, values: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Vectorised `index`: the positions of many values at once."""
        return self._walk(self._check_array(values, "value"), "decrypt")

    def __getitems__(self, positions: npt.ArrayLike) -> list[int]:
        """Returns the values at `positions` as a list (the batched source protocol)."""
        result: list[int] = self.take(positions).tolist()
        return result
