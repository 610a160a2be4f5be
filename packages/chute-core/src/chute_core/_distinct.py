"""`distinct`: the sorted distinct values of an integer array, without `np.unique`.

NumPy 2's `np.unique` imports `numpy.ma` on its first call (it checks for masked
input). Where no bytecode cache is written (`PYTHONDONTWRITEBYTECODE=1`, as in CI),
compiling `numpy.ma` takes 50-200 ms, and every new worker process paid it on its first
chunk: most of the time to a first batch after a restore. The readers and samplers call
this once per batch of positions, usually with a single distinct value (one file, one
epoch), for which it does not even sort.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["distinct"]


def distinct(values: npt.ArrayLike) -> npt.NDArray[Any]:
    """The distinct values of an integer array, sorted: `np.unique(values)`, faster.

    Example:
        >>> distinct(np.array([3, 1, 3, 2])).tolist()
        [1, 2, 3]
        >>> distinct(np.array([5, 5])).tolist()
        [5]
    """
    flat = np.asarray(values).reshape(-1)
    if flat.size == 0 or (flat == flat[0]).all():
        return flat[:1].copy()
    ordered = np.sort(flat)
    keep = np.empty(ordered.size, np.bool_)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]
