"""Grain's operations on `MapDataset`: `limit`, `cache`, `unbatch`, `zip`, `concatenate`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from chute_core import RandomAccessDataSource
from chute_samplers import CacheMap, ConcatenateMap, SliceMap, ZipMap
from chute_transforms import MapWithKeyMap, UnbatchMap

from ._apply import apply_transforms
from ._args import check_int
from ._element_spec import spec_of
from ._pipeline import Stage, stage

if TYPE_CHECKING:
    from ._map_dataset import MapDataset

__all__ = ["GrainMapMixin"]

T = TypeVar("T")


class GrainMapMixin(Generic[T]):
    """The random-access operations a Grain user reaches for, each one node."""

    __slots__ = ()
    _node: RandomAccessDataSource[T]

    def _then(self, node: RandomAccessDataSource[Any], item: Stage) -> MapDataset[Any]:
        raise NotImplementedError  # MapDataset's.

    def limit(self, count: int) -> MapDataset[T]:
        """The first `count` positions (all of them if there are fewer): `ds[:count]`.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(10).limit(3)
            >>> list(ds), len(chute.MapDataset.range(2).limit(3))
            ([0, 1, 2], 2)
        """
        count = check_int(count, "count", "MapDataset.limit")
        return self._then(SliceMap(self._node, slice(0, count)), stage("limit", count=count))

    def map_with_key(self, transform: Callable[[int, T], Any]) -> MapDataset[Any]:
        """`transform(key, element)`, `key` the record's index in the source.

        Shuffles, repeats, slices and shards above the source are followed down to it
        (`chute_samplers.record_keys`), so `key` is the index the source was read at.
        A stage that mixes, batches or splits elements before it hides the key: the
        read then raises `InvalidArgumentError`.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.source(["a", "b", "c"]).shuffle(seed=2)
            >>> sorted(ds.map_with_key(lambda key, x: (key, x)))
            [(0, 'a'), (1, 'b'), (2, 'c')]
        """
        node: MapWithKeyMap[Any] = MapWithKeyMap(self._node, transform)
        return self._then(node, stage("map_with_key", fn=transform))

    def cache(self) -> MapDataset[T]:
        """Keeps each element in memory, by position, once it has been read.

        Memory: every element read so far, up to the whole dataset, stays in memory
        for the dataset's lifetime (a dict by position); worker processes each hold
        their own copy of what they read. The stages before the cache run once per
        position: a random stage before it is drawn once (in epoch 0), not anew per
        epoch; a shuffle after it still reorders every epoch.

        Example:
            >>> import chute
            >>> calls = []
            >>> ds = chute.MapDataset.range(3).map(lambda x: calls.append(x) or x).cache()
            >>> list(ds.repeat(2)), calls
            ([0, 1, 2, 0, 1, 2], [0, 1, 2])
        """
        return self._then(CacheMap(self._node), stage("cache"))

    def unbatch(self) -> MapDataset[Any]:
        """Random access to the rows of the batches: position `i` is the `i`-th row.

        Needs each batch's row count. Right after `batch` (no `filter` before it, no
        `pad` or `batch_fn`) they are arithmetic. Otherwise the first `len()` or read
        counts them by reading every batch once (a full pass), and keeps one int64
        per batch in memory (`chute_transforms.UnbatchMap`).

        Example:
            >>> import chute, numpy as np
            >>> ds = chute.MapDataset.range(5).batch(2).unbatch()
            >>> len(ds), int(ds[3])
            (5, 3)
            >>> ragged = chute.MapDataset.source([np.arange(3), np.arange(5, 6)]).unbatch()
            >>> [int(x) for x in ragged]
            [0, 1, 2, 5]
        """
        return self._then(UnbatchMap(self._node), stage("unbatch"))

    def apply(self, transformations: Any) -> MapDataset[Any]:
        """Applies a transform object, or a list of them in order, each by its op.

        `MapTransform` -> `map`, `RandomMapTransform` -> `random_map` (the pipeline's
        seed), `FilterTransform` -> `filter`, `FlatMapTransform` -> `flat_map`,
        `MapWithIndexTransform` -> `map_with_index`, `BatchTransform` -> `batch`.

        Raises:
            ArgumentTypeError: an object that is none of these (e.g. a plain function).

        Example:
            >>> import chute
            >>> class Odd(chute.FilterTransform):
            ...     def filter(self, x): return x % 2 == 1
            >>> list(chute.MapDataset.range(6).apply(Odd()))
            [1, 3, 5]
        """
        return apply_transforms(self, transformations, "MapDataset.apply")  # type: ignore[no-any-return]

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
        for element in self:  # type: ignore[attr-defined]
            return spec_of(element)
        raise ValueError("element_spec: the dataset has no element to read a spec from.")

    @staticmethod
    def zip(*datasets: Any) -> MapDataset[tuple[Any, ...]]:
        """Position `i` is the tuple of the datasets' elements at `i`: `MapDataset.zip(a, b)`.

        The length is the shortest dataset's (Grain's `ZipMapDataset` refuses datasets
        of different lengths; equal lengths give the same). A position that one of
        the datasets filtered out is left out.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.zip(chute.MapDataset.range(3), ["a", "b"])
            >>> len(ds), ds[1], list(ds)
            (2, (1, 'b'), [(0, 'a'), (1, 'b')])
        """
        from ._map_dataset import MapDataset

        if len(datasets) == 1 and isinstance(datasets[0], list | tuple):
            datasets = tuple(datasets[0])  # Grain's spelling: ZipMapDataset([a, b]).
        checked = _sources(datasets, "MapDataset.zip")
        item = Stage("zip", (), tuple(d._stages for d in checked))
        return MapDataset(ZipMap([d._node for d in checked]), stages=(item,))

    @staticmethod
    def concatenate(datasets: Sequence[Any]) -> MapDataset[Any]:
        """Random access over the positions of `datasets[0]`, then `datasets[1]`, ...

        As Grain's `MapDataset.concatenate`; endless (repeated) datasets are refused:
        repeat after concatenating.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.concatenate([chute.MapDataset.range(2), ["a", "b"]])
            >>> len(ds), ds[2], list(ds)
            (4, 'a', [0, 1, 'a', 'b'])
        """
        from ._map_dataset import MapDataset

        if not isinstance(datasets, list | tuple):
            raise TypeError(
                "MapDataset.concatenate takes a list of datasets, got "
                f"{type(datasets).__name__}; e.g. MapDataset.concatenate([a, b])."
            )
        checked = _sources(datasets, "MapDataset.concatenate")
        item = Stage("concatenate", (), tuple(d._stages for d in checked))
        return MapDataset(ConcatenateMap([d._node for d in checked]), stages=(item,))


def _sources(datasets: Sequence[Any], owner: str) -> list[MapDataset[Any]]:
    from ._map_dataset import MapDataset

    if not datasets:
        raise ValueError(f"{owner} needs at least one dataset.")
    return [MapDataset.source(d) for d in datasets]
