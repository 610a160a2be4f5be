"""Checks shared by the iterators' `set_state`: clear `InvalidStateError`s, one place."""

from __future__ import annotations

from typing import Any

from chute_sources import InvalidStateError, IteratorState, JsonValue

__all__ = ["state_dict", "state_int", "state_int_lists", "state_parent"]


def state_dict(owner: object, state: object, keys: tuple[str, ...]) -> IteratorState:
    """Returns `state` if it is a dict with exactly `keys`, else raises `InvalidStateError`."""
    if not isinstance(state, dict):
        raise InvalidStateError(
            f"{owner!r}: a state is a dict with keys {list(keys)} (from get_state()), got "
            f"{type(state).__name__} {state!r}."
        )
    missing = [key for key in keys if key not in state]
    unknown = sorted(str(key) for key in state if key not in keys)
    if missing or unknown:
        raise InvalidStateError(
            f"{owner!r}: a state has exactly the keys {list(keys)}; missing {missing}, "
            f"unknown {unknown}. Was it saved by another iterator?"
        )
    return state


def state_int(owner: object, state: IteratorState, key: str) -> int:
    """Returns `state[key]` if it is an int >= 0, else raises `InvalidStateError`."""
    value: Any = state[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidStateError(f"{owner!r}: state[{key!r}] must be an int >= 0, got {value!r}.")
    return value


def state_int_lists(owner: object, state: IteratorState, key: str) -> list[list[int]]:
    """Returns `state[key]` if it is a list of lists of ints >= 0, else raises."""
    value: JsonValue = state[key]
    if isinstance(value, list) and all(
        isinstance(inner, list)
        and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in inner)
        for inner in value
    ):
        return [[int(x) for x in inner] for inner in value]  # type: ignore[union-attr, arg-type]
    raise InvalidStateError(
        f"{owner!r}: state[{key!r}] must be a list of lists of ints >= 0, got {value!r}."
    )


def state_parent(owner: object, state: IteratorState) -> IteratorState:
    """Returns `state["parent"]` (the parent iterator's state) if it is a dict."""
    value = state["parent"]
    if not isinstance(value, dict):
        raise InvalidStateError(
            f"{owner!r}: state['parent'] must be the parent iterator's state (a dict), got "
            f"{value!r}."
        )
    return value
