"""Fluent methods made from op declarations: one line adds an op to the datasets.

An op declared beside its implementation (`chute_core.declare_op`) with a Map class
and an Iter class that take `(parent, *arguments)` needs no method written for it:
`select_keys = fluent_op("select_keys")` in a dataset class gives `ds.select_keys(...)`,
which builds the op's node over the dataset's (the Map class for a `MapDataset`, the
Iter class for an `IterDataset`) and the stage `print`, checkpoints and the worker
planner read, its parameters named as the node's.

Example:
    >>> import chute
    >>> mapped = fluent_op("map")  # As a class attribute: ds.mapped(fn).
    >>> ds = chute.MapDataset.range(3)
    >>> negated = mapped.__get__(ds, type(ds))(lambda x: -x)
    >>> list(negated), str(negated).splitlines()[-1]
    ([0, -1, -2], '  .map(fn=<lambda>)')
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

from chute_core import InvalidArgumentError, OpDeclaration, declared_op

from ._factories import EmptyIterator
from ._iter_base import IterBase
from ._pipeline import stage

__all__ = ["FluentOp", "fluent_op"]

D = TypeVar("D")


class FluentOp(Generic[D]):
    """The method `ds.<op>(*arguments)` of a declared op (see `fluent_op`)."""

    def __init__(self, declaration: OpDeclaration) -> None:
        node = declaration.map_node or declaration.iter_node
        if node is None:
            raise InvalidArgumentError(
                f"fluent_op: op {declaration.name!r} declares no Map or Iter class to build."
            )
        self.declaration = declaration
        self.__doc__ = node.__doc__
        self._signature = inspect.signature(node)

    @overload
    def __get__(self, dataset: None, owner: type[Any]) -> FluentOp[D]: ...
    @overload
    def __get__(self, dataset: D, owner: type[Any]) -> Callable[..., D]: ...
    def __get__(self, dataset: D | None, owner: type[Any]) -> FluentOp[D] | Callable[..., D]:
        if dataset is None:
            return self
        method = functools.partial(self._build, dataset)
        method.__doc__ = self.__doc__  # help(ds.select_keys) shows the op's own docs.
        return method

    def _build(self, dataset: Any, *args: Any, **kwargs: Any) -> Any:
        declaration = self.declaration
        owner = f"{type(dataset).__name__}.{declaration.name}"
        params = self._params(owner, args, kwargs)
        item = stage(declaration.name, **params)
        if isinstance(dataset, IterBase):
            if declaration.iter_node is None:
                raise TypeError(f"{owner}: {declaration.name} works on MapDatasets only.")
            declaration.iter_node(EmptyIterator(), *args, **kwargs)  # Its checks, now.
            return dataset._then(declaration.iter_node, item, *args, **kwargs)
        if declaration.map_node is None:  # A MapDataset (MapBase, which reads a stream).
            raise TypeError(f"{owner}: {declaration.name} works on streams only.")
        return dataset._then(declaration.map_node(dataset.node, *args, **kwargs), item)

    def _params(self, owner: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The arguments by the node's parameter names (its parent left out)."""
        try:
            bound = self._signature.bind(None, *args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{owner}: {error}.") from None
        parent = next(iter(self._signature.parameters))
        return {name: value for name, value in bound.arguments.items() if name != parent}


def fluent_op(op: str | OpDeclaration) -> FluentOp[Any]:
    """The fluent method of a declared op (by its name or its declaration), for a class body.

    Raises:
        InvalidArgumentError: no imported package declared an op of that name.

    Example:
        >>> fluent_op("map").declaration.iter_node.__name__
        'MapIter'
    """
    declaration = declared_op(op) if isinstance(op, str) else op
    if declaration is None:
        raise InvalidArgumentError(
            f"fluent_op: no imported package declares an op {op!r}; import the package that "
            "implements it first."
        )
    return FluentOp(declaration)
