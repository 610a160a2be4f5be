"""The one rule for integer arguments, shared by every layer (the lowest layer owns it)."""

from __future__ import annotations

import operator
import sys

import numpy as np

from ._errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["check_int"]


def check_int(
    value: object,
    name: str,
    owner: str,
    *,
    minimum: int | None = 0,
    maximum: int | None = sys.maxsize,
) -> int:
    """Returns `value` as an int, or raises naming `owner` and the argument `name`.

    The one rule for integer arguments in every layer: Python and NumPy integers are
    accepted, bools and floats refused, and values are index-sized (at most
    `sys.maxsize`) unless `maximum` says otherwise.

    Raises:
        ArgumentTypeError: `value` is not an integer (a `TypeError`).
        InvalidArgumentError: `value` is outside `[minimum, maximum]` (a `ValueError`).

    Example:
        >>> import numpy as np
        >>> check_int(np.int64(3), "batch_size", "batch", minimum=1)
        3
    """
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise ArgumentTypeError(
            f"{owner}: {name} must be an int, got {type(value).__name__} {value!r}."
        )
    number = operator.index(value)
    if minimum is not None and number < minimum:
        raise InvalidArgumentError(f"{owner}: {name} must be >= {minimum}, got {number}.")
    if maximum is not None and number > maximum:
        raise InvalidArgumentError(f"{owner}: {name} must be <= {maximum}, got {number}.")
    return number
