"""`SelectFromMap`: a mixture whose order of components is given explicitly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from chute_core import RandomAccessDataSource, StageTraits, declare_op
from chute_core.internal import check_dataset, check_sequence

from ._mix import gather
from ._node import EpochArray, MapNode, PositionArray

__all__ = ["SELECT_FROM", "SelectFromMap"]

T = TypeVar("T")


class SelectFromMap(MapNode[T]):
    """Position `i` is the next unused element of `parents[selector[i]]`.

    Each component is read in order: the `m`-th time `selector` names component `j`,
    the element is `parents[j][m]`. The length is `len(selector)`; every component must
    have at least as many elements as `selector` asks of it. Epochs pass on to the
    components.

    Args:
        parents: the components (nodes, sources or sequences), at least one.
        selector: a 1-d sequence or array of component indices in `[0, len(parents))`.

    Example:
        >>> node = SelectFromMap([["a0", "a1"], ["b0", "b1", "b2"]], [1, 0, 1, 1, 0])
        >>> list(node)
        ['b0', 'a0', 'b1', 'b2', 'a1']
    """

    def __init__(
        self,
        parents: Sequence[RandomAccessDataSource[T]],
        selector: Sequence[int] | npt.NDArray[np.integer],
    ) -> None:
        check_sequence(parents, "parents", "SelectFromMap")
        if not parents:
            raise ValueError("SelectFromMap: parents is empty; pass at least one dataset.")
        for number, parent in enumerate(parents):
            check_dataset(parent, "SelectFromMap", f"parents[{number}]")
        array = np.asarray(selector)
        if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
            raise TypeError(
                "SelectFromMap: selector must be a 1-d sequence of component indices (ints), "
                f"got an array of {array.dtype} with shape {array.shape}."
            )
        array = array.astype(np.int64)
        if array.size and (array.min() < 0 or array.max() >= len(parents)):
            bad = int(array[(array < 0) | (array >= len(parents))][0])
            raise ValueError(
                f"SelectFromMap: selector names component {bad}, but there are "
                f"{len(parents)} components (valid: 0..{len(parents) - 1})."
            )
        occurrences = np.zeros(array.size, dtype=np.int64)
        for component, parent in enumerate(parents):
            where = np.flatnonzero(array == component)
            if where.size > len(parent):
                raise ValueError(
                    f"SelectFromMap: selector takes {where.size} elements from component "
                    f"{component}, which has only {len(parent)}."
                )
            occurrences[where] = np.arange(where.size)
        self._parents = tuple(parents)
        self._selector = array
        self._occurrences = occurrences

    @property
    def parents(self) -> tuple[RandomAccessDataSource[T], ...]:
        """The components."""
        return self._parents

    @property
    def selector(self) -> npt.NDArray[np.int64]:
        """The component of each position (a read-only view)."""
        view = self._selector.view()
        view.flags.writeable = False
        return view

    def __len__(self) -> int:
        return int(self._selector.size)

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[T]:
        return gather(
            self._parents, self._selector[positions], self._occurrences[positions], epochs
        )

    def __repr__(self) -> str:
        return f"SelectFromMap({list(self._parents)!r}, selector of length {len(self)})"


SELECT_FROM = declare_op("select_from", StageTraits(), map_node=SelectFromMap)
"""The op's declaration (see `chute_core.declare_op`)."""
