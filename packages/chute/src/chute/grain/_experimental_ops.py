"""Grain's experimental dataset classes and functions, as spellings of chute's methods."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from chute_core import InvalidArgumentError
from chute_core.internal import assert_resumes, check_int
from chute_transforms import batch_elements

__all__ = [
    "CacheIterDataset",
    "FlatMapIterDataset",
    "FlatMapMapDataset",
    "LimitIterDataset",
    "RebatchIterDataset",
    "RepeatIterDataset",
    "ZipIterDataset",
    "ZipMapDataset",
    "apply_transformations",
    "assert_equal_output_after_checkpoint",
    "batch_and_pad",
    "get_element_spec",
    "multithread_prefetch",
]


def CacheIterDataset(parent: Any) -> Any:
    """`parent.cache()`: the first pass's elements, kept in memory and replayed.

    Example:
        >>> import chute
        >>> list(CacheIterDataset(chute.MapDataset.range(3).to_iter_dataset()).repeat(2))
        [0, 1, 2, 0, 1, 2]
    """
    return parent.cache()


def FlatMapIterDataset(parent: Any, transform: Any) -> Any:
    """`parent.flat_map(transform)` on a stream.

    Example:
        >>> import chute
        >>> list(FlatMapIterDataset(chute.MapDataset.range(3).to_iter_dataset(), lambda x: [x] * x))
        [1, 2, 2]
    """
    return parent.flat_map(transform)


def FlatMapMapDataset(parent: Any, transform: Any) -> Any:
    """`parent.flat_map(transform)` with random access (`transform.max_fan_out` outputs at most).

    Example:
        >>> import chute
        >>> class Twice(chute.FlatMapTransform):
        ...     max_fan_out = 2
        ...
        ...     def flat_map(self, element):
        ...         return [element, element]
        >>> list(FlatMapMapDataset(chute.MapDataset.range(2), Twice()))
        [0, 0, 1, 1]
    """
    fan_out = getattr(transform, "max_fan_out", None)
    return parent.flat_map(transform, max_fan_out=fan_out)


def LimitIterDataset(parent: Any, count: int) -> Any:
    """`parent.limit(count)`: the first `count` elements.

    Example:
        >>> import chute
        >>> list(LimitIterDataset(chute.MapDataset.range(9).to_iter_dataset(), 2))
        [0, 1]
    """
    return parent.limit(count)


def RebatchIterDataset(parent: Any, batch_size: int, drop_remainder: bool = False) -> Any:
    """`parent.rebatch(batch_size, drop_remainder)`.

    Example:
        >>> import chute
        >>> ds = chute.MapDataset.range(5).to_iter_dataset().batch(2)
        >>> [b.tolist() for b in RebatchIterDataset(ds, 3)]
        [[0, 1, 2], [3, 4]]
    """
    return parent.rebatch(batch_size, drop_remainder=drop_remainder)


def RepeatIterDataset(parent: Any, num_epochs: int | None = None) -> Any:
    """`parent.repeat(num_epochs)` (None: forever).

    Example:
        >>> import chute
        >>> list(RepeatIterDataset(chute.MapDataset.range(2).to_iter_dataset(), 2))
        [0, 1, 0, 1]
    """
    return parent.repeat(num_epochs)


def ZipIterDataset(parents: Sequence[Any], *, strict: bool = True) -> Any:
    """`IterDataset.zip(*parents, strict=strict)`: tuples of the parents' elements.

    With `strict` (the default, as in Grain) parents that end at different lengths
    raise `ValueError` at the end; without, the shortest ends the stream.

    Example:
        >>> import chute
        >>> a = chute.MapDataset.range(2).to_iter_dataset()
        >>> list(ZipIterDataset([a, a.map(lambda x: -x)]))
        [(0, 0), (1, -1)]
    """
    from ._datasets import IterDataset

    return IterDataset.zip(*parents, strict=strict)


def ZipMapDataset(parents: Sequence[Any]) -> Any:
    """`MapDataset.zip(*parents)`; Grain requires equal lengths, chute takes the shortest.

    Example:
        >>> import chute
        >>> list(ZipMapDataset([chute.MapDataset.range(2), chute.MapDataset.source(["a", "b"])]))
        [(0, 'a'), (1, 'b')]
    """
    from ._datasets import MapDataset

    return MapDataset.zip(*parents)


def apply_transformations(ds: Any, transformations: Any) -> Any:
    """`ds.apply(transformations)`: each transform (or a list of them) as its op.

    Example:
        >>> import chute
        >>> class Neg(chute.MapTransform):
        ...     def map(self, element):
        ...         return -element
        >>> list(apply_transformations(chute.MapDataset.range(3), [Neg()]))
        [0, -1, -2]
    """
    return ds.apply(transformations)


def get_element_spec(ds: Any) -> Any:
    """`ds.element_spec`: shapes and dtypes of an element (one element is computed).

    Example:
        >>> import chute, numpy as np
        >>> get_element_spec(chute.MapDataset.range(4).map(lambda x: np.zeros(3)).batch(2))
        ShapeDtypeStruct(shape=(2, 3), dtype=dtype('float64'))
    """
    return ds.element_spec


def assert_equal_output_after_checkpoint(ds: Any) -> None:
    """Asserts that iterators of `ds` resume exactly from states taken along the way.

    chute's shared resume check (`chute_core.internal.assert_resumes`): the start,
    the middle, the end and each boundary of a run, restored into new iterators.

    Example:
        >>> import chute
        >>> assert_equal_output_after_checkpoint(chute.MapDataset.range(6).to_iter_dataset())
    """
    assert_resumes(lambda: iter(ds), every=None)


def batch_and_pad(values: Sequence[Any], *, batch_size: int, pad_value: Any = 0) -> Any:
    """Stacks `values` into one batch of `batch_size` rows, the missing ones `pad_value`.

    Example:
        >>> batch_and_pad([np.array([1, 2]), np.array([3, 4])], batch_size=3, pad_value=-1)
        array([[ 1,  2],
               [ 3,  4],
               [-1, -1]])
    """
    if len(values) > batch_size:
        raise InvalidArgumentError(
            f"batch_and_pad: {len(values)} values do not fit a batch of {batch_size}."
        )
    batch, _ = batch_elements(list(values), pad_to=batch_size)  # (batch, mask of rows)
    if pad_value != 0 and len(values) < batch_size:
        _fill(batch, len(values), pad_value)
    return batch


def _fill(tree: Any, start: int, value: Any) -> None:
    if isinstance(tree, np.ndarray):
        tree[start:] = value
    elif isinstance(tree, dict):
        for leaf in tree.values():
            _fill(leaf, start, value)
    elif isinstance(tree, list | tuple):
        for leaf in tree:
            _fill(leaf, start, value)


def multithread_prefetch(
    ds: Any, num_threads: int, buffer_size: int, sequential_slice: bool = False
) -> Any:
    """`ds.prefetch(buffer_size)`: the stream on a background thread, in its order.

    Grain runs `num_threads` copies of the pipeline on slices of the data and
    interleaves them; chute keeps the stream's order and state whatever the thread
    count (use `ReadOptions(num_threads=...)` or `mp_prefetch` for parallel work).

    Example:
        >>> import chute
        >>> list(multithread_prefetch(chute.MapDataset.range(4).to_iter_dataset(), 2, 8))
        [0, 1, 2, 3]
    """
    return ds.prefetch(buffer_size)


def InterleaveIterDataset(
    datasets: Sequence[Any],
    cycle_length: int,
    num_make_iter_threads: int = 1,
    make_iter_buffer_size: int = 1,
    iter_buffer_size: int = 1,
) -> Any:
    """`grain.IterDataset.interleave(datasets, cycle_length)` (Grain's family kept).

    Grain's three buffer and thread arguments tune how it opens and reads the streams
    ahead; they are checked (positive ints) and change neither the elements nor their
    order. chute opens each stream when its turn comes (`prefetch` the result to read
    ahead).

    Example:
        >>> import chute.grain as grain
        >>> parts = [grain.MapDataset.source([c] * 2).to_iter_dataset() for c in "ab"]
        >>> next(iter(InterleaveIterDataset(parts, 2, num_make_iter_threads=2).batch(2)))
        array(['a', 'b'], dtype='<U1')
    """
    from ._datasets import IterDataset

    for name, value in (
        ("num_make_iter_threads", num_make_iter_threads),
        ("make_iter_buffer_size", make_iter_buffer_size),
        ("iter_buffer_size", iter_buffer_size),
    ):
        check_int(value, name, "InterleaveIterDataset", minimum=1)
    # A MapDataset is passed whole: its stages (a shard of files) let the result reshard.
    listed = datasets if hasattr(datasets, "to_iter_dataset") else list(datasets)
    return IterDataset.interleave(listed, cycle_length)


def ParquetIterDataset(path: Any) -> Any:
    """The rows of Parquet files as a checkpointable stream, in Grain's family."""
    from chute_sources import ParquetStream  # pyarrow loads on first use.

    from ._datasets import IterDataset

    return IterDataset.source(functools.partial(ParquetStream, path))
