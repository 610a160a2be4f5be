"""`FirstFitPackIter`: first-fit packing of variable-length sequences into fixed rows."""

from __future__ import annotations

from ._bin_packing import BinPackIter

__all__ = ["FirstFitPackIter"]


class FirstFitPackIter(BinPackIter):
    """Packs dicts of 1-D arrays into fixed-length rows, first fit over open rows.

    Keeps up to `num_packing_bins` open rows, in the order they were opened. Each
    element goes into the first open row with room for it under every key; a row is
    emitted as soon as one of its keys is full (or it holds `max_sequences_per_bin`
    elements). An element that fits no open row opens a new one; if
    `num_packing_bins` rows are open already, the oldest row is emitted first (so rows
    come out roughly in stream order and an element waits in at most
    `num_packing_bins` rows' worth of data). At the end the open rows are emitted,
    oldest first. Each element is one segment of its row (for every key, so segment
    ids match across keys); an element without tokens in any key is skipped; an
    element longer than the row is **truncated** to the row length (its tail is
    dropped: use `ConcatSplitIter` to keep every token). `BestFitPackIter` fills rows
    better, at the same cost.

    Output rows: see `_packing` (`k`, `k_segment_ids`, `k_positions` per key `k`).

    State: `{"parent": <parent state before the oldest element still in an open row>,
    "read": <elements read since>, "bins": [[offsets of the elements of each open row,
    from that element], ...]}`. No tokens: restoring re-reads those `read` elements
    (lazily, at the next `next()`) and puts them back in their rows; elements already
    emitted are skipped. The state holds about one int per element in open rows. It
    costs one `parent.get_state()` call per element read. Not thread-safe.

    The `origin` of a row is the origin of its first element (segment 1, the element
    that opened the row). `padding_fraction` (with `tokens_emitted` and
    `slots_emitted`) says how much of the rows returned so far is padding.

    Args:
        parent: dicts of 1-D arrays (lists are converted with `np.asarray`).
        length: the row length; a dict gives one length per key (and names the keys
            packed: elements must have exactly those keys), an int applies to every
            key of the elements.
        num_packing_bins: how many rows are open at once (more: fuller rows).
        max_sequences_per_bin: at most this many elements in a row (None: no limit).

    Example:
        >>> import numpy as np
        >>> from chute_samplers import SequentialIter
        >>> docs = [{"t": np.array([1, 2, 3])}, {"t": np.array([4, 5])}, {"t": np.array([6])}]
        >>> rows = list(FirstFitPackIter(SequentialIter(docs), length=4, num_packing_bins=2))
        >>> [row["t"].tolist() for row in rows]
        [[1, 2, 3, 6], [4, 5, 0, 0]]
        >>> rows[0]["t_segment_ids"].tolist(), rows[0]["t_positions"].tolist()
        ([1, 1, 1, 2], [0, 1, 2, 0])
        >>> it = FirstFitPackIter(SequentialIter(docs), length=4, num_packing_bins=2)
        >>> [it.origin for _ in it]  # The elements that opened the rows.
        [(0,), (1,)]
        >>> it.padding_fraction  # 2 of the 8 slots returned are padding.
        0.25
    """

    def _choose(self, need: list[int]) -> int:
        """The first open row (oldest first) with room for `need`, or -1.

        A plain loop: for the usual <= 64 rows it measured faster than NumPy calls.
        """
        if len(need) == 1:
            size = need[0]
            for slot, open_bin in enumerate(self._bins):
                if open_bin.free[0] >= size:
                    return slot
            return -1
        for slot, open_bin in enumerate(self._bins):
            if all(free >= size for free, size in zip(open_bin.free, need, strict=True)):
                return slot
        return -1
