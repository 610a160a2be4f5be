"""The error types of the transforms layer.

Each derives from `chute_core.ChuteError` and from the built-in exception that means
the same thing, so `except ValueError` / `except TypeError` keep working.
"""

from __future__ import annotations

from chute_core import ChuteError

__all__ = ["BatchError", "PackingError", "TransformTypeError"]


class BatchError(ChuteError, ValueError):
    """Elements that cannot be stacked into one batch, or a batch that cannot be split.

    The message names the leaf path (e.g. `element['image'][1]`), the position of the
    offending element in the batch, and the two shapes, dtypes or types that disagree.

    Example:
        >>> import numpy as np
        >>> from chute_transforms import batch_elements
        >>> try:
        ...     batch_elements([np.zeros(2), np.zeros(3)])
        ... except BatchError as error:
        ...     print(str(error).splitlines()[0])
        cannot batch element: element 1 of the batch has shape (3,) but element 0 has shape (2,).
    """


class PackingError(ChuteError, ValueError):
    """An element that sequence packing cannot use (not a dict of 1-D arrays, ...).

    Example:
        >>> issubclass(PackingError, ValueError)
        True
    """


class TransformTypeError(ChuteError, TypeError):
    """An object given where a transform is expected that is not one (or the wrong kind).

    Example:
        >>> from chute_transforms import as_map_fn
        >>> try:
        ...     as_map_fn(42)
        ... except TransformTypeError as error:
        ...     print(error)  # doctest: +ELLIPSIS
        map needs a MapTransform or a callable taking (element), got int 42, which is not ...
    """
