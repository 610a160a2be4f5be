"""Which record of the source each position of a pipeline reads: `record_keys`.

A random-access pipeline reads every position from one position of one parent (a
shuffle permutes, a repeat wraps, a slice or a shard selects, an element op passes
through): each such node says where with `MapNode.parent_positions`. Following those down to
the first object that is not a node gives the record's key in the source (the index
`source[key]` reads) and its pass: a number that tells apart the passes of every
repeat on the way (a slice or a cache reads its parent in epoch 0 whatever the pass
above it, so the pass is folded from the epochs at every step, not only the last). A
random map keyed by the record (`random_map(..., key="record")`) draws from (seed,
key, pass): a record gets the same randomness wherever the pipeline places it, and
new randomness in each pass of a repeat.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chute_core import InvalidArgumentError

from ._iter_base import upstream_iterators
from ._node import EpochArray, MapNode, PositionArray

__all__ = ["prefetch_span", "reader_dataset", "record_keys"]


_FOLD = np.uint64(0x100000001B3)  # An odd multiplier (FNV's prime): folds passes.


def record_keys(
    dataset: Any, positions: PositionArray, epochs: EpochArray
) -> tuple[PositionArray, EpochArray]:
    """The source keys that `positions` of `dataset` (read in `epochs`) read, and passes.

    The pass is 0 for every read of a pipeline without repeats, and differs between
    the passes of any repeat on the way (see the module docs).

    Raises:
        InvalidArgumentError: a node on the way does not read each position from one
            position of one parent (a mix, a batch, a flat map, a zip, ...).

    Example:
        >>> from chute_samplers import RepeatMap, ShuffleMap, SliceMap
        >>> node = RepeatMap(SliceMap(range(10), slice(5, None)), num_epochs=2)
        >>> keys, passes = record_keys(node, np.array([0, 6]), np.zeros(2, np.uint64))
        >>> keys.tolist(), int(passes[0]) == 0, int(passes[1]) != 0
        ([5, 6], True, True)
    """
    passes = epochs.astype(np.uint64)
    while isinstance(dataset, MapNode):
        located = dataset.parent_positions(positions, epochs)
        if located is None:
            raise InvalidArgumentError(
                f"key='record': {type(dataset).__name__} does not read each position from "
                "one record of the source (it mixes, batches or splits elements), so "
                "the records' keys are not known after it; key the random map by record "
                "before that stage, or by position (key='position')."
            )
        dataset, positions, epochs = located
        with np.errstate(over="ignore"):  # Wraps around 2**64 on purpose.
            passes = passes * _FOLD + epochs.astype(np.uint64)
    return positions, passes


def prefetch_span(dataset: Any, start: int, stop: int) -> bool:
    """Tells the source under `dataset` that positions `[start, stop)` will be read soon.

    Follows the positions down to the source's keys (as `record_keys` does) and calls
    the source's `prefetch(keys)` if it has one (sources in buckets fetch those records
    ahead; a hint, the reads give the same records either way). Does nothing when a
    node on the way does not map positions to single records, or the source has no
    `prefetch`.

    Returns:
        Whether a source was told.

    Example:
        >>> from chute_samplers import ShuffleMap
        >>> class Source(list):
        ...     def prefetch(self, keys):
        ...         print("soon:", sorted(keys.tolist()))
        >>> prefetch_span(ShuffleMap(Source(range(6)), seed=0), 0, 6)
        soon: [0, 1, 2, 3, 4, 5]
        True
    """
    if stop <= start:
        return False
    positions = np.arange(start, stop, dtype=np.int64)
    epochs = np.zeros(positions.size, dtype=np.uint64)
    while isinstance(dataset, MapNode):
        located = dataset.parent_positions(positions, epochs)
        if located is None:
            return False
        dataset, positions, epochs = located
    prefetch = getattr(dataset, "prefetch", None)
    if not callable(prefetch):
        return False
    prefetch(positions)
    return True


def reader_dataset(iterator: object) -> Any | None:
    """The random-access dataset a chain of stream ops reads in order, if it has one.

    Follows `upstream_iterators` while each iterator has exactly one parent; the last
    one's `dataset` (a reader's: `SequentialIter`, a threaded reader, a worker's chunk
    reader), or None if the chain branches or ends elsewhere. Its elements' origins
    `(p,)` are positions of that dataset.

    Example:
        >>> from chute_samplers import SequentialIter
        >>> reader_dataset(SequentialIter(range(3)))
        range(0, 3)
    """
    current = iterator
    while True:
        parents = upstream_iterators(current)
        if not parents:
            return getattr(current, "dataset", None)
        if len(parents) > 1:
            return None
        current = parents[0]
