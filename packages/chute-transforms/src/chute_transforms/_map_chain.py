"""`MapChain`: several maps over a list of elements, as a chain of `MapIter`s would run.

A chunk of work whose ops are all plain maps needs no iterator per op: `MapChain` runs
each element through every function in turn, in order, and on an error raises it with
the note the failing `MapIter` would have added, after the outputs before it. Workers use
it for the common pipeline of maps (the per-element cost is then one call per function).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ._adapters import as_map_fn
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

    def run(self, elements: list[Any], first_position: int, outputs: list[Any]) -> None:
        """Appends each element's outputs to `outputs`; element `k` is at `first_position + k`.

        Raises:
            Exception: what a function raised, with a note naming the map and the
                element's position; `outputs` then holds the outputs before it.
        """
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
