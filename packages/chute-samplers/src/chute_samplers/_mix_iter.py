"""`MixIter`: a deterministic weighted mixture of streams."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from chute_core import CheckpointableIterator, IteratorState, StageTraits, declare_op
from chute_core.internal import (
    check_sequence,
    restore_all,
    state_bool,
    state_dict,
    state_dicts,
    state_int,
)

from ._iter_base import IterNode
from ._mix import MixMap
from ._schedule import MixSchedule
from ._weight_schedule import WeightSchedule

__all__ = ["MIX", "MIX_STATES", "MixIter", "MixStates", "check_iterator"]

T = TypeVar("T")


def check_iterator(value: object, owner: str, name: str) -> None:
    """Raises `TypeError` unless `value` is a checkpointable iterator."""
    missing = [m for m in ("__next__", "get_state", "set_state") if not hasattr(value, m)]
    if missing:
        raise TypeError(
            f"{owner}: {name} must be a checkpointable iterator (with __next__, get_state "
            f"and set_state), got {type(value).__name__} without {', '.join(missing)}."
        )


class MixIter(IterNode[T]):
    """Mixes streams by `weights`: position `p` takes the next element of one component.

    Which component is fixed by the position alone (`MixSchedule`: in every prefix each
    component's count is within one element of its share), so the mixture is
    deterministic and keeps its proportions however sparse (e.g. filtered) the
    components are. It ends when the component whose turn it is has run out.

    The state is the position (an index-sized int) plus every component's state; a
    state that one component refuses moves none of them. The `origin` of an element
    is `(component,) + <its origin in the component>` (None if the component gives
    none).

    Args:
        iterators: the component streams (checkpointable iterators), at least one.
        weights: one positive finite weight per component; None for equal weights; or a
            `WeightSchedule`, weights that change at given positions.

    Example:
        >>> from chute_samplers import SequentialIter
        >>> evens = SequentialIter(range(0, 100, 2))
        >>> odds = SequentialIter(range(1, 100, 2))
        >>> it = MixIter([evens, odds], weights=[3, 1])
        >>> [next(it) for _ in range(8)]
        [0, 2, 4, 1, 6, 8, 10, 3]
        >>> it.origin  # Component 1, position 1 of `odds`.
        (1, 1)
    """

    def __init__(
        self,
        iterators: Sequence[CheckpointableIterator[T]],
        weights: Sequence[float] | WeightSchedule | None = None,
    ) -> None:
        check_sequence(iterators, "iterators", "MixIter")
        if not iterators:
            raise ValueError("MixIter: iterators is empty; pass at least one stream.")
        for number, iterator in enumerate(iterators):
            check_iterator(iterator, "MixIter", f"iterators[{number}]")
        self._iterators = tuple(iterators)
        if isinstance(weights, WeightSchedule):
            weights.check_count(len(iterators), "MixIter")
            self._weights: MixSchedule | WeightSchedule = weights
            self._component_of = weights.locator()
        else:
            self._weights = MixSchedule(weights, len(iterators))
            self._component_of = self._weights.locate_one
        self._position = 0
        self._exhausted = False
        self._last = -1  # The component of the element last returned (-1: none).

    @property
    def origin(self) -> tuple[int, ...] | None:
        """`(component,) + component.origin` of the element last returned."""
        component = self._last
        if component < 0:
            return None
        inner: tuple[int, ...] | None = getattr(self._iterators[component], "origin", None)
        return None if inner is None else (component, *inner)

    def __next__(self) -> T:
        if self._exhausted:
            raise StopIteration
        component = self._component_of(self._position)
        try:
            element = next(self._iterators[component])
        except StopIteration:
            self._exhausted = True
            raise
        self._position += 1
        self._last = component
        return element

    def get_state(self) -> IteratorState:
        return {
            "position": self._position,
            "exhausted": self._exhausted,
            "components": [iterator.get_state() for iterator in self._iterators],
        }

    def set_state(self, state: IteratorState, /) -> None:
        checked = state_dict(self, state, ("position", "exhausted", "components"))
        position = state_int(self, checked, "position")
        exhausted = state_bool(self, checked, "exhausted")
        components = state_dicts(self, checked, "components", len(self._iterators), "component")
        restore_all(self._iterators, components)
        self._position, self._exhausted, self._last = position, exhausted, -1

    def __repr__(self) -> str:
        return f"MixIter({len(self._iterators)} components, {self._weights!r})"


MIX = declare_op(
    "mix",
    StageTraits(changeable=frozenset({"weights"}), chooses=True),  # When it mixes streams.
    map_node=MixMap,
    iter_node=MixIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""


class MixStates:
    """The layout of a `MixIter`'s state, for resharding each component on its own.

    Example:
        >>> state = {"position": 5, "exhausted": False, "components": [{"position": 3}]}
        >>> MIX_STATES.components(state)
        [{'position': 3}]
        >>> MIX_STATES.rebuild([{"position": 0}], 2)
        {'position': 2, 'exhausted': False, 'components': [{'position': 0}]}
    """

    def components(self, state: object) -> list[dict[str, object]] | None:
        """The components' states; None if `state` is not a mixture's."""
        if not isinstance(state, dict) or set(state) != {"position", "exhausted", "components"}:
            return None
        components = state["components"]
        if not isinstance(components, list) or not all(isinstance(c, dict) for c in components):
            return None
        return components

    def position(self, state: dict[str, object]) -> int:
        """The mixture's position (elements it handed out)."""
        position = state["position"]
        if type(position) is not int or position < 0:
            raise ValueError(f"a mixture's position must be an int >= 0, got {position!r:.50}.")
        return position

    def rebuild(self, components: list[dict[str, object]], position: int) -> dict[str, object]:
        """A mixture's state at `position` over `components`' states (not exhausted)."""
        return {"position": position, "exhausted": False, "components": components}


MIX_STATES = MixStates()
"""How resharding reads and writes a mixture's state (see `MixStates`)."""
