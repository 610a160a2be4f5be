"""The one home of argument and state checks, shared by every layer (the lowest owns it).

Every layer validates with these, so the same argument gets the same rule everywhere:
Python and NumPy integers are accepted where an int is asked, bools and floats never;
a state read back by `set_state` is checked key by key, and a bad one raises
`InvalidStateError` naming the iterator, the key and what was wrong. Other chute
packages reach them through `chute_core.internal`.
"""

from __future__ import annotations

import math
import numbers
import operator
import sys
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from ._errors import ArgumentTypeError, InvalidArgumentError, InvalidStateError
from ._protocols import CheckpointableIterator, IteratorState, JsonValue

__all__ = [
    "MAX_SEED",
    "check_bool",
    "check_count",
    "check_dataset",
    "check_int",
    "check_optional_int",
    "check_seed",
    "check_sequence",
    "check_state",
    "check_weights",
    "restore_all",
    "state_bool",
    "state_dict",
    "state_dicts",
    "state_int",
    "state_int_lists",
    "state_parent",
    "state_position",
    "state_value",
]


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
    """Reads the integer `state[key]`, raising `InvalidStateError` when it is unusable.

    `maximum` defaults to `sys.maxsize`: every count and position of a chute state is
    index-sized, so a larger value was never written by `get_state()`.

    Example:
        >>> state_value({"epoch": 2}, "epoch", "IndexSampler")
        2
        >>> state_value({"epoch": 2}, "epoch", "RepeatIter", maximum=1)
        Traceback (most recent call last):
        ...
        chute_core._errors.InvalidStateError: RepeatIter: state['epoch'] = 2 is out of \
range [0, 1]; the state belongs to another pipeline or was edited.
    """
    check_state(state, owner)
    if key not in state:
        raise InvalidStateError(
            f"{owner}: state {state!r} has no {key!r}; pass a state from this iterator's "
            "get_state()."
        )
    return _in_range(owner, key, state[key], minimum, sys.maxsize if maximum is None else maximum)


def _in_range(owner: str, key: str, value: JsonValue, minimum: int, maximum: int) -> int:
    """`value` if it is an int (not a bool) in `[minimum, maximum]`, else `InvalidStateError`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidStateError(
            f"{owner}: state[{key!r}] must be an int in [{minimum}, {maximum}], got "
            f"{type(value).__name__} {value!r}."
        )
    if not minimum <= value <= maximum:
        raise InvalidStateError(
            f"{owner}: state[{key!r}] = {value} is out of range [{minimum}, {maximum}]; the "
            "state belongs to another pipeline or was edited."
        )
    return value


def check_count(value: object, name: str, owner: str, *, minimum: int = 0) -> int:
    """Returns `value` as an index-sized int `>= minimum`, or raises naming `owner`, `name`.

    `check_int`'s rule (Python and NumPy integers, never bools).

    Raises:
        TypeError: `value` is not an integer (an `ArgumentTypeError`).
        ValueError: `value` is below `minimum` or above `sys.maxsize` (an
            `InvalidArgumentError`).
    """
    return check_int(value, name, owner, minimum=minimum)


def check_dataset(dataset: object, owner: str, name: str = "parent") -> None:
    """Raises `TypeError` unless `dataset` has `__len__` and `__getitem__`.

    Example:
        >>> check_dataset([1, 2], "shuffle")
        >>> check_dataset({"a": 1}, "shuffle")
        Traceback (most recent call last):
        ...
        TypeError: shuffle: parent must be a random-access dataset (a node, a source, or a \
sequence with __len__ and __getitem__), got dict.
    """
    if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")) or isinstance(
        dataset, str | bytes | dict
    ):
        raise TypeError(
            f"{owner}: {name} must be a random-access dataset (a node, a source, or a "
            f"sequence with __len__ and __getitem__), got {type(dataset).__name__}."
        )


def check_state(state: object, owner: str) -> dict[str, JsonValue]:
    """`state` if it is a dict (what `get_state()` returns), else `InvalidStateError`.

    Example:
        >>> check_state({"position": 1}, "SequentialIter")
        {'position': 1}
    """
    if not isinstance(state, dict):
        raise InvalidStateError(
            f"{owner}: a state is a dict from get_state(), got {type(state).__name__} {state!r}."
        )
    return state


def state_position(state: IteratorState, owner: str, maximum: int) -> int:
    """Reads `state["position"]`, an int in `[0, maximum]`, or raises `InvalidStateError`.

    Example:
        >>> state_position({"position": 3}, "PrefetchReadIter", 10)
        3
    """
    check_state(state, owner)
    if "position" not in state:
        raise InvalidStateError(
            f"{owner}: state {state!r} has no 'position'; pass a state from this iterator's "
            "get_state() (or from a SequentialIter over the same dataset)."
        )
    unknown = sorted(str(key) for key in state if key != "position")
    if unknown:
        raise InvalidStateError(
            f"{owner}: a state has exactly the key ['position']; unknown {unknown}. Was it "
            "saved by another iterator?"
        )
    return _in_range(owner, "position", state["position"], 0, maximum)


def state_dict(
    owner: object, state: object, keys: tuple[str, ...], optional: tuple[str, ...] = ()
) -> IteratorState:
    """Returns `state` if it is a dict with `keys` (and no others but `optional`).

    Raises:
        InvalidStateError: not a dict, a key missing, or a key unknown.
    """
    if not isinstance(state, dict):
        raise InvalidStateError(
            f"{owner!r}: a state is a dict with keys {list(keys)} (from get_state()), got "
            f"{type(state).__name__} {state!r}."
        )
    missing = [key for key in keys if key not in state]
    unknown = sorted(str(key) for key in state if key not in keys and key not in optional)
    if missing or unknown:
        also = f" and optionally {list(optional)}" if optional else ""
        raise InvalidStateError(
            f"{owner!r}: a state has exactly the keys {list(keys)}{also}; missing {missing}, "
            f"unknown {unknown}. Was it saved by another iterator?"
        )
    return state


def state_int(
    owner: object,
    state: IteratorState,
    key: str,
    *,
    minimum: int = 0,
    maximum: int = sys.maxsize,
) -> int:
    """Returns `state[key]` if it is an int in `[minimum, maximum]`, else `InvalidStateError`.

    The message names `owner` (by its `repr`), the key, the value and the range.

    Example:
        >>> state_int("LimitIter", {"count": 3}, "count", maximum=5)
        3
    """
    if key not in state:
        raise InvalidStateError(f"{owner!r}: the state {state!r} has no {key!r}.")
    return _in_range(repr(owner), key, state[key], minimum, maximum)


def state_bool(owner: object, state: IteratorState, key: str) -> bool:
    """Returns `state[key]` if it is a bool, else raises `InvalidStateError`.

    Example:
        >>> state_bool("MixIter", {"exhausted": False}, "exhausted")
        False
    """
    value = state.get(key)
    if not isinstance(value, bool):
        raise InvalidStateError(
            f"{owner!r}: state[{key!r}] must be a bool, got {type(value).__name__} {value!r}."
        )
    return value


def state_dicts(
    owner: object, state: IteratorState, key: str, count: int, each: str = "parent"
) -> list[IteratorState]:
    """`state[key]` if it is a list of `count` dicts (inner states), else `InvalidStateError`.

    `each` names what each state belongs to, for the message ("one per parent").

    Example:
        >>> state_dicts("ZipIter", {"parents": [{}, {"position": 1}]}, "parents", 2)
        [{}, {'position': 1}]
    """
    value = state.get(key)
    if not (
        isinstance(value, list) and len(value) == count and all(isinstance(s, dict) for s in value)
    ):
        raise InvalidStateError(
            f"{owner!r}: state[{key!r}] must list {count} states (dicts), one per {each}; "
            f"got {value!r}."
        )
    return cast(list[IteratorState], value)


def state_int_lists(owner: object, state: IteratorState, key: str) -> list[list[int]]:
    """Returns `state[key]` if it is a list of lists of index-sized ints >= 0, else raises."""
    value: JsonValue = state[key]
    if isinstance(value, list) and all(
        isinstance(inner, list)
        and all(
            isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= sys.maxsize for x in inner
        )
        for inner in value
    ):
        return [[int(x) for x in inner] for inner in value]  # type: ignore[union-attr, arg-type]
    raise InvalidStateError(
        f"{owner!r}: state[{key!r}] must be a list of lists of ints in [0, {sys.maxsize}], got "
        f"{value!r}."
    )


def restore_all(
    iterators: Sequence[CheckpointableIterator[Any]], states: Sequence[IteratorState]
) -> None:
    """Sets `iterators[i]` to `states[i]` for every `i`, or leaves them all where they were.

    For iterators that read several streams (zip, concatenate, mix): if one stream
    refuses its state, the ones set before it are set back to their states before the
    call, so a refused state moves nothing.

    Example:
        >>> class Counter:
        ...     def __init__(self, limit): self.limit, self.at = limit, 0
        ...     def __next__(self): raise StopIteration
        ...     def get_state(self): return {"at": self.at}
        ...     def set_state(self, state):
        ...         if state["at"] > self.limit: raise InvalidStateError("past the limit")
        ...         self.at = state["at"]
        >>> a, b = Counter(10), Counter(1)
        >>> try:
        ...     restore_all([a, b], [{"at": 5}, {"at": 5}])
        ... except InvalidStateError:
        ...     pass
        >>> a.at, b.at
        (0, 0)
    """
    done: list[tuple[CheckpointableIterator[Any], IteratorState]] = []
    try:
        for iterator, state in zip(iterators, states, strict=True):
            previous = iterator.get_state()
            iterator.set_state(state)
            done.append((iterator, previous))
    except BaseException:
        for iterator, previous in reversed(done):
            iterator.set_state(previous)
        raise


def state_parent(owner: object, state: IteratorState) -> IteratorState:
    """Returns `state["parent"]` (the parent iterator's state) if it is a dict."""
    value = state["parent"]
    if not isinstance(value, dict):
        raise InvalidStateError(
            f"{owner!r}: state['parent'] must be the parent iterator's state (a dict), got "
            f"{value!r}."
        )
    return value
