"""The resume check of every checkpointable iterator (and of users' own iterators).

`assert_resumes` is THE resume test: every checkpointable iterator in chute goes
through it. It checks that restoring a state taken at the start, in the middle, at
epoch boundaries and at the end continues with exactly the elements an uninterrupted
run yields, through a JSON round trip, into a fresh iterator and into one that has
already moved on. It is part of the product, not only of chute's tests: Grain's
`assert_equal_output_after_checkpoint` (`chute.grain`) is this check, and
`chute_testing` gives it to tests.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ._protocols import CheckpointableIterator, IteratorState

__all__ = ["assert_resumes", "assert_trees_equal", "collect_with_states"]


def assert_trees_equal(actual: Any, expected: Any, path: str = "element") -> None:
    """Asserts two pytrees are exactly equal: same structure, types, dtypes, values.

    NaNs compare equal to NaNs in the same place. The error names the first leaf path
    that differs.

    Example:
        >>> import numpy as np
        >>> assert_trees_equal({"a": np.arange(3)}, {"a": np.arange(3)})
    """
    if isinstance(expected, np.ndarray) or isinstance(actual, np.ndarray):
        if not (isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray)):
            raise AssertionError(f"{path}: {type(actual).__name__} != {type(expected).__name__}")
        if actual.dtype != expected.dtype or actual.shape != expected.shape:
            raise AssertionError(
                f"{path}: array {actual.dtype}{list(actual.shape)} != "
                f"{expected.dtype}{list(expected.shape)}"
            )
        if actual.dtype.kind in "mM":  # Compare datetimes as integers, so NaT == NaT.
            actual, expected = actual.view(np.int64), expected.view(np.int64)
        equal_nan = actual.dtype.kind in "fc"
        if not np.array_equal(actual, expected, equal_nan=equal_nan):
            raise AssertionError(f"{path}: array values differ:\n{actual!r}\n!=\n{expected!r}")
        return
    if type(actual) is not type(expected):
        raise AssertionError(
            f"{path}: type {type(actual).__name__} != {type(expected).__name__} "
            f"({actual!r} != {expected!r})"
        )
    if isinstance(expected, dict):
        if list(actual) != list(expected):
            raise AssertionError(f"{path}: keys {list(actual)} != {list(expected)}")
        for key in expected:
            assert_trees_equal(actual[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            raise AssertionError(f"{path}: length {len(actual)} != {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_trees_equal(a, e, f"{path}[{i}]")
    elif dataclasses.is_dataclass(expected) and not isinstance(expected, type):
        for field in dataclasses.fields(expected):
            assert_trees_equal(
                getattr(actual, field.name), getattr(expected, field.name), f"{path}.{field.name}"
            )
    elif isinstance(expected, float) and math.isnan(expected):
        if not math.isnan(actual):
            raise AssertionError(f"{path}: {actual!r} != nan")
    elif isinstance(expected, np.generic):
        assert_trees_equal(np.asarray(actual), np.asarray(expected), path)
    elif actual != expected:
        raise AssertionError(f"{path}: {actual!r} != {expected!r}")


def _json_round_trip(state: IteratorState, where: str) -> IteratorState:
    try:
        text = json.dumps(state, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise AssertionError(f"get_state() {where} is not JSON-serialisable: {error}") from error
    restored: IteratorState = json.loads(text)
    return restored


def collect_with_states(
    iterator: CheckpointableIterator[Any], max_elements: int | None = None
) -> tuple[list[Any], list[IteratorState]]:
    """Runs `iterator`, returning its elements and the state before each one (and at end).

    `states[k]` is the state after `k` elements, so `len(states) == len(elements) + 1`.

    Example:
        >>> class Letters:
        ...     def __init__(self):
        ...         self.i = 0
        ...     def __next__(self):
        ...         if self.i == 2:
        ...             raise StopIteration
        ...         self.i += 1
        ...         return "ab"[self.i - 1]
        ...     def get_state(self):
        ...         return {"i": self.i}
        >>> collect_with_states(Letters())
        (['a', 'b'], [{'i': 0}, {'i': 1}, {'i': 2}])
    """
    elements: list[Any] = []
    states = [_json_round_trip(iterator.get_state(), "at the start")]
    while max_elements is None or len(elements) < max_elements:
        try:
            element = next(iterator)
        except StopIteration:
            break
        elements.append(element)
        states.append(_json_round_trip(iterator.get_state(), f"after {len(elements)} elements"))
    return elements, states


def _checkpoints(total: int, epoch_length: int | None, every: int | None) -> list[int]:
    points = {0, 1, total // 3, total // 2, max(total - 1, 0), total}
    if epoch_length:
        for boundary in range(epoch_length, total + 1, epoch_length):
            points.update({boundary - 1, boundary, boundary + 1})
    if every is not None:
        points.update(range(0, total + 1, max(every, 1)))
    return sorted(p for p in points if 0 <= p <= total)


def assert_resumes(
    make_iterator: Callable[[], CheckpointableIterator[Any]],
    *,
    max_elements: int | None = None,
    epoch_length: int | None = None,
    every: int | None = 1,
    make_restored: Iterable[Callable[[], CheckpointableIterator[Any]]] = (),
    expected: Sequence[Any] | None = None,
) -> list[Any]:
    """Asserts an iterator resumes exactly from states taken anywhere in its run.

    Runs `make_iterator()` to the end (or `max_elements` for endless ones), taking the
    state before every element. Then, for the start, the middle, the end, each epoch
    boundary (and its neighbours) and every `every`-th position, restores the state
    (after a JSON round trip) into a fresh iterator and into one that has already
    yielded an element, and checks the continuation equals the uninterrupted run
    exactly. Iterators from `make_restored` (e.g. the same pipeline with another worker
    count) are restored too, and must continue the same way.

    Args:
        make_iterator: builds a new iterator at its start.
        max_elements: stop after this many elements (needed for endless iterators).
        epoch_length: elements per epoch, to test states around epoch boundaries.
        every: also test every `every`-th position (1: all; None: only the defaults).
        make_restored: other factories whose iterators must accept the states.
        expected: if given, the uninterrupted run must equal it.

    Returns:
        The elements of the uninterrupted run.

    Example:
        >>> from chute_core import IteratorState
        >>> class Count:
        ...     def __init__(self): self.i = 0
        ...     def __iter__(self): return self
        ...     def __next__(self):
        ...         if self.i == 3: raise StopIteration
        ...         self.i += 1; return self.i
        ...     def get_state(self) -> IteratorState: return {"i": self.i}
        ...     def set_state(self, state: IteratorState) -> None: self.i = state["i"]
        >>> assert_resumes(Count)
        [1, 2, 3]
    """
    elements, states = collect_with_states(make_iterator(), max_elements)
    if expected is not None:
        assert_trees_equal(elements, list(expected), "uninterrupted run")
    total = len(elements)
    factories = [make_iterator, *make_restored]
    for point in _checkpoints(total, epoch_length, every):
        wanted = elements[point:]
        for number, factory in enumerate(factories):
            for advanced in (False, True):
                iterator = factory()
                if advanced:
                    next(iterator, None)
                iterator.set_state(states[point])
                limit = None if max_elements is None else total - point
                rest, _ = collect_with_states(iterator, limit)
                label = (
                    f"restored at {point}/{total} into a {'used' if advanced else 'fresh'} "
                    f"iterator of factory {number}"
                )
                assert_trees_equal(rest, wanted, label)
    return elements
