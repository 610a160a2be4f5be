"""Adapters that turn a transform object or a plain callable into the function an op calls.

Plain callables are accepted wherever a transform is: `ds.map(lambda x: x + 1)` and
`ds.map(AddOne())` mean the same. Each adapter checks, once, when the pipeline is built,
that it got the right kind of object: a `FilterTransform` handed to `map` or a callable
with the wrong number of parameters fails here with a message that names the object,
not deep inside a worker process.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import numpy as np

from ._errors import TransformTypeError
from ._transforms import (
    BatchTransform,
    FilterTransform,
    FlatMapTransform,
    MapTransform,
    MapWithIndexTransform,
    RandomMapTransform,
)

__all__ = [
    "as_filter_fn",
    "as_flat_map_fn",
    "as_many_fn",
    "as_map_fn",
    "as_map_with_index_fn",
    "as_random_map_fn",
    "many_or_none",
]

T = TypeVar("T")
U = TypeVar("U")

# Which op each transform class belongs to, for "use it with ... instead" hints.
_OPS: tuple[tuple[type, str], ...] = (
    (MapTransform, "map"),
    (MapWithIndexTransform, "map_with_index"),
    (RandomMapTransform, "random_map"),
    (FilterTransform, "filter"),
    (FlatMapTransform, "flat_map"),
    (BatchTransform, "batch"),
)


def _describe(obj: object) -> str:
    text = repr(obj)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{type(obj).__name__} {text}"


def _check(obj: object, op: str, wanted: type, params: str, arity: int) -> None:
    """Raises `TransformTypeError` unless `obj` is a `wanted` or a callable of `arity` args."""
    expected = f"{op} needs a {wanted.__name__} or a callable taking ({params})"
    if isinstance(obj, wanted):
        return
    for cls, other_op in _OPS:
        if isinstance(obj, cls):
            raise TransformTypeError(
                f"{expected}, got {_describe(obj)}; a {cls.__name__} belongs to "
                f"{other_op}: use it there, or wrap it in a function for {op}."
            )
    if not callable(obj):
        raise TransformTypeError(
            f"{expected}, got {_describe(obj)}, which is not callable. Pass a function, a "
            f"lambda or an instance of a {wanted.__name__} subclass."
        )
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):  # Builtins without a signature: trust them.
        return
    try:
        signature.bind(*range(arity))
    except TypeError:
        raise TransformTypeError(
            f"{expected}, got {_describe(obj)} with signature {signature}, which cannot be "
            f"called with {arity} positional argument{'s' if arity > 1 else ''}."
        ) from None


def as_map_fn(transform: MapTransform[T, U] | Callable[[T], U]) -> Callable[[T], U]:
    """Returns the function `map` calls for `transform`.

    Args:
        transform: a `MapTransform` or a callable taking one element.

    Returns:
        `transform.map` for a `MapTransform`, else the callable itself.

    Raises:
        TransformTypeError: `transform` is another kind of transform, not callable, or
            cannot take one positional argument.

    Example:
        >>> as_map_fn(lambda x: x + 1)(1)
        2
    """
    _check(transform, "map", MapTransform, "element", 1)
    if isinstance(transform, MapTransform):
        return transform.map
    return transform


def as_many_fn(transform: object) -> Callable[[list[Any]], list[Any]] | None:
    """`transform.map_many` if its class overrides `MapTransform.map_many`, else None.

    Example:
        >>> class Upper(MapTransform[str, str]):
        ...     def map(self, element):
        ...         return element.upper()
        ...
        ...     def map_many(self, elements):
        ...         return [e.upper() for e in elements]
        >>> as_many_fn(Upper())(["a", "b"]), as_many_fn(abs)
        (['A', 'B'], None)
    """
    if not isinstance(transform, MapTransform):
        return None
    if type(transform).map_many is MapTransform.map_many:
        return None
    return transform.map_many


def many_or_none(
    fn_many: Callable[[list[Any]], list[Any]], shown: str, elements: list[Any] | None
) -> list[Any] | None:
    """`fn_many(elements)` as a list, or None if it raised (or was given None).

    `shown` names the map in the error below.

    Raises:
        ValueError: it returned another number of outputs than it was given elements.
    """
    if elements is None:
        return None
    try:
        mapped = list(fn_many(elements))
    except Exception:
        return None
    if len(mapped) != len(elements):
        raise ValueError(  # The one error not retried one by one: it is the map's.
            f"map({shown}): map_many returned {len(mapped)} outputs for {len(elements)} "
            "elements; it must return one output per element, in order."
        )
    return mapped


def as_map_with_index_fn(
    transform: MapWithIndexTransform[T, U] | Callable[[int, T], U],
) -> Callable[[int, T], U]:
    """Returns the function `map_with_index` calls for `transform`: `fn(index, element)`.

    Args:
        transform: a `MapWithIndexTransform` or a callable taking (index, element).

    Returns:
        `transform.map_with_index` for a `MapWithIndexTransform`, else the callable.

    Raises:
        TransformTypeError: `transform` is another kind of transform, not callable, or
            cannot take two positional arguments.

    Example:
        >>> as_map_with_index_fn(lambda i, x: (i, x))(0, "a")
        (0, 'a')
    """
    _check(transform, "map_with_index", MapWithIndexTransform, "index, element", 2)
    if isinstance(transform, MapWithIndexTransform):
        return transform.map_with_index
    return transform


def as_random_map_fn(
    transform: RandomMapTransform[T, U] | Callable[[T, np.random.Generator], U],
) -> Callable[[T, np.random.Generator], U]:
    """Returns the function `random_map` calls for `transform`: `fn(element, rng)`.

    Args:
        transform: a `RandomMapTransform` or a callable taking (element, rng).

    Returns:
        `transform.random_map` for a `RandomMapTransform`, else the callable itself.

    Raises:
        TransformTypeError: `transform` is another kind of transform, not callable, or
            cannot take two positional arguments.

    Example:
        >>> import numpy as np
        >>> fn = as_random_map_fn(lambda x, rng: x + int(rng.integers(1, 2)))
        >>> fn(1, np.random.default_rng(0))
        2
    """
    _check(transform, "random_map", RandomMapTransform, "element, rng", 2)
    if isinstance(transform, RandomMapTransform):
        return transform.random_map
    return transform


def as_filter_fn(transform: FilterTransform[T] | Callable[[T], Any]) -> Callable[[T], Any]:
    """Returns the predicate `filter` calls for `transform` (truthy keeps the element).

    Args:
        transform: a `FilterTransform` or a callable taking one element.

    Returns:
        `transform.filter` for a `FilterTransform`, else the callable itself.

    Raises:
        TransformTypeError: `transform` is another kind of transform, not callable, or
            cannot take one positional argument.

    Example:
        >>> keep = as_filter_fn(lambda x: x > 1)
        >>> [x for x in range(4) if keep(x)]
        [2, 3]
    """
    _check(transform, "filter", FilterTransform, "element", 1)
    if isinstance(transform, FilterTransform):
        return transform.filter
    return transform


def as_flat_map_fn(
    transform: FlatMapTransform[T, U] | Callable[[T], Iterable[U]],
) -> tuple[Callable[[T], Iterable[U]], int | None]:
    """Returns the function `flat_map` calls for `transform`, and its `max_fan_out`.

    Args:
        transform: a `FlatMapTransform` or a callable taking one element and returning
            an iterable of elements.

    Returns:
        `(fn, max_fan_out)`; `max_fan_out` is None for a plain callable (ops that need
        a bound, like flat map over a random-access dataset, then ask for one).

    Raises:
        TransformTypeError: `transform` is another kind of transform, not callable,
            cannot take one positional argument, or is a `FlatMapTransform` without a
            valid `max_fan_out`.

    Example:
        >>> fn, fan_out = as_flat_map_fn(lambda x: [x, x])
        >>> list(fn(3)), fan_out
        ([3, 3], None)
    """
    _check(transform, "flat_map", FlatMapTransform, "element", 1)
    if not isinstance(transform, FlatMapTransform):
        return transform, None
    fan_out = getattr(transform, "max_fan_out", None)
    if not isinstance(fan_out, int) or isinstance(fan_out, bool) or fan_out < 1:
        raise TransformTypeError(
            f"flat_map: {_describe(transform)} needs max_fan_out, an int >= 1 (the most "
            f"elements one input may produce), got {fan_out!r}. Set it as a class "
            f"attribute or pass max_fan_out= to FlatMapTransform.__init__."
        )
    return transform.flat_map, fan_out
