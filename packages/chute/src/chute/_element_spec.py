"""`ShapeDtypeStruct` and `element_spec`: the shapes and dtypes of a dataset's elements."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

__all__ = ["ShapeDtypeStruct", "spec_of"]


@dataclasses.dataclass(frozen=True)
class ShapeDtypeStruct:
    """The shape and dtype of an array leaf, with the attributes of `jax.ShapeDtypeStruct`.

    chute's own (no jax import below the device layer); code that reads `.shape` and
    `.dtype` takes either.

    Example:
        >>> ShapeDtypeStruct((2, 3), np.dtype("float32"))
        ShapeDtypeStruct(shape=(2, 3), dtype=dtype('float32'))
    """

    shape: tuple[int, ...]
    dtype: np.dtype[Any]


def spec_of(element: Any) -> Any:
    """The pytree of `element` with every leaf replaced by its `ShapeDtypeStruct`.

    Dicts, lists, tuples (named too) and dataclasses keep their structure; arrays,
    NumPy scalars and Python numbers become specs (a `str` has dtype `object`); None
    stays None.

    Example:
        >>> spec_of({"x": np.zeros((2, 3), np.int32), "y": [1.5]})
        {'x': ShapeDtypeStruct(shape=(2, 3), dtype=dtype('int32')), 'y': [ShapeDtypeStruct(shape=(), dtype=dtype('float64'))]}
    """  # noqa: E501
    if element is None:
        return None
    if isinstance(element, dict):
        return {key: spec_of(value) for key, value in element.items()}
    if isinstance(element, tuple) and hasattr(element, "_fields"):
        return type(element)(*(spec_of(value) for value in element))
    if isinstance(element, list | tuple):
        return type(element)(spec_of(value) for value in element)
    if dataclasses.is_dataclass(element) and not isinstance(element, type):
        return {f.name: spec_of(getattr(element, f.name)) for f in dataclasses.fields(element)}
    if isinstance(element, str | bytes):
        return ShapeDtypeStruct((), np.dtype(object))
    array = np.asarray(element)
    return ShapeDtypeStruct(tuple(int(n) for n in array.shape), array.dtype)
