"""The shape of what a state document holds, checked before anything reads it.

A fingerprint is a checksum, not a signature: a damaged or crafted document can carry
a valid one over a pipeline description no chute wrote. So every reader checks the
shape of the parts it uses, and a malformed part is a `CheckpointFormatError` naming
the document, the stage and what is wrong, never a bare `TypeError` from deep inside.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from ._errors import CheckpointFormatError, ReshardError

__all__ = [
    "check_pipeline",
    "check_positions",
    "damaged_state",
    "integer_parameter",
    "positions_in_range",
]

_DAMAGED = "the file is damaged or was not written by chute"


def check_pipeline(pipeline: Any, where: str) -> None:
    """Checks that `pipeline` is shaped as `describe_pipeline` gives it.

    `{"stages": [stage, ...]}` with each stage `{"op": str, "params": {...}}` and, for
    ops over several pipelines, `"inputs": [[stage, ...], ...]`. Walks the stages
    without recursion, so any nesting that JSON parsing accepted is checked.

    Raises:
        CheckpointFormatError: the first thing out of shape, with where it is.

    Example:
        >>> check_pipeline({"stages": [{"op": "map", "params": {}}]}, "f")
        >>> try:
        ...     check_pipeline({"stages": [{"op": "map", "params": []}]}, "f")
        ... except CheckpointFormatError as error:
        ...     print(error)
        f: pipeline stage 0 (map): 'params' must be an object, got [].
    """
    stages = pipeline.get("stages") if isinstance(pipeline, Mapping) else None
    if not isinstance(stages, list):
        raise CheckpointFormatError(f"{where}: 'pipeline' must have a list of 'stages'.")
    pending: list[tuple[str, list[Any]]] = [("", stages)]
    while pending:
        label, branch = pending.pop()
        for number, stage in enumerate(branch):
            name = f"{where}: pipeline {label}stage {number}"
            if not isinstance(stage, Mapping):
                raise CheckpointFormatError(
                    f"{name} must be an object with 'op' and 'params', got {stage!r:.100}."
                )
            op = stage.get("op")
            if not isinstance(op, str):
                raise CheckpointFormatError(f"{name}: 'op' must be a string, got {op!r:.100}.")
            params = stage.get("params")
            if not isinstance(params, Mapping):
                raise CheckpointFormatError(
                    f"{name} ({op}): 'params' must be an object, got {params!r:.100}."
                )
            inputs = stage.get("inputs", [])
            if not isinstance(inputs, list) or not all(isinstance(b, list) for b in inputs):
                raise CheckpointFormatError(
                    f"{name} ({op}): 'inputs' must be a list of lists of stages, got "
                    f"{inputs!r:.100}."
                )
            inner = f"{label}stage {number} ({op}) input "
            pending.extend((f"{inner}[{index}] ", item) for index, item in enumerate(inputs))


def integer_parameter(
    stage: Mapping[str, Any], number: int, name: str, minimum: int, where: str
) -> int:
    """Stage `number`'s parameter `name`: an int (never a bool) of at least `minimum`.

    Raises:
        CheckpointFormatError: the parameter is missing or another value.

    Example:
        >>> integer_parameter({"op": "batch", "params": {"batch_size": 4}}, 2, "batch_size", 1, "f")
        4
        >>> try:
        ...     integer_parameter({"op": "batch", "params": {}}, 2, "batch_size", 1, "f")
        ... except CheckpointFormatError as error:
        ...     print(error)
        f: stage 2 (batch): the parameter 'batch_size' must be an integer of at least 1, \
got nothing (it is missing).
    """
    params = stage["params"]
    value = params.get(name)
    if type(value) is int and value >= minimum:
        return value
    found = repr(value)[:100] if name in params else "nothing (it is missing)"
    raise CheckpointFormatError(
        f"{where}: stage {number} ({stage['op']}): the parameter {name!r} must be an integer "
        f"of at least {minimum}, got {found}."
    )


def check_positions(state: Mapping[str, Any], where: str) -> None:
    """Checks that a stream's position state holds non-negative integers only.

    Every layout of a stream's position (a reader's `{"position": p}`, the workers'
    `{"position": p, "offset": k}`) is made of such counters; a string, a float or a
    bool there is damage that converting with `int()` would hide.

    Raises:
        CheckpointFormatError: the first value that is not one, named.

    Example:
        >>> check_positions({"position": 3, "offset": 0}, "f")
        >>> try:
        ...     check_positions({"position": "3"}, "f")
        ... except CheckpointFormatError as error:
        ...     print(error)
        f: the stream position {'position': '3'} must hold non-negative integers (at most \
9223372036854775807), got 'position': '3'; the file is damaged or was not written by chute.
    """
    for key, value in state.items():
        if type(value) is not int or not 0 <= value <= sys.maxsize:
            raise CheckpointFormatError(
                f"{where}: the stream position {dict(state)!r:.200} must hold non-negative "
                f"integers (at most {sys.maxsize}), got {key!r:.50}: {value!r:.50}; {_DAMAGED}."
            )


def damaged_state(state: Any, error: Exception, where: str) -> CheckpointFormatError:
    """The error for a state whose counters a layout could not convert (`error`).

    Example:
        >>> print(damaged_state({"index": "x"}, ValueError("bad"), "f"))
        f: the state {'index': 'x'} cannot be moved to another position (bad); the file is \
damaged or was not written by chute.
    """
    return CheckpointFormatError(
        f"{where}: the state {state!r:.200} cannot be moved to another position ({error}); "
        f"{_DAMAGED}."
    )


@contextlib.contextmanager
def positions_in_range() -> Iterator[None]:
    """Turns a position beyond 64 bits (a damaged state's, scaled) into a `ReshardError`.

    Example:
        >>> import numpy as np
        >>> try:
        ...     with positions_in_range():
        ...         np.array([2**70], np.int64)
        ... except ReshardError as error:
        ...     print(str(error)[:48])
        a state names a position beyond what 64 bits hol
    """
    try:
        yield
    except OverflowError as error:
        raise ReshardError(
            f"a state names a position beyond what 64 bits hold ({error}); it is damaged."
        ) from None
