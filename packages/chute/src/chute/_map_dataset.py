"""`MapDataset`: a random-access dataset built one fluent method at a time.

The ops are grouped by concept: those that change the element type (elementwise,
structure, combine) here; those that keep it (order, shards, caching) in `MapOrderOps`
(`_map_order`); reading in `MapBase` (`_map_base`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Self, TypeVar, cast

import numpy as np

from chute_core import ArgumentTypeError, RandomAccessDataSource
from chute_samplers import ConcatenateMap, MixMap, SelectFromMap, WeightSchedule, ZipMap
from chute_sources import RangeSource, SequenceSource
from chute_transforms import (
    BatchFn,
    BatchMap,
    FilterMap,
    FilterTransform,
    FlatMapMap,
    FlatMapTransform,
    MapMap,
    MapTransform,
    MapWithIndexMap,
    MapWithIndexTransform,
    MapWithKeyMap,
    RandomMapMap,
    RandomMapTransform,
    UnbatchMap,
)

from ._apply import apply_transforms
from ._args import check_int, check_weights
from ._fluent_op import fluent_op
from ._map_device import host_rows
from ._map_order import MapOrderOps
from ._pipeline import Stage, has_stage, show_source, stage
from ._subclassing import SubclassRecords, made, parent_seed, parents_of

__all__ = ["MapDataset"]

T = TypeVar("T")
U = TypeVar("U")


class MapDataset(MapOrderOps[T]):
    """A dataset with a length and random access, whose elements have type `T`.

    Build one from a source (`MapDataset.source`, `MapDataset.range`) and chain
    methods; each returns a new dataset and builds one node of the layers below
    (nothing is read until elements are asked for). Datasets are immutable and can be
    iterated any number of times, independently. Random stages (`shuffle`,
    `random_map`) take a `seed`, or derive one from the pipeline's `.seed(...)`.

    Example:
        >>> import chute
        >>> ds = chute.MapDataset.range(10).seed(42).shuffle().map(lambda x: x * 10)
        >>> len(ds), sorted(ds) == [x * 10 for x in range(10)]
        (10, True)
        >>> ds.batch(4)[2].tolist() == [ds[8], ds[9]]
        True
    """

    __slots__ = ()

    _family: ClassVar[type[MapDataset[Any]]]
    """The class the methods build datasets of: `MapDataset` (set below), or a dialect's
    subclass (`chute.grain`'s), whose datasets then stay in that dialect."""

    def __init__(
        self,
        node: RandomAccessDataSource[T] | Any = None,
        *,
        seed: int | None = None,
        stages: tuple[Stage, ...] = (),
        parents: Any = None,
    ) -> None:
        if parents is not None:  # Grain's keyword: `super().__init__(parents=[...])`.
            if node is not None:
                raise TypeError("MapDataset: pass the parents once, by position or as parents=.")
            node = parents
        if type(self).__getitem__ is not type(self)._family.__getitem__:
            # A subclass written as for Grain: `super().__init__(parents)`, then its own
            # `__len__` and `__getitem__` (see `_subclassing`).
            seed = parent_seed(parents_of(self, node), seed)
            node = SubclassRecords(self)
            shown = f"{type(self).__name__}[len={len(node)}]"
            stages = (Stage("source", (("", shown),), raw=(("source", node),)),)
        self._node = node
        self._seed = seed
        self._stages = stages

    def _construct(
        self, node: RandomAccessDataSource[Any], seed: int | None, stages: tuple[Stage, ...]
    ) -> Self:
        return cast(Self, made(self._family(node, seed=seed, stages=stages), self))

    def _derive(self, node: RandomAccessDataSource[Any], item: Stage) -> MapDataset[Any]:
        """`_then` for an op that changes the element type (the caller says to what)."""
        return made(self._family(node, seed=self._seed, stages=(*self._stages, item)), self)

    @classmethod
    def source(cls, source: RandomAccessDataSource[U] | Sequence[U]) -> MapDataset[U]:
        """A dataset over a random-access source (anything with `len` and indexing).

        Example:
            >>> MapDataset.source(["a", "b"])[1]
            'b'
        """
        if isinstance(source, MapDataset):
            if cls._family in type(source).__mro__:
                return source
            # A dataset of chute's family into a dialect's (`grain.MapDataset.source(ds)`).
            converted = cls._family(source._node, seed=source._seed, stages=source._stages)
            return made(converted, source)
        if not (hasattr(source, "__len__") and hasattr(source, "__getitem__")) or isinstance(
            source, str | bytes | dict
        ):
            raise TypeError(
                "MapDataset.source needs a random-access source (len() and indexing by "
                f"integer), got {type(source).__name__}; for an iterable, use list(...) or a "
                "chute source."
            )
        node: RandomAccessDataSource[U] = source  # type: ignore[assignment]
        if type(source) is list or type(source) is tuple:
            node = SequenceSource(source)  # Hands out copies of dict/list records.
        shown = show_source(node)
        item = Stage("source", (("", shown),), raw=(("source", source),))
        return cls._family(node, stages=(item,))

    @classmethod
    def range(cls, start: int, stop: int | None = None, step: int = 1) -> MapDataset[int]:
        """The integers of `range(start, stop, step)`.

        Example:
            >>> list(MapDataset.range(1, 10, 4))
            [1, 5, 9]
        """
        return cls.source(RangeSource(start, stop, step))

    # --- elementwise: each element on its own -------------------------------------

    def map(self, transform: MapTransform[T, U] | Callable[[T], U]) -> MapDataset[U]:
        """`transform(element)` for each element.

        Example:
            >>> list(MapDataset.range(3).map(lambda x: x * x))
            [0, 1, 4]
        """
        return self._derive(MapMap(self._node, transform), stage("map", fn=transform))

    def map_with_index(
        self, transform: MapWithIndexTransform[T, U] | Callable[[int, T], U]
    ) -> MapDataset[U]:
        """`transform(index, element)` for each element; the index is its position.

        Example:
            >>> list(MapDataset.source(["a", "b"]).map_with_index(lambda i, x: f"{i}{x}"))
            ['0a', '1b']
        """
        node: MapWithIndexMap[U] = MapWithIndexMap(self._node, transform)
        return self._derive(node, stage("map_with_index", fn=transform))

    def random_map(
        self,
        transform: RandomMapTransform[T, U] | Callable[[T, np.random.Generator], U],
        *,
        seed: int | None = None,
        key: str = "position",
    ) -> MapDataset[U]:
        """`transform(element, rng)`; `rng` is a pure function of (seed, epoch, position).

        With `key="record"`, of (seed, the record's key in the source, its pass)
        instead: a record draws the same wherever a shuffle puts it, so a per-record
        crop agrees with another loader's reading of that record.

        Example:
            >>> ds = MapDataset.range(3).random_map(lambda x, rng: x + rng.random(), seed=0)
            >>> list(ds) == list(ds)
            True
        """
        chosen = self._stage_seed(seed, "random_map")
        node: RandomMapMap[U] = RandomMapMap(self._node, transform, chosen, key=key)
        params = {"key": key} if key != "position" else {}
        return self._derive(node, stage("random_map", fn=transform, seed=chosen, **params))

    def filter(self, transform: FilterTransform[T] | Callable[[T], Any]) -> MapDataset[T]:
        """Keeps the elements for which `transform(element)` is truthy.

        Positions stay (a dropped one reads as `chute.DROPPED`), so `len` does not
        change; iteration skips dropped positions.

        Example:
            >>> list(MapDataset.range(6).filter(lambda x: x % 2))
            [1, 3, 5]
        """
        return self._then(FilterMap(self._node, transform), stage("filter", fn=transform))

    def flat_map(
        self,
        transform: FlatMapTransform[T, U] | Callable[[T], Iterable[U]],
        *,
        max_fan_out: int | None = None,
    ) -> MapDataset[U]:
        """Each element becomes up to `max_fan_out` elements.

        Example:
            >>> list(MapDataset.source(["ab", "c"]).flat_map(list, max_fan_out=2))
            ['a', 'b', 'c']
        """
        node: FlatMapMap = FlatMapMap(self._node, transform, max_fan_out)
        return self._derive(node, stage("flat_map", fn=transform, max_fan_out=max_fan_out))

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
        return self._derive(node, stage("map_with_key", fn=transform))

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

    select_keys = fluent_op("select_keys")
    """Keeps only `keys` of each dict element, in that order (`chute_transforms.SelectKeysMap`)."""

    # --- structure: elements into batches and back --------------------------------

    def batch(
        self,
        batch_size: int,
        *,
        drop_remainder: bool = False,
        pad: bool = False,
        batch_fn: BatchFn | None = None,
        sharding: Any = None,
    ) -> MapDataset[Any]:
        """Consecutive elements stacked into batches (see `chute.batch_elements`).

        Batch `b` holds positions `[b * batch_size, (b + 1) * batch_size)`. After a
        `filter` (or `flat_map`) some positions hold no element, so such batches would
        come out short: that is refused; batch the stream instead
        (`ds.to_iter_dataset().batch(...)`), which fills every batch.

        With `sharding` (a `jax.sharding.Sharding` of the batch, e.g. a data-parallel
        `NamedSharding` over a mesh of all processes' devices), `batch_size` is the
        *global* batch size and this JAX process builds only the rows its devices hold
        (`chute_device.host_rows`), reading only their elements. Batch `b` is then the
        same global batch for any number of processes: `to_device(sharding)` assembles
        the processes' rows into one global `jax.Array`. Across several processes the
        last batch must be dropped or padded, so all yield the same number of batches.

        Example:
            >>> [b.tolist() for b in MapDataset.range(5).batch(2, drop_remainder=True)]
            [[0, 1], [2, 3]]
        """
        if has_stage(self._stages, lambda traits: traits.drops):
            raise ValueError(
                "MapDataset.batch cannot follow filter or flat_map: batches of positions "
                "would come out short where elements were dropped. Batch the stream instead: "
                "ds.to_iter_dataset().batch(...) fills every batch (or use chute_transforms."
                "BatchMap directly if short batches are what you want)."
            )
        batch_size = check_int(batch_size, "batch_size", "MapDataset.batch", minimum=1)
        rows = None
        if sharding is not None:
            rows = host_rows(sharding, batch_size, len(self._node), drop_remainder or pad)
        node = BatchMap(
            self._node,
            batch_size,
            drop_remainder=drop_remainder,
            pad=pad,
            batch_fn=batch_fn,
            rows=rows,
        )
        params: dict[str, Any] = {"batch_size": batch_size, "drop_remainder": drop_remainder}
        if pad:
            params["pad"] = True
        if batch_fn is not None:
            params["batch_fn"] = batch_fn
        if rows is not None:
            params["rows"] = rows
        return self._derive(node, stage("batch", **params))

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
        return self._derive(UnbatchMap(self._node), stage("unbatch"))

    # --- combine: several datasets into one ----------------------------------------

    @classmethod
    def mix(
        cls, datasets: Sequence[MapDataset[Any]], weights: Sequence[float] | None = None
    ) -> MapDataset[Any]:
        """Interleaves datasets in proportion to `weights`, deterministically.

        In every prefix, each dataset's count is within one element of its share. The
        mix ends when a dataset runs out (repeat them to avoid that).

        Example:
            >>> a, b = MapDataset.source(["a"] * 4), MapDataset.source(["b"] * 8)
            >>> "".join(MapDataset.mix([a, b], weights=[1, 2]))
            'babbabbabbab'
        """
        checked = [MapDataset.source(d) for d in datasets]
        if isinstance(weights, WeightSchedule):
            raise ArgumentTypeError(
                "MapDataset.mix: weights that change (a WeightSchedule) would change which "
                "record every position reads; mix streams instead: IterDataset.mix(["
                "ds.to_iter_dataset() for ds in datasets], schedule)."
            )
        check_weights(weights, len(checked), "MapDataset.mix")
        node = MixMap([d._node for d in checked], weights)
        shown = None if weights is None else list(weights)
        item = Stage("mix", (("weights", repr(shown)),), tuple(d._stages for d in checked))
        return made(cls._family(node, stages=(item,)), *checked)

    @classmethod
    def select_from(
        cls, datasets: Sequence[MapDataset[Any]], selector: Sequence[int] | np.ndarray[Any, Any]
    ) -> MapDataset[Any]:
        """Element `i` comes from `datasets[selector[i]]` (each dataset read in order).

        Example:
            >>> a, b = MapDataset.source(["x", "y"]), MapDataset.source(["z"])
            >>> list(MapDataset.select_from([a, b], [0, 1, 0]))
            ['x', 'z', 'y']
        """
        checked = [MapDataset.source(d) for d in datasets]
        node = SelectFromMap([d._node for d in checked], selector)
        item = Stage(
            "select_from",
            (("selector", f"<{len(node)} choices>"),),
            tuple(d._stages for d in checked),
            raw=(("selector", np.asarray(selector)),),
        )
        return made(cls._family(node, stages=(item,)), *checked)

    @classmethod
    def zip(cls, *datasets: Any) -> MapDataset[tuple[Any, ...]]:
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
        if len(datasets) == 1 and isinstance(datasets[0], list | tuple):
            datasets = tuple(datasets[0])  # Grain's spelling: ZipMapDataset([a, b]).
        checked = _sources(datasets, "MapDataset.zip")
        item = Stage("zip", (), tuple(d._stages for d in checked))
        return made(cls._family(ZipMap([d._node for d in checked]), stages=(item,)), *checked)

    @classmethod
    def concatenate(cls, datasets: Sequence[Any]) -> MapDataset[Any]:
        """Random access over the positions of `datasets[0]`, then `datasets[1]`, ...

        As Grain's `MapDataset.concatenate`; endless (repeated) datasets are refused:
        repeat after concatenating.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.concatenate([chute.MapDataset.range(2), ["a", "b"]])
            >>> len(ds), ds[2], list(ds)
            (4, 'a', [0, 1, 'a', 'b'])
        """
        if not isinstance(datasets, list | tuple):
            raise TypeError(
                "MapDataset.concatenate takes a list of datasets, got "
                f"{type(datasets).__name__}; e.g. MapDataset.concatenate([a, b])."
            )
        checked = _sources(datasets, "MapDataset.concatenate")
        item = Stage("concatenate", (), tuple(d._stages for d in checked))
        node = ConcatenateMap([d._node for d in checked])
        return made(cls._family(node, stages=(item,)), *checked)


def _sources(datasets: Sequence[Any], owner: str) -> list[MapDataset[Any]]:
    if not datasets:
        raise ValueError(f"{owner} needs at least one dataset.")
    return [MapDataset.source(d) for d in datasets]


MapDataset._family = MapDataset
