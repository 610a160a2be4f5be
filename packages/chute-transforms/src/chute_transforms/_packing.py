"""What the packers share: reading an element as 1-D sequences, building a row, counting.

A packed row is a dict with, for every packed key `k`: `k` (the tokens, padded with 0
to the row length, in the elements' dtype), `k_segment_ids` (int32: 1 for the first
segment of the row, 2 for the second, ..., 0 for padding) and `k_positions` (int32:
0, 1, 2, ... inside each segment, 0 for padding). Rows are built with a handful of
NumPy calls per key, whatever their number of tokens.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from chute_core import StageTraits, declare_op
from chute_core.internal import check_int

from ._errors import PackingError

__all__ = [
    "PACK",
    "PackedRow",
    "PaddingCounts",
    "build_row",
    "check_length",
    "output_keys",
    "read_sequences",
]

PackedRow = dict[str, npt.NDArray[Any]]
"""One packed row: tokens, `<key>_segment_ids` and `<key>_positions` per packed key."""

SUFFIXES = ("_segment_ids", "_positions")


class PaddingCounts:
    """How full the rows a packer returned are: token slots filled, and padding.

    Counts every row this iterator object returned, across `set_state` (the counts are
    not part of the state: a restored iterator counts from 0). Summed over all keys.
    """

    _tokens_emitted = 0
    _slots_emitted = 0

    @property
    def tokens_emitted(self) -> int:
        """Tokens (non-padding slots) in the rows returned so far."""
        return self._tokens_emitted

    @property
    def slots_emitted(self) -> int:
        """Slots (tokens and padding) in the rows returned so far."""
        return self._slots_emitted

    @property
    def padding_fraction(self) -> float:
        """The fraction of the returned rows' slots that are padding (0.0 before any row)."""
        slots = self._slots_emitted
        return 0.0 if not slots else (slots - self._tokens_emitted) / slots

    def _count_row(self, tokens: int, slots: int) -> None:
        self._tokens_emitted += tokens
        self._slots_emitted += slots


def check_length(owner: str, name: str, value: object) -> int:
    """Returns `value` as an int >= 1, else raises TypeError / ValueError (`check_int`)."""
    return check_int(value, name, owner, minimum=1)


def output_keys(owner: object, keys: Sequence[str]) -> None:
    """Raises `PackingError` if the output names of `keys` collide or are not str."""
    names: set[str] = set()
    for key in keys:
        if not isinstance(key, str):
            raise PackingError(f"{owner!r}: element keys must be str, got {key!r}.")
        for name in (key, *(key + suffix for suffix in SUFFIXES)):
            if name in names:
                raise PackingError(
                    f"{owner!r}: the output key {name!r} would be written twice: rename the "
                    f"element keys so that none ends in {SUFFIXES[0]!r} or {SUFFIXES[1]!r} "
                    f"of another key."
                )
            names.add(name)


def read_sequences(owner: object, element: object, keys: Sequence[str]) -> list[npt.NDArray[Any]]:
    """The 1-D arrays of `element` under `keys`, in that order.

    Raises:
        PackingError: `element` is not a mapping with exactly `keys`, or a value is not
            1-D (lists are converted with `np.asarray`).
    """
    if type(element) is not dict and not isinstance(element, Mapping):
        raise PackingError(
            f"{owner!r}: packing needs elements that are dicts of 1-D arrays (e.g. "
            f"{{'tokens': array([...])}}), got {type(element).__name__}. Wrap bare "
            f"sequences in a dict with a map first."
        )
    if len(element) != len(keys) or any(key not in element for key in keys):
        found = list(element)
        raise PackingError(
            f"{owner!r}: element has keys {found} but packing expects exactly {list(keys)} "
            f"(missing {[k for k in keys if k not in element]}, extra "
            f"{[k for k in found if k not in keys]}). Drop or add keys in a map first."
        )
    arrays = []
    for key in keys:
        value = element[key]
        array = value if type(value) is np.ndarray else np.asarray(value)
        if array.ndim != 1 or array.dtype.hasobject:
            raise PackingError(
                f"{owner!r}: element[{key!r}] must be a 1-D array of numbers, got dtype "
                f"{array.dtype} with shape {array.shape}."
            )
        arrays.append(array)
    return arrays


def build_row(
    owner: object,
    keys: Sequence[str],
    pieces: Sequence[Sequence[npt.NDArray[Any]]],
    lengths: Sequence[int],
) -> PackedRow:
    """Packs `pieces[k]` (the segments of key `keys[k]`, in order) into one row each.

    Segment `j` (0-based) of every key gets segment id `j + 1`, so ids match across keys
    even where a segment is empty in one key.
    """
    row: PackedRow = {}
    for key, segments, length in zip(keys, pieces, lengths, strict=True):
        sizes = [len(segment) for segment in segments]
        total = sum(sizes)
        values = np.zeros(length, segments[0].dtype)
        try:
            np.concatenate(segments, out=values[:total], casting="no")
        except TypeError:
            dtypes = sorted({str(s.dtype) for s in segments})
            raise PackingError(
                f"{owner!r}: the elements packed into one row have dtypes {dtypes} under "
                f"{key!r}; give every element the same dtype (e.g. in a map)."
            ) from None
        row[key] = values
        row[key + SUFFIXES[0]], row[key + SUFFIXES[1]] = _segments(sizes, total, length)
    return row


def _segments(
    sizes: list[int], total: int, length: int
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    """Segment ids (1-based, 0 for padding) and positions of a row with these segments."""
    segment_ids = np.zeros(length, np.int32)
    positions = np.zeros(length, np.int32)
    counting = _arange(max(length, len(sizes)))  # Ids can outnumber tokens (empty ones).
    if len(sizes) <= 8:  # One slice assignment per segment: faster for few segments.
        start = 0
        for number, size in enumerate(sizes, 1):
            segment_ids[start : start + size] = number
            positions[start : start + size] = counting[:size]
            start += size
        return segment_ids, positions
    counts = np.array(sizes, np.int64)
    segment_ids[:total] = np.repeat(counting[1 : len(sizes) + 1], counts)
    starts = np.cumsum(counts) - counts
    positions[:total] = counting[:total] - np.repeat(starts, counts)
    return segment_ids, positions


@functools.lru_cache(maxsize=16)
def _arange(length: int) -> npt.NDArray[np.int32]:
    """`0 .. length` as int32 (read-only, shared): the source of ids and positions."""
    counting = np.arange(length + 1, dtype=np.int32)
    counting.flags.writeable = False
    return counting


PACK = declare_op(
    "pack",
    # It holds the elements of its open rows (see `_pack_states`), and each row merges
    # several elements, so later stages see rows, not positions.
    StageTraits(holds=True, merges=True),
)
"""The op's declaration (see `chute_core.declare_op`)."""
