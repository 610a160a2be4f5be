"""Slicing batches by rows and joining batches: how chunk-stacked results become batches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._batch_tree import _children, _leading_size, _make, _rebuild

__all__ = ["batch_rows", "concat_batches", "slice_batch"]


def batch_rows(batch: Any) -> int:
    """The number of rows of a batch (its leading dimension); 0 if it has no batched leaf.

    Example:
        >>> import numpy as np
        >>> batch_rows({"x": np.zeros((3, 2)), "name": ["a", "b", "c"]})
        3
    """
    found = _leading_size(batch, "batch")
    return 0 if found is None else found[0]


def slice_batch(batch: Any, start: int, stop: int) -> Any:
    """Rows `[start, stop)` of a batch: views of its arrays, slices of its string lists.

    Example:
        >>> import numpy as np
        >>> slice_batch({"x": np.arange(5), "s": list("abcde")}, 1, 3)
        {'x': array([1, 2]), 's': ['b', 'c']}
    """

    def leaf(value: Any, path: str) -> Any:
        return None if value is None else value[start:stop]

    return _rebuild(batch, "batch", leaf)


def concat_batches(batches: Sequence[Any]) -> Any:
    """Joins batches of the same structure row-wise (`np.concatenate` for arrays).

    Dtypes combine as `np.concatenate` does, which for the leaves `batch_elements`
    makes gives what batching all the elements at once would.

    Example:
        >>> import numpy as np
        >>> concat_batches([{"x": np.arange(2)}, {"x": np.arange(3)}])
        {'x': array([0, 1, 0, 1, 2])}
    """
    first = batches[0]
    children = _children(first)
    if children is None:
        if first is None:
            return None
        if isinstance(first, np.ndarray):
            return np.concatenate(batches)
        return [row for batch in batches for row in batch]
    if isinstance(first, dict):
        return {key: concat_batches([batch[key] for batch in batches]) for key in first}
    columns = [[child for _, child in _children(batch) or ()] for batch in batches]
    values = tuple(concat_batches([column[i] for column in columns]) for i in range(len(children)))
    return _make(type(first), first, values)
