"""`MapChain`: several maps over a list of elements, as a chain of `MapIter`s would run.

A chunk of work whose ops are all plain maps needs no iterator per op: `MapChain` runs
each element through every function in turn, in order, and on an error raises it with
the note the failing `MapIter` would have added, after the outputs before it. Workers use
it for the common pipeline of maps (the per-element cost is then one call per function).
A transform that overrides `MapTransform.map_many` gets the whole list in one call (map
by map, over all elements); if anything raises, the list is mapped again one element
at a time, which raises the same error with the same outputs before it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ._adapters import as_many_fn, as_map_fn, many_or_none
from ._map_ops import fn_name
from ._stage_errors import annotate

__all__ = ["MapChain"]


class MapChain:
    """The functions of several maps, applied in order to each element of a list.

    Example:
        >>> chain = MapChain([abs, lambda x: x * 10])
        >>> outputs = []
        >>> chain.run([-1, 2, -3], 0, outputs)
        >>> outputs
        [10, 20, 30]
        >>> try:
        ...     MapChain([lambda x: 1 // x]).run([1, 0], 5, [])
        ... except ZeroDivisionError as error:
        ...     error.__notes__
        ['chute: raised by map(<lambda>) on the element at position 6']
    """

    def __init__(self, transforms: Sequence[Any]) -> None:
        self._fns: list[Callable[[Any], Any]] = [as_map_fn(t) for t in transforms]
        self._shown = [fn_name(t) for t in transforms]
        many = [as_many_fn(t) for t in transforms]
        self._many: list[Callable[[list[Any]], list[Any]]] | None = None
        if any(fn is not None for fn in many):
            self._many = [
                _one_by_one(fn) if batched is None else batched
                for fn, batched in zip(self._fns, many, strict=True)
            ]

    def run(self, elements: list[Any], first_position: int, outputs: list[Any]) -> None:
        """Appends each element's outputs to `outputs`; element `k` is at `first_position + k`.

        Raises:
            Exception: what a function raised, with a note naming the map and the
                element's position; `outputs` then holds the outputs before it.
        """
        if self._many is not None and elements:
            mapped: list[Any] | None = list(elements)
            for fn_many, shown in zip(self._many, self._shown, strict=True):
                mapped = many_or_none(fn_many, shown, mapped)
                if mapped is None:
                    break  # Mapped again one by one below: the error, with its position.
            if mapped is not None:
                outputs.extend(mapped)
                return
        done = len(outputs)
        stream: Any = elements
        if len(self._fns) == 1:
            stream = map(self._fns[0], stream)  # The failing map is the only one.
        else:
            for fn, shown in zip(self._fns, self._shown, strict=True):
                stream = _noted(fn, shown, stream, first_position, outputs, done)
        try:
            outputs.extend(stream)  # Appends one by one: what came before an error stays.
        except Exception as error:
            where = f"position {first_position + len(outputs) - done}"
            annotate(error, f"map({self._shown[0]})", where)  # Kept if already noted.
            raise


def _one_by_one(fn: Callable[[Any], Any]) -> Callable[[list[Any]], list[Any]]:
    """`fn` over a list, element by element."""
    return lambda elements: [fn(element) for element in elements]


def _noted(
    fn: Callable[[Any], Any],
    shown: str,
    source: Any,
    first_position: int,
    outputs: list[Any],
    done: int,
) -> Any:
    """`map(fn, source)`, noting on an error which map raised, and where."""
    for element in source:
        try:
            yield fn(element)
        except Exception as error:
            annotate(error, f"map({shown})", f"position {first_position + len(outputs) - done}")
            raise
