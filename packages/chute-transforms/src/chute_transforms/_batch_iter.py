"""`BatchIter`: batching a checkpointable stream."""

from __future__ import annotations

from itertools import islice
from typing import Any, Self

from chute_core import (
    CheckpointableIterator,
    IteratorState,
    StageTraits,
    declare_op,
)
from chute_core.internal import state_dict, state_parent
from chute_samplers import IterNode

from ._batch import BatchFn
from ._batch_tree import make_batch
from ._map_structure_ops import BatchMap
from ._transforms import BatchTransform, check_batch_options

__all__ = ["BATCH", "BatchIter"]


class BatchIter(IterNode[Any]):
    """Groups the elements of a checkpointable iterator into batches.

    Each batch is built from `batch_size` consecutive elements by `batch_elements` (or
    `batch_fn`). A last short batch is yielded as is, dropped (`drop_remainder`), or
    padded (`pad`: then *every* batch is a `(batch, mask)` pair, so the structure
    never changes; `mask` is True for real rows).

    State: `{"parent": <parent state>}`, the parent's state at the start of the next
    batch. A batch is atomic: `next()` either returns a whole batch or, if reading or
    batching raises, rewinds the parent to the batch's start before re-raising. So the
    state never points inside a batch, holds no elements, and restoring it continues
    with the next whole batch (calling `next()` again after an error retries that
    batch). It costs one `parent.get_state()` call per batch. Not thread-safe.

    The `origin` of a batch is the origin of its first element (None after
    `set_state` until the next batch).

    Args:
        parent: the elements.
        batch_size: elements per batch, >= 1.
        drop_remainder: drop a last batch smaller than `batch_size`.
        pad: pad a last short batch to `batch_size` and yield `(batch, mask)` pairs.
        batch_fn: builds a batch from a list of elements, instead of `batch_elements`.

    Example:
        >>> from chute_transforms import BatchIter
        >>> from chute_samplers import SequentialIter
        >>> it = BatchIter(SequentialIter([1, 2, 3, 4, 5]), 2)
        >>> next(it), it.get_state()
        (array([1, 2]), {'parent': {'position': 2}})
        >>> list(it)
        [array([3, 4]), array([5])]
        >>> it.origin  # Of the element 5: index 4 of the list.
        (4,)
        >>> list(BatchIter(SequentialIter([1, 2, 3]), 2, pad=True))[-1]
        (array([3, 0]), array([ True, False]))
    """

    def __init__(
        self,
        parent: CheckpointableIterator[Any],
        batch_size: int,
        *,
        drop_remainder: bool = False,
        pad: bool = False,
        batch_fn: BatchFn | None = None,
    ) -> None:
        batch_size = check_batch_options("BatchIter", batch_size, drop_remainder, pad, batch_fn)
        self._parent = parent
        self._batch_size = batch_size
        self._drop_remainder = drop_remainder
        self._pad = pad
        self._batch_fn = batch_fn
        self._origin: tuple[int, ...] | None = None  # Of the first element of the batch.

    @property
    def origin(self) -> tuple[int, ...] | None:
        """The origin of the first element of the batch last returned."""
        return self._origin

    @classmethod
    def from_transform(cls, parent: CheckpointableIterator[Any], transform: BatchTransform) -> Self:
        """Returns a `BatchIter` with the options of `transform`.

        Example:
            >>> from chute_transforms import BatchTransform
            >>> from chute_samplers import SequentialIter
            >>> BatchIter.from_transform(SequentialIter([1]), BatchTransform(4, pad=True))
            BatchIter(batch_size=4, drop_remainder=False, pad=True)
        """
        return cls(
            parent,
            transform.batch_size,
            drop_remainder=transform.drop_remainder,
            pad=transform.pad,
            batch_fn=transform.batch_fn,
        )

    def __repr__(self) -> str:
        fn = "" if self._batch_fn is None else f", batch_fn={self._batch_fn!r}"
        return (
            f"BatchIter(batch_size={self._batch_size}, drop_remainder={self._drop_remainder}, "
            f"pad={self._pad}{fn})"
        )

    def __iter__(self) -> Self:
        """Returns the iterator itself."""
        return self

    def __next__(self) -> Any:
        """Returns the next batch; raises `StopIteration` when the parent is exhausted."""
        parent, size = self._parent, self._batch_size
        start = parent.get_state()
        try:
            first = next(parent)
            origin: tuple[int, ...] | None = getattr(parent, "origin", None)
            many = getattr(parent, "next_many", None)  # A reader's faster bulk `next`.
            rest = islice(parent, size - 1) if many is None else many(size - 1)
            elements = [first, *rest]
            if len(elements) < size and self._drop_remainder:
                raise StopIteration
            batch = make_batch(elements, size, self._pad, self._batch_fn)
            self._origin = origin
            return batch
        except StopIteration:
            raise
        except BaseException:
            parent.set_state(start)  # Atomic batches: the state stays at the batch start.
            raise

    def get_state(self) -> IteratorState:
        """Returns `{"parent": ...}`: the parent's state at the start of the next batch."""
        return {"parent": self._parent.get_state()}

    def set_state(self, state: IteratorState, /) -> None:
        """Moves to the batch that starts where `state` (from `get_state`) says.

        Raises:
            InvalidStateError: `state` is not a state of a `BatchIter`.
        """
        checked = state_dict(self, state, ("parent",))
        self._parent.set_state(state_parent(self, checked))
        self._origin = None


BATCH = declare_op(
    "batch",
    StageTraits(keeps_positions=True, groups="batch_size", performance=frozenset({"rows"})),
    map_node=BatchMap,
    iter_node=BatchIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""
