"""Argument checks shared by the samplers: every bad argument gets a message naming it."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import cast

import numpy as np

from chute_sources import (
    ArgumentTypeError,
    InvalidArgumentError,
    InvalidStateError,
    IteratorState,
    JsonValue,
)
from chute_sources._checks import check_int

__all__ = [
    "MAX_SEED",
    "check_bool",
    "check_int",
    "check_optional_int",
    "check_sequence",
    "check_seed",
    "check_weights",
    "state_value",
]

MAX_SEED = 2**64 - 1
"""Seeds are integers in `[0, 2**64)`."""


def check_optional_int(
    value: object, name: str, owner: str, *, minimum: int | None = 0
) -> int | None:
    """`None`, or `value` checked by `check_int`.

    Example:
        >>> check_optional_int(None, "num_epochs", "repeat") is None
        True
    """
    return None if value is None else check_int(value, name, owner, minimum=minimum)


def check_seed(seed: object, owner: str) -> int:
    """Returns `seed` as an int in `[0, 2**64)`, or raises a clear error."""
    return check_int(seed, "seed", owner, minimum=0, maximum=MAX_SEED)


def check_bool(value: object, name: str, owner: str) -> bool:
    """Returns `value` if it is a bool, or raises `TypeError`."""
    if not isinstance(value, bool | np.bool_):
        raise ArgumentTypeError(
            f"{owner}: {name} must be a bool, got {type(value).__name__} {value!r}."
        )
    return bool(value)


def check_sequence(value: object, name: str, owner: str) -> None:
    """Raises `TypeError` unless `value` is a sequence (and not a string)."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ArgumentTypeError(
            f"{owner}: {name} must be a sequence, got {type(value).__name__} {value!r}."
        )


def check_weights(weights: Sequence[float] | None, count: int, owner: str) -> tuple[float, ...]:
    """Returns `weights` (default: all 1) after checking they are positive finite numbers.

    Raises:
        TypeError: a weight is not a real number.
        ValueError: wrong number of weights, or a weight that is zero, negative, NaN or
            infinite.
    """
    if weights is None:
        return (1.0,) * count
    if isinstance(weights, str | bytes) or not hasattr(weights, "__len__"):
        raise ArgumentTypeError(f"{owner}: weights must be a sequence of numbers, got {weights!r}.")
    values: list[object] = list(weights)
    if len(values) != count:
        raise InvalidArgumentError(
            f"{owner}: got {len(values)} weights for {count} components; pass one weight "
            "per component (or None for equal weights)."
        )
    for position, weight in enumerate(values):
        if isinstance(weight, bool | np.bool_) or not isinstance(weight, numbers.Real):
            raise ArgumentTypeError(
                f"{owner}: weights[{position}] must be a real number, got "
                f"{type(weight).__name__} {weight!r}."
            )
        if not math.isfinite(weight) or weight <= 0:
            raise InvalidArgumentError(
                f"{owner}: weights[{position}] must be positive and finite, got {weight!r}."
            )
    return cast(tuple[float, ...], tuple(values))  # Kept as given: ints stay exact.


def state_value(
    state: IteratorState, key: str, owner: str, *, minimum: int = 0, maximum: int | None = None
) -> int:
    """Reads the integer `state[key]`, raising `InvalidStateError` when it is unusable."""
    if not isinstance(state, dict):
        raise InvalidStateError(
            f"{owner}: a state is a dict from get_state(), got {type(state).__name__} {state!r}."
        )
    if key not in state:
        raise InvalidStateError(
            f"{owner}: state {state!r} has no {key!r}; pass a state from this iterator's "
            "get_state()."
        )
    value: JsonValue = state[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidStateError(f"{owner}: state[{key!r}] must be an int, got {value!r}.")
    if value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f", {maximum}"
        raise InvalidStateError(
            f"{owner}: state[{key!r}] = {value} is out of range [{minimum}{upper}]; the state "
            "belongs to another iterator or was edited."
        )
    return value
