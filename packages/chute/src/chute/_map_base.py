"""What every `MapDataset` is, whatever its ops: a node of random access, and reading it.

`MapBase` holds the node of the layers below that the dataset wraps (`_node`), the
pipeline's stages and seed; it reads (`len`, indexing, slicing, iteration, a stream
over it) and shows the pipeline. The fluent ops are grouped by concept on top of it:
those that keep the element type in `MapOrderOps` (`_map_order`, returning `Self`),
those that change it in `MapDataset` itself. A derived dataset is always a plain one of
the same family (`_construct`), never a user's subclass.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Sequence
from typing import (
    Any,
    ClassVar,
    Concatenate,
    Generic,
    ParamSpec,
    Self,
    SupportsIndex,
    TypeAlias,
    TypeVar,
    cast,
    overload,
)

import numpy as np

from chute_core import RandomAccessDataSource
from chute_execution import ReadOptions
from chute_samplers import SliceMap, TakeMap

from ._element_spec import spec_of
from ._factories import SequentialFactory
from ._iter_base import IterBase
from ._iter_dataset import IterDataset
from ._pipeline import Stage, render, stage, stage_seed
from ._subclassing import Lineage, made

__all__ = ["MapBase"]

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")


Selection: TypeAlias = "slice | Sequence[int] | np.ndarray[Any, Any] | MapBase[int]"
"""What `ds[...]` and `ds.slice(...)` select positions with: a slice, or indices."""


class MapBase(Lineage, abc.ABC, Generic[T]):
    """A dataset with a length and random access, over a node (see `MapDataset`)."""

    __slots__ = ("_node", "_seed", "_stages")

    _iter_family: ClassVar[type[IterDataset[Any]]] = IterDataset
    """The class `to_iter_dataset` makes (a dialect's subclass keeps its datasets in it)."""
    _node: RandomAccessDataSource[T]
    _seed: int | None
    _stages: tuple[Stage, ...]

    @abc.abstractmethod
    def _construct(
        self, node: RandomAccessDataSource[Any], seed: int | None, stages: tuple[Stage, ...]
    ) -> Self:
        """A plain dataset of this family over `node` with `stages`."""

    def _then(self, node: RandomAccessDataSource[Any], item: Stage) -> Self:
        return self._construct(node, self._seed, (*self._stages, item))

    def _stage_seed(self, seed: int | None, op: str) -> int:
        return stage_seed(seed, self._seed, self._stages, op)

    @overload  # Before the index: an array has `__index__` too, and arrays select.
    def __getitem__(self, index: Selection) -> Self: ...

    @overload
    def __getitem__(self, index: SupportsIndex) -> T: ...

    def __getitem__(self, index: SupportsIndex | Selection) -> T | Self:
        """An element, or a new dataset of the positions a slice or indices select.

        Indices select as NumPy's fancy indexing does: a sequence or array of integers
        (any order, repeats, negative ones from the end), a boolean mask of the
        dataset's length, or a `MapDataset` of integers.

        Example:
            >>> from chute import MapDataset
            >>> ds = MapDataset.range(10)
            >>> ds[-1], list(ds[2:8:3]), list(ds[[7, 0, -1, 7]])
            (9, [2, 5], [7, 0, 9, 7])
            >>> list(ds[MapDataset.range(3).map(lambda i: 3 * i)])
            [0, 3, 6]
        """
        if isinstance(index, slice):
            parts = ["" if part is None else str(part) for part in (index.start, index.stop)]
            shown = f"[{':'.join(parts)}{'' if index.step is None else f':{index.step}'}]"
            return self._then(SliceMap(self._node, index), Stage("slice", (("", shown),)))
        if isinstance(index, MapBase):
            taken: TakeMap[T] = TakeMap(self._node, index.node)
        elif isinstance(index, Sequence | np.ndarray) and not isinstance(index, str | bytes):
            taken = TakeMap(self._node, index)
        else:
            element: T = self._node[cast(SupportsIndex, index)]
            return element
        return self._then(taken, stage("take", indices=taken.describe_indices()))

    def slice(self, selection: Selection) -> Self:
        """The same as `ds[selection]`: a slice, or indices (see `__getitem__`)."""
        return self[selection]

    def to_iter_dataset(self, read_options: ReadOptions | None = None) -> IterDataset[T]:
        """A stream over the elements in order, skipping dropped positions.

        Its iterators are checkpointable (`get_state` / `set_state`). With
        `read_options`, chunks of positions are read on a pool of threads, ahead of the
        consumer (bounded); the elements and states are the same as without.

        Example:
            >>> from chute import MapDataset
            >>> it = iter(MapDataset.range(3).to_iter_dataset())
            >>> next(it), it.get_state()
            (0, {'position': 1})
        """
        params = {} if read_options is None else {"read_options": read_options}
        stages = (*self._stages, stage("to_iter_dataset", **params))
        factory = SequentialFactory(self._node, read_options, stages)
        return made(self._iter_family(factory, seed=self._seed), self)

    def to_device(self, device: Any, **options: Any) -> IterBase[Any]:
        """`self.to_iter_dataset().to_device(device, **options)`.

        Example:
            >>> from chute import MapDataset
            >>> import jax
            >>> ds = MapDataset.range(4).batch(2).to_device(jax.devices()[0])
            >>> [b.tolist() for b in ds]
            [[0, 1], [2, 3]]
        """
        return self.to_iter_dataset().to_device(device, **options)

    def pipe(self, fn: Callable[Concatenate[Self, P], R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Returns `fn(self, *args, **kwargs)`, to keep a chain readable.

        Example:
            >>> from chute import MapDataset
            >>> MapDataset.range(4).pipe(lambda ds, n: ds[:n], 2).__len__()
            2
        """
        return fn(self, *args, **kwargs)

    @property
    def element_spec(self) -> Any:
        """The shapes and dtypes of an element: a pytree of `chute.ShapeDtypeStruct`.

        Computed from one element: the first one present (element 0 unless a filter
        dropped it), read through the whole pipeline. After a `batch`, the spec is the
        batch's, with its leading batch dimension (of batch 0).

        Example:
            >>> import chute, numpy as np
            >>> ds = chute.MapDataset.range(4).map(lambda i: {"x": np.zeros((2, 3), np.float32)})
            >>> ds.batch(4).element_spec
            {'x': ShapeDtypeStruct(shape=(4, 2, 3), dtype=dtype('float32'))}
        """
        for element in self:
            return spec_of(element)
        raise ValueError("element_spec: the dataset has no element to read a spec from.")

    # --- reading ----------------------------------------------------------------------

    @property
    def node(self) -> RandomAccessDataSource[T]:
        """The node of the layers below that this dataset wraps."""
        return self._node

    def __len__(self) -> int:
        return len(self._node)

    def __iter__(self) -> Iterator[T]:
        return iter(self.to_iter_dataset())

    def __repr__(self) -> str:
        return render("MapDataset", self._stages)
