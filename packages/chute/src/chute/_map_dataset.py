"""`MapDataset`: a random-access dataset built one fluent method at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    SupportsIndex,
    TypeVar,
    overload,
)

import numpy as np

from chute_core import RandomAccessDataSource
from chute_execution import ReadOptions
from chute_samplers import (
    MixMap,
    RepeatMap,
    SelectFromMap,
    ShardMap,
    ShardOptions,
    ShuffleMap,
    SliceMap,
)
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
    RandomMapMap,
    RandomMapTransform,
)

from ._args import check_int, check_optional_int, check_weights
from ._map_device import host_rows, mesh_shard
from ._map_grain import GrainMapMixin
from ._pipeline import (
    Stage,
    check_pipeline_seed,
    has_stage,
    render,
    show_source,
    stage,
    stage_seed,
)
from ._subclassing import SubclassRecords, parent_seed, parents_of

if TYPE_CHECKING:
    from ._iter_dataset import IterDataset

__all__ = ["MapDataset"]

T = TypeVar("T")
U = TypeVar("U")
P = ParamSpec("P")
R = TypeVar("R")


class MapDataset(GrainMapMixin[T], Generic[T]):
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

    __slots__ = ("_node", "_seed", "_stages")

    def __init__(
        self,
        node: RandomAccessDataSource[T] | Any = None,
        *,
        seed: int | None = None,
        stages: tuple[Stage, ...] = (),
    ) -> None:
        if type(self).__getitem__ is not MapDataset.__getitem__:
            # A subclass written as for Grain: `super().__init__(parents)`, then its own
            # `__len__` and `__getitem__` (see `_subclassing`).
            seed = parent_seed(parents_of(self, node), seed)
            node = SubclassRecords(self)
            shown = f"{type(self).__name__}[len={len(node)}]"
            stages = (Stage("source", (("", shown),), raw=(("source", node),)),)
        self._node = node
        self._seed = seed
        self._stages = stages

    # --- building --------------------------------------------------------------------

    @classmethod
    def source(cls, source: RandomAccessDataSource[U] | Sequence[U]) -> MapDataset[U]:
        """A dataset over a random-access source (anything with `len` and indexing).

        Example:
            >>> MapDataset.source(["a", "b"])[1]
            'b'
        """
        if isinstance(source, MapDataset):
            return source
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
        return MapDataset(node, stages=(item,))

    @classmethod
    def range(cls, start: int, stop: int | None = None, step: int = 1) -> MapDataset[int]:
        """The integers of `range(start, stop, step)`.

        Example:
            >>> list(MapDataset.range(1, 10, 4))
            [1, 5, 9]
        """
        return MapDataset.source(RangeSource(start, stop, step))

    def _then(self, node: RandomAccessDataSource[U], item: Stage) -> MapDataset[U]:
        return MapDataset(node, seed=self._seed, stages=(*self._stages, item))

    def _stage_seed(self, seed: int | None, op: str) -> int:
        return stage_seed(seed, self._seed, self._stages, op)

    def seed(self, seed: int) -> MapDataset[T]:
        """Sets the seed from which later random stages without a `seed` derive theirs.

        Each random stage gets its own seed, derived from this one and its place in
        the pipeline.

        Example:
            >>> ds = MapDataset.range(5).seed(0).shuffle()
            >>> list(ds) == list(MapDataset.range(5).seed(0).shuffle())
            True
        """
        checked = check_pipeline_seed(seed)
        return MapDataset(
            self._node, seed=checked, stages=(*self._stages, stage("seed", seed=checked))
        )

    def shuffle(self, seed: int | None = None) -> MapDataset[T]:
        """A global shuffle; repeated, each epoch is shuffled anew.

        Example:
            >>> sorted(MapDataset.range(4).shuffle(seed=1))
            [0, 1, 2, 3]
        """
        chosen = self._stage_seed(seed, "shuffle")
        return self._then(ShuffleMap(self._node, chosen), stage("shuffle", seed=chosen))

    def repeat(self, num_epochs: int | None = None) -> MapDataset[T]:
        """`num_epochs` passes over the dataset (None: endless, length `sys.maxsize`).

        A finite repeat longer than `sys.maxsize` raises `chute.LengthOverflowError`.

        Example:
            >>> list(MapDataset.range(2).repeat(3))
            [0, 1, 0, 1, 0, 1]
        """
        num_epochs = check_optional_int(num_epochs, "num_epochs", "MapDataset.repeat")
        return self._then(RepeatMap(self._node, num_epochs), stage("repeat", num_epochs=num_epochs))

    @overload
    def __getitem__(self, index: SupportsIndex) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> MapDataset[T]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> T | MapDataset[T]:
        """An element, or with a slice a new dataset of the selected positions.

        Example:
            >>> ds = MapDataset.range(10)
            >>> ds[-1], list(ds[2:8:3])
            (9, [2, 5])
        """
        if isinstance(index, slice):
            parts = ["" if part is None else str(part) for part in (index.start, index.stop)]
            shown = f"[{':'.join(parts)}{'' if index.step is None else f':{index.step}'}]"
            return self._then(SliceMap(self._node, index), Stage("slice", (("", shown),)))
        element: T = self._node[index]
        return element

    def slice(self, selection: slice) -> MapDataset[T]:
        """The same as `ds[selection]`."""
        return self[selection]

    def shard(
        self,
        shard_index: Any,
        shard_count: Any = None,
        drop_remainder: bool = False,
    ) -> MapDataset[T]:
        """This process's share: every `shard_count`-th element from `shard_index`.

        Accepts a `ShardOptions` too, or, as Loadax spells it, `shard(mesh,
        data_axis_name)`: a `jax.sharding.Mesh` and the name of its data axis give this
        JAX process its share (`chute.device.shard_options_for_mesh`; processes that
        share a data-parallel replica read the same share). Shards are disjoint and
        together cover the data.

        Example:
            >>> list(MapDataset.range(7).shard(1, 3))
            [1, 4]
        """
        if isinstance(shard_index, ShardOptions):
            options = shard_index
        elif hasattr(shard_index, "axis_names") and hasattr(shard_index, "devices"):
            options = mesh_shard(shard_index, shard_count, drop_remainder)
        else:
            if shard_count is None:
                raise TypeError("shard needs shard_count (or a ShardOptions).")
            shard_index = check_int(shard_index, "shard_index", "MapDataset.shard")
            shard_count = check_int(shard_count, "shard_count", "MapDataset.shard", minimum=1)
            options = ShardOptions(shard_index, shard_count, drop_remainder)
        node = ShardMap(
            self._node, options.shard_index, options.shard_count, options.drop_remainder
        )
        item = stage(
            "shard",
            shard_index=options.shard_index,
            shard_count=options.shard_count,
            drop_remainder=options.drop_remainder,
        )
        return self._then(node, item)

    def map(self, transform: MapTransform[T, U] | Callable[[T], U]) -> MapDataset[U]:
        """`transform(element)` for each element.

        Example:
            >>> list(MapDataset.range(3).map(lambda x: x * x))
            [0, 1, 4]
        """
        return self._then(MapMap(self._node, transform), stage("map", fn=transform))

    def map_with_index(
        self, transform: MapWithIndexTransform[T, U] | Callable[[int, T], U]
    ) -> MapDataset[U]:
        """`transform(index, element)` for each element; the index is its position.

        Example:
            >>> list(MapDataset.source(["a", "b"]).map_with_index(lambda i, x: f"{i}{x}"))
            ['0a', '1b']
        """
        node: MapWithIndexMap[U] = MapWithIndexMap(self._node, transform)
        return self._then(node, stage("map_with_index", fn=transform))

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
        return self._then(node, stage("random_map", fn=transform, seed=chosen, **params))

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
        return self._then(node, stage("flat_map", fn=transform, max_fan_out=max_fan_out))

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
        if has_stage(self._stages, frozenset({"filter", "flat_map"})):
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
        return self._then(node, stage("batch", **params))

    @staticmethod
    def mix(
        datasets: Sequence[MapDataset[Any]], weights: Sequence[float] | None = None
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
        check_weights(weights, len(checked), "MapDataset.mix")
        node = MixMap([d._node for d in checked], weights)
        shown = None if weights is None else list(weights)
        item = Stage("mix", (("weights", repr(shown)),), tuple(d._stages for d in checked))
        return MapDataset(node, stages=(item,))

    @staticmethod
    def select_from(
        datasets: Sequence[MapDataset[Any]], selector: Sequence[int] | np.ndarray[Any, Any]
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
        return MapDataset(node, stages=(item,))

    def to_iter_dataset(self, read_options: ReadOptions | None = None) -> IterDataset[T]:
        """A stream over the elements in order, skipping dropped positions.

        Its iterators are checkpointable (`get_state` / `set_state`). With
        `read_options`, chunks of positions are read on a pool of threads, ahead of the
        consumer (bounded); the elements and states are the same as without.

        Example:
            >>> it = iter(MapDataset.range(3).to_iter_dataset())
            >>> next(it), it.get_state()
            (0, {'position': 1})
        """
        from ._factories import SequentialFactory
        from ._iter_dataset import IterDataset

        params = {} if read_options is None else {"read_options": read_options}
        stages = (*self._stages, stage("to_iter_dataset", **params))
        return IterDataset(SequentialFactory(self._node, read_options, stages), seed=self._seed)

    def to_device(self, device: Any, **options: Any) -> IterDataset[Any]:
        """`self.to_iter_dataset().to_device(device, **options)`.

        Example:
            >>> import jax
            >>> ds = MapDataset.range(4).batch(2).to_device(jax.devices()[0])
            >>> [b.tolist() for b in ds]
            [[0, 1], [2, 3]]
        """
        return self.to_iter_dataset().to_device(device, **options)

    def pipe(
        self, fn: Callable[Concatenate[MapDataset[T], P], R], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Returns `fn(self, *args, **kwargs)`, to keep a chain readable.

        Example:
            >>> MapDataset.range(4).pipe(lambda ds, n: ds[:n], 2).__len__()
            2
        """
        return fn(self, *args, **kwargs)

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
