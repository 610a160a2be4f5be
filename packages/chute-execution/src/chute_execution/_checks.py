"""Argument and state checks of the execution layer: each error names what is wrong."""

from __future__ import annotations

from chute_samplers._checks import check_int
from chute_sources import InvalidStateError, IteratorState, JsonValue

__all__ = ["check_count", "check_dataset", "state_position"]


def check_count(value: object, name: str, owner: str, *, minimum: int = 0) -> int:
    """Returns `value` as an index-sized int `>= minimum`, or raises naming `owner`, `name`.

    The samplers' `check_int` rule (Python and NumPy integers, never bools).

    Raises:
        TypeError: `value` is not an integer (an `ArgumentTypeError`).
        ValueError: `value` is below `minimum` or above `sys.maxsize` (an
            `InvalidArgumentError`).
    """
    return check_int(value, name, owner, minimum=minimum)


def check_dataset(dataset: object, owner: str) -> None:
    """Raises `TypeError` unless `dataset` has `__len__` and `__getitem__`."""
    if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")) or isinstance(
        dataset, str | bytes | dict
    ):
        raise TypeError(
            f"{owner}: dataset must be a random-access dataset (a node, a source, or a "
            f"sequence with __len__ and __getitem__), got {type(dataset).__name__}."
        )


def state_position(state: IteratorState, owner: str, maximum: int) -> int:
    """Reads `state["position"]`, an int in `[0, maximum]`, or raises `InvalidStateError`."""
    if not isinstance(state, dict):
        raise InvalidStateError(
            f"{owner}: a state is a dict from get_state(), got {type(state).__name__} {state!r}."
        )
    if "position" not in state:
        raise InvalidStateError(
            f"{owner}: state {state!r} has no 'position'; pass a state from this iterator's "
            "get_state() (or from a SequentialIter over the same dataset)."
        )
    value: JsonValue = state["position"]
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidStateError(f"{owner}: state['position'] must be an int, got {value!r}.")
    if not 0 <= value <= maximum:
        raise InvalidStateError(
            f"{owner}: state['position'] = {value} is out of range [0, {maximum}]; the state "
            "belongs to another dataset or was edited."
        )
    return value
