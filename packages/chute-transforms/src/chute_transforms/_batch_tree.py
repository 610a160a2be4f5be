"""Operations on a batch that is already built: `unbatch_elements` and `pad_batch`.

A *batch* here is what `batch_elements` returns: a pytree whose leaves carry the
elements along their first axis. Batched leaves are NumPy arrays with at least one
dimension, and lists of str or bytes (how `batch_elements` batches string leaves).
`None` leaves stay `None`. Dicts, tuples, named tuples, dataclasses, and lists that are
not all-str / all-bytes are containers, walked field by field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from itertools import compress
from typing import Any

import numpy as np

from ._batch import BatchFn, Mask, batch_elements
from ._errors import BatchError

__all__ = ["make_batch", "pad_batch", "unbatch_elements"]


def unbatch_elements(batch: Any, *, mask: Mask | None = None) -> list[Any]:
    """Splits a batch into its elements: the inverse of `batch_elements`.

    Array leaves come back as row views of the batch (no copy), so a 1-D leaf yields
    NumPy scalars: `unbatch_elements(batch_elements(xs))` equals `xs` except that
    Python scalars and 0-d arrays come back as NumPy scalars.

    Args:
        batch: a batch, as `batch_elements` or a custom `batch_fn` builds it.
        mask: if given (the mask of a padded batch), keep only the rows where it is
            True.

    Returns:
        The elements, in order.

    Raises:
        BatchError: leaves disagree on the batch size (ragged leading dimensions), a
            leaf has no batch dimension (a 0-d array, a Python scalar), the batch has
            no batched leaf at all and no mask, or the mask does not fit.

    Example:
        >>> import numpy as np
        >>> unbatch_elements({"x": np.arange(4).reshape(2, 2), "name": ["a", "b"]})
        [{'x': array([0, 1]), 'name': 'a'}, {'x': array([2, 3]), 'name': 'b'}]
        >>> unbatch_elements({"y": np.arange(3)}, mask=np.array([True, True, False]))
        [{'y': np.int64(0)}, {'y': np.int64(1)}]
    """
    found = _leading_size(batch, "batch")
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.ndim != 1:
            raise BatchError(
                f"cannot unbatch: mask must be a 1-D bool array, got {mask.dtype} with "
                f"shape {mask.shape}."
            )
        if found is None:
            found = (len(mask), "mask")
        elif found[0] != len(mask):
            raise BatchError(
                f"cannot unbatch: the mask has {len(mask)} rows but {found[1]} has {found[0]}."
            )
    if found is None:
        raise BatchError(
            "cannot unbatch: the batch has no array or list-of-str leaf, so its number of "
            "rows is unknown."
        )
    rows = _split(batch, found[0], "batch", found[1])
    return rows if mask is None else list(compress(rows, mask.tolist()))


def pad_batch(batch: Any, size: int) -> tuple[Any, Mask]:
    """Pads a batch to `size` rows with zeros (`""` / `b""` for strings) and a mask.

    For batches built by a custom `batch_fn`; `batch_elements(..., pad_to=size)`
    pads while stacking, without this extra copy. The padded batch is new memory.

    Args:
        batch: a batch of `n <= size` rows.
        size: the number of rows wanted.

    Returns:
        `(padded, mask)`; `mask` has shape `(size,)` and is True for the `n` real rows.

    Raises:
        BatchError: as for `unbatch_elements`.
        ValueError: the batch has more than `size` rows.

    Example:
        >>> import numpy as np
        >>> pad_batch({"x": np.array([1, 2]), "s": ["a", "b"]}, 3)
        ({'x': array([1, 2, 0]), 's': ['a', 'b', '']}, array([ True,  True, False]))
    """
    found = _leading_size(batch, "batch")
    if found is None:
        raise BatchError("cannot pad: the batch has no array or list-of-str leaf.")
    rows, where = found
    if not isinstance(size, int) or isinstance(size, bool) or size < rows:
        raise ValueError(f"pad_batch: size must be an int >= the {rows} rows, got {size!r}.")
    mask = np.zeros(size, np.bool_)
    mask[:rows] = True
    return _rebuild(
        batch, "batch", lambda leaf, path: _pad_leaf(leaf, rows, size, path, where)
    ), mask


def make_batch(elements: list[Any], size: int, pad: bool, batch_fn: BatchFn | None) -> Any:
    """One batch of `elements` as the batch ops build it (shared by `BatchIter`/`BatchMap`).

    With `pad`, the result is `(batch, mask)` padded to `size` rows, also when the batch
    is full, so the structure never changes; `batch_fn` replaces `batch_elements`.

    Example:
        >>> make_batch([1, 2], 3, True, None)
        (array([1, 2, 0]), array([ True,  True, False]))
    """
    if not pad:
        return batch_elements(elements) if batch_fn is None else batch_fn(elements)
    if batch_fn is None:
        return batch_elements(elements, pad_to=size)
    if len(elements) == size:
        return batch_fn(elements), np.ones(size, np.bool_)
    return pad_batch(batch_fn(elements), size)


def _is_string_leaf(node: list[Any]) -> bool:
    types = set(map(type, node))
    return types == {str} or types == {bytes}


def _children(node: Any) -> list[tuple[str, Any]] | None:
    """(path suffix, child) pairs of a container, or None for a leaf."""
    if isinstance(node, dict):
        return [(f"[{key!r}]", value) for key, value in node.items()]
    if isinstance(node, tuple) or (isinstance(node, list) and not _is_string_leaf(node)):
        return [(f"[{i}]", value) for i, value in enumerate(node)]
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return [(f".{f.name}", getattr(node, f.name)) for f in dataclasses.fields(node)]
    return None


def _leaf_rows(leaf: Any, path: str) -> int | None:
    """The batch size a leaf carries; None for None; BatchError for unbatched leaves."""
    if leaf is None:
        return None
    if isinstance(leaf, np.ndarray):
        if leaf.ndim == 0:
            raise BatchError(f"cannot unbatch: {path} is a 0-d array, without a batch axis.")
        return int(leaf.shape[0])
    if isinstance(leaf, list):
        return len(leaf)
    raise BatchError(
        f"cannot unbatch: {path} is a {type(leaf).__name__}, which has no batch dimension "
        f"(batched leaves are NumPy arrays and lists of str or bytes)."
    )


def _leading_size(node: Any, path: str) -> tuple[int, str] | None:
    """The batch size of the first batched leaf, and where it is; None if none."""
    children = _children(node)
    if children is None:
        rows = _leaf_rows(node, path)
        return None if rows is None else (rows, path)
    for suffix, child in children:
        found = _leading_size(child, path + suffix)
        if found is not None:
            return found
    return None


def _check_rows(leaf: Any, path: str, rows: int, where: str) -> None:
    found = _leaf_rows(leaf, path)
    if found is not None and found != rows:
        raise BatchError(
            f"cannot unbatch: {path} has {found} rows but {where} has {rows}; every leaf of "
            f"a batch needs the same leading dimension (ragged batch)."
        )


def _split(node: Any, rows: int, path: str, where: str) -> list[Any]:
    """The `rows` elements of the sub-batch `node`."""
    children = _children(node)
    if children is None:
        _check_rows(node, path, rows, where)
        return [None] * rows if node is None else list(node)
    columns = [_split(child, rows, path + suffix, where) for suffix, child in children]
    kind = type(node)
    if isinstance(node, dict):
        keys = list(node)
        return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)] or [
            {} for _ in range(rows)
        ]
    if not columns:
        return [_make(kind, node, ()) for _ in range(rows)]
    return [_make(kind, node, row) for row in zip(*columns, strict=True)]


def _make(kind: type, node: Any, values: tuple[Any, ...]) -> Any:
    """A container of `node`'s type holding `values` (its fields, in order)."""
    if kind is list:
        return list(values)
    if kind is tuple:
        return values
    if isinstance(node, tuple):
        return kind(*values) if hasattr(kind, "_fields") else kind(values)
    out: Any = object.__new__(kind)  # A dataclass: set fields without running __init__.
    for field, value in zip(dataclasses.fields(node), values, strict=True):
        object.__setattr__(out, field.name, value)
    return out


def _rebuild(node: Any, path: str, leaf_fn: Callable[[Any, str], Any]) -> Any:
    """`node` with every leaf replaced by `leaf_fn(leaf, path)`."""
    children = _children(node)
    if children is None:
        return leaf_fn(node, path)
    if isinstance(node, dict):
        return {key: _rebuild(value, f"{path}[{key!r}]", leaf_fn) for key, value in node.items()}
    values = tuple(_rebuild(child, path + suffix, leaf_fn) for suffix, child in children)
    return _make(type(node), node, values)


def _pad_leaf(leaf: Any, rows: int, size: int, path: str, where: str) -> Any:
    _check_rows(leaf, path, rows, where)
    if leaf is None:
        return None
    if isinstance(leaf, list):
        return [*leaf, *[type(leaf[0])()] * (size - rows)]  # Non-empty: str or bytes.
    out: np.ndarray[Any, Any] = np.empty((size, *leaf.shape[1:]), leaf.dtype)
    out[:rows] = leaf
    out[rows:] = np.zeros((), leaf.dtype)
    return out
