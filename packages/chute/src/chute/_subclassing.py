"""Datasets written as Grain users write them: subclasses that call `super().__init__(parents)`.

A Grain user extends `MapDataset` by overriding `__len__` and `__getitem__`, and
`IterDataset` by overriding `__iter__` (returning a `DatasetIterator` of their own),
after `super().__init__(parent)`. chute's datasets are otherwise built from a node or a
factory; these helpers turn such a subclass into one: its own methods become the source
of a pipeline that every chute method can extend (`ds.map(...)`, `ds.batch(...)`,
workers, checkpoints). The parents are kept as `_parents` (and `_parent` when there is
one), where the subclass's methods look for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from chute_core import CheckpointableIterator
from chute_execution import StageClock
from chute_samplers import IterNode

__all__ = [
    "DatasetIterator",
    "Lineage",
    "SubclassRecords",
    "made",
    "parent_seed",
    "parents_of",
    "subclass_iterator",
]

T = TypeVar("T")
D = TypeVar("D")


def parents_of(dataset: Any, parents: Any) -> tuple[Any, ...]:
    """Stores `parents` (one dataset, a sequence of them, or None) on `dataset`."""
    if parents is None:
        found: tuple[Any, ...] = ()
    elif isinstance(parents, Sequence) and not hasattr(parents, "_node"):
        found = tuple(parents)
    else:
        found = (parents,)
    dataset._parents = found
    if len(found) == 1:
        dataset._parent = found[0]
    return found


class Lineage:
    """Base of every dataset class: the datasets a dataset was made from (`parents`)."""

    __slots__ = ("_parents",)

    @property
    def parents(self) -> tuple[Any, ...]:
        """The datasets this one was made from (none for a source), as Grain lists them.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(3)
            >>> ds.map(str).parents[0] is ds, ds.parents
            (True, ())
        """
        return getattr(self, "_parents", ())


def made(dataset: D, *parents: Any) -> D:
    """`dataset`, recording the datasets it was made from (its `parents`)."""
    dataset._parents = parents  # type: ignore[attr-defined]
    return dataset


def parent_seed(parents: tuple[Any, ...], default: int | None) -> int | None:
    """The pipeline seed of the first parent that has one (`.seed(...)`), else `default`."""
    for parent in parents:
        seed = getattr(parent, "_seed", None)
        if seed is not None:
            return int(seed)
    return default


class SubclassRecords:
    """A Grain-style `MapDataset` subclass seen as a random-access source.

    Its length and elements are the subclass's own `__len__` and `__getitem__`. It
    pickles with the dataset (for worker processes): the subclass must be importable.

    Example:
        >>> import chute
        >>> class Doubled(chute.MapDataset):
        ...     def __init__(self, parent):
        ...         super().__init__(parent)
        ...
        ...     def __len__(self):
        ...         return len(self._parent)
        ...
        ...     def __getitem__(self, index):
        ...         return self._parent[index] * 2
        >>> list(Doubled(chute.MapDataset.range(3)).map(lambda x: x + 1))
        [1, 3, 5]
    """

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        length: int = type(self.dataset).__len__(self.dataset)
        return length

    def __getitem__(self, index: int) -> Any:
        return type(self.dataset).__getitem__(self.dataset, index)

    def __repr__(self) -> str:
        return f"{type(self.dataset).__name__}(len={len(self)})"


class subclass_iterator:
    """Makes the iterator of a Grain-style `IterDataset` subclass: its own `__iter__`."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __call__(self) -> CheckpointableIterator[Any]:
        made: CheckpointableIterator[Any] = type(self.dataset).__iter__(self.dataset)
        return made


class DatasetIterator(IterNode[T]):
    """Base class of iterators written as Grain's `DatasetIterator` subclasses are.

    Every chute iterator counts as one (`isinstance(iter(ds), DatasetIterator)`), as
    every iterator of a Grain dataset is one in Grain; `DatasetIterator[int]` is a type.

    Call `super().__init__(parent)` (or a sequence of parents); implement `__next__`,
    `get_state` and `set_state` (abstract: a subclass without them cannot be made).
    The parents are `self._parents` (and `self._parent`).

    Example:
        >>> import chute
        >>> class PlusOne(DatasetIterator):
        ...     def __next__(self):
        ...         return next(self._parent) + 1
        ...
        ...     def get_state(self):
        ...         return self._parent.get_state()
        ...
        ...     def set_state(self, state):
        ...         self._parent.set_state(state)
        >>> it = PlusOne(iter(chute.MapDataset.range(3).to_iter_dataset()))
        >>> list(it)
        [1, 2, 3]
    """

    def __init__(self, parents: Any = None) -> None:
        parents_of(self, parents)

    @classmethod
    def __subclasshook__(cls, candidate: type) -> Any:
        # chute's iterators do not derive from this class (Grain's spelling, in the top
        # layer); each is an instance of it all the same. Not of a user's subclass.
        # A stage's clock (`ds.iter(stats=True)`, metrics) stands for the iterator it times.
        if cls is DatasetIterator and (
            IterNode in candidate.__mro__ or StageClock in candidate.__mro__
        ):
            return True
        return NotImplemented
