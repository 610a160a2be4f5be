"""Positions in the order they were read, when that order is not ascending.

A packer after a window shuffle reads its elements in the window's shuffled order, so
their positions are not ascending, and a `span` (`_window_states`) alone cannot say
which element was at which position. `named_origins` then writes the `span` of the
positions sorted, and `order`: base64 of each element's rank among them, in the order
read (little-endian uint16, or uint32 beyond 65,536 elements). `ordered_positions`
reads the pair back. A state so holds two or four bytes per element beyond its `span`.
Elements of an interleave (two-int origins: the stream's input and the position in it)
are named as a window over an interleave names them (`reads`, see `window_reads`).

Example:
    >>> named_origins([(4,), (5,)]), named_origins([(6,), (4,), (5,)])
    ({'span': [4, 2]}, {'span': [4, 3], 'order': 'AgAAAAEA'})
    >>> named_origins([(3, 0), (1, 4)])
    {'reads': [[[1, [4, 1]], [3, [0, 1]]], 'AQA=']}
    >>> ordered_positions([4, 3], "AgAAAAEA", "state").tolist()
    [6, 4, 5]
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from chute_core import InvalidStateError

from ._window_states import (
    MAX_SPAN_BITS,
    positions_span,
    reads_pairs,
    span_positions,
    window_reads,
)

__all__ = ["ordered_positions", "named_origins"]

_WIDE = 1 << 16
"""From this many elements on, a rank takes four bytes."""


def _rank_type(count: int) -> type[np.unsignedinteger[Any]]:
    return np.uint16 if count <= _WIDE else np.uint32


def named_origins(origins: Sequence[tuple[int, ...] | None]) -> dict[str, Any]:
    """The keys that name the positions of elements with `origins`, in the order read.

    `{"span": ...}` of one-int origins, with `"order"` when not ascending; `{"reads":
    ...}` of an interleave's two-int ones. Empty for other origins, or positions not
    distinct (the elements are then not positions of one shard, and resharding
    refuses them).
    """
    positions: list[int] = []
    for origin in origins:
        if origin is None or len(origin) != 1:
            reads = window_reads(origins)
            return {} if reads is None else {"reads": reads}
        positions.append(origin[0])
    span = positions_span(positions)
    if span is not None:
        return {"span": span}
    at = np.asarray(positions, dtype=np.int64)
    by_rank = np.argsort(at, kind="stable")
    ordered = at[by_rank]
    if np.any(ordered[1:] == ordered[:-1]):
        return {}
    rank = np.empty(len(at), dtype=_rank_type(len(at)))
    rank[by_rank] = np.arange(len(at))
    return {
        "span": positions_span(ordered.tolist()),
        "order": base64.b64encode(rank.astype("<" + rank.dtype.str[1:]).tobytes()).decode(),
    }


def ordered_positions(
    span: object, order: object, owner: str, limit: int = MAX_SPAN_BITS
) -> np.ndarray:
    """The positions `span` names, in the order `order` says (None: ascending).

    `limit`: the most positions they may name (checked before any is made).

    Raises:
        InvalidStateError: either is damaged (the message says how).
    """
    positions = span_positions(span, owner, limit)
    if order is None:
        return positions
    count = len(positions)
    dtype = np.dtype(_rank_type(count)).newbyteorder("<")
    if isinstance(order, str) and len(order) <= (count * dtype.itemsize + 2) // 3 * 4:
        try:
            raw = base64.b64decode(order, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) == count * dtype.itemsize:
            rank = np.frombuffer(raw, dtype).astype(np.int64)
            if np.array_equal(np.sort(rank), np.arange(count)):
                ranked: np.ndarray = positions[rank]
                return ranked
    raise InvalidStateError(
        f"{owner}: state['order'] is base64 of the rank of each of the {count} positions of "
        f"state['span'] in the order read, each once ({dtype.itemsize} bytes each, "
        f"little-endian), got {order!r:.80}."
    )


def named_count(named: Mapping[str, Any], owner: str, limit: int = MAX_SPAN_BITS) -> int:
    """How many elements `named` (the keys `named_origins` writes) names.

    Raises:
        InvalidStateError: damaged, or an `order` without a `span`, or `reads` beside one.

    Example:
        >>> named_count(named_origins([(6,), (4,), (5,)]), "state")
        3
    """
    if "reads" in named and not {"span", "order"} & set(named):
        return len(reads_pairs(named["reads"], owner, limit))
    if "span" in named and "reads" not in named:
        return len(ordered_positions(named["span"], named.get("order"), owner, limit))
    raise InvalidStateError(
        f"{owner}: a state names its elements by 'span' (with 'order' if not ascending) "
        f"or by 'reads', got the keys {sorted(named)}."
    )
