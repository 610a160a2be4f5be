"""`chute.grain`'s `MapDataset` and `IterDataset`: chute's, with Grain's behaviours.

They differ from chute's only where chute keeps another behaviour on purpose.

Two behaviours of chute's own datasets differ from Grain 0.2.18's, and Grain code may
count on Grain's:

- `MapDataset.mix`: Grain's integer proportions, length and placement (see `_mix`);
  chute's mix keeps every component within one element of its share and ends exactly
  where a component runs out.
- `batch`: Grain stacks string and bytes leaves into NumPy arrays (`array(['a', 'b'])`);
  chute keeps them as lists, because a NumPy string array pads every row to the longest
  (4 bytes a character) and drops trailing NUL characters and bytes.

These classes are subclasses of chute's, and their methods keep returning them, so a
pipeline started from `grain.MapDataset` behaves as in Grain all along. Every chute
dataset is also an instance of them (`isinstance(chute_ds, grain.MapDataset)`), as
Grain code checks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np

from chute_core import DROPPED, InvalidArgumentError
from chute_samplers import EpochArray, MapNode, PositionArray, fetch
from chute_transforms import FilterIter, FilterMap

from .. import _iter_dataset, _map_dataset
from .._element_spec import ShapeDtypeStruct
from .._pipeline import Stage, stage
from .._subclassing import made
from ._mix import GrainMixMap
from ._options import ExecutionTrackingMode, filter_thresholds, options_of
from ._set_slice import SlicedInPlace
from ._set_slice import set_slice as slice_in_place

__all__ = ["IterDataset", "MapDataset", "strings_as_arrays"]

T = TypeVar("T")


def strings_as_arrays(batch: Any) -> Any:
    """A batch with each list of strings (or of bytes) as a NumPy array, as Grain stacks.

    chute's batching leaves string leaves as lists; Grain's gives NumPy arrays.

    Example:
        >>> strings_as_arrays({"t": ["x", "yy"], "n": np.array([1, 2])})["t"]
        array(['x', 'yy'], dtype='<U2')
        >>> strings_as_arrays([["a", "b"], ["dd", "ee"]])
        [array(['a', 'b'], dtype='<U1'), array(['dd', 'ee'], dtype='<U2')]
    """
    if isinstance(batch, list):
        if batch and (
            all(isinstance(x, str) for x in batch) or all(isinstance(x, bytes) for x in batch)
        ):
            return np.asarray(batch)
        return [strings_as_arrays(x) for x in batch]
    if isinstance(batch, dict):
        return {key: strings_as_arrays(value) for key, value in batch.items()}
    if isinstance(batch, tuple):
        values = [strings_as_arrays(x) for x in batch]
        return type(batch)(*values) if hasattr(batch, "_fields") else tuple(values)
    return batch


def _rows_may_vary(stages: Sequence[Stage]) -> bool:
    """Whether the last batching stage (before Grain's string stage) may end short."""
    for item in reversed(stages):
        if item.op == "map" and dict(item.params).get("fn") == strings_as_arrays.__name__:
            continue
        if item.op == "to_iter_dataset":
            continue
        params = dict(item.params)
        return item.op == "batch" and params.get("drop_remainder") == "False"
    return False


def _without_rows(spec: Any) -> Any:
    """`spec` with the leading dimension of every array leaf unknown (None)."""
    if isinstance(spec, ShapeDtypeStruct):
        return ShapeDtypeStruct((None, *spec.shape[1:]), spec.dtype) if spec.shape else spec  # type: ignore[arg-type]
    if isinstance(spec, dict):
        return {key: _without_rows(value) for key, value in spec.items()}
    if isinstance(spec, tuple) and hasattr(spec, "_fields"):
        return type(spec)(*(_without_rows(value) for value in spec))
    if isinstance(spec, list | tuple):
        return type(spec)(_without_rows(value) for value in spec)
    return spec


class _GrainDialect:
    """What both of Grain's dataset classes add to chute's: string batches, `isinstance`."""

    __slots__ = ()

    _chute: ClassVar[type]
    """The chute class this one is Grain's spelling of (set by each dialect class)."""

    def batch(self, batch_size: int, **options: Any) -> Any:
        """`batch` as chute has it, with strings stacked as Grain stacks them (no `batch_fn`)."""
        batched = super().batch(batch_size, **options)  # type: ignore[misc]
        return batched if options.get("batch_fn") is not None else batched.map(strings_as_arrays)

    @property
    def element_spec(self) -> Any:
        """`element_spec` with Grain's batch dimension: None where the last batch may be short.

        After `batch(..., drop_remainder=False)` the leading dimension of each array
        leaf is None, as in Grain; with `drop_remainder=True` it is the batch size.

        Example:
            >>> import chute.grain as grain
            >>> grain.MapDataset.range(5).batch(2).element_spec
            ShapeDtypeStruct(shape=(None,), dtype=dtype('int64'))
        """
        spec = super().element_spec  # type: ignore[misc]
        return _without_rows(spec) if _rows_may_vary(self._stages) else spec  # type: ignore[attr-defined]

    def enable_shared_memory_output(self) -> None:
        """Grain's switch for batches in shared memory: chute's workers always do that.

        Worker processes put array outputs in shared memory and the consumer maps them
        without a copy (`mp_prefetch`); there is nothing to turn on, and, as in Grain,
        nothing is returned.
        """

    @classmethod
    def __subclasshook__(cls, candidate: type) -> Any:
        # Every chute dataset is one of Grain's (a user's subclass of it is only itself).
        if "_chute" in cls.__dict__ and cls._chute in candidate.__mro__:
            return True
        return NotImplemented


class IterDataset(_GrainDialect, _iter_dataset.IterDataset[T]):
    """Grain's `IterDataset`: chute's, whose batches hold strings as NumPy arrays.

    Example:
        >>> import chute.grain as grain
        >>> ds = grain.MapDataset.source(["a", "bb", "c"]).to_iter_dataset().batch(2)
        >>> [b.tolist() for b in ds]
        [['a', 'bb'], ['c']]
        >>> type(next(iter(ds)))
        <class 'numpy.ndarray'>
    """

    __slots__ = ("_grain_options", "_grain_thresholds")  # `DatasetOptions`, a filter's.
    _grain_options: Any
    _grain_thresholds: Any

    def limit(self, count: int) -> Any:
        """The first `count` elements; as in Grain, `count` must be positive."""
        if isinstance(count, int) and not isinstance(count, bool) and count <= 0:
            raise InvalidArgumentError(f"IterDataset.limit: count must be > 0, got {count}.")
        return super().limit(count)

    def filter(self, transform: Any) -> Any:
        """`filter`, with the thresholds of the pipeline's `DatasetOptions` (Grain's)."""
        thresholds = filter_thresholds(self)
        result = self._then(FilterIter, stage("filter", fn=transform), transform, thresholds)
        result._grain_thresholds = thresholds
        return result

    def iter(self, *, stats: bool = False, **options: Any) -> Any:
        """`iter`, timing every stage when the pipeline's options ask (`STAGE_TIMING`)."""
        chosen = options_of(self)
        timing = chosen is not None and (
            chosen.execution_tracking_mode is ExecutionTrackingMode.STAGE_TIMING
        )
        return super().iter(stats=stats or timing, **options)

    _chute = _iter_dataset.IterDataset


class MapDataset(_GrainDialect, _map_dataset.MapDataset[T]):
    """Grain's `MapDataset`: chute's, with Grain's `mix` and strings batched as arrays.

    Example:
        >>> import chute.grain as grain
        >>> len(grain.MapDataset.mix([range(4708), range(60000)], weights=[0.7, 0.3]))
        6728
        >>> grain.MapDataset.source([{"t": "x"}, {"t": "yy"}]).batch(2)[0]
        {'t': array(['x', 'yy'], dtype='<U2')}
    """

    __slots__ = ("_grain_thresholds",)  # A filter's `FilterThresholds`.
    _grain_thresholds: Any

    @classmethod
    def mix(
        cls, datasets: Sequence[Any], weights: Sequence[float] | None = None
    ) -> _map_dataset.MapDataset[Any]:
        """Mixes `datasets` as Grain does: its proportions, length and order (see `_mix`)."""
        checked = [cls.source(d) for d in datasets]
        node = GrainMixMap([d._node for d in checked], weights)
        shown = None if weights is None else list(weights)
        params = (("weights", repr(shown)), ("placement", "'grain'"))
        item = Stage("mix", params, tuple(d._stages for d in checked))
        return made(cls._family(node, stages=(item,)), *checked)

    def __getitem__(self, index: Any) -> Any:
        """An element; as in Grain, an index past the end reads a later epoch.

        Example:
            >>> import chute.grain as grain
            >>> ds = grain.MapDataset.range(3)
            >>> [ds[i] for i in range(7)]
            [0, 1, 2, 0, 1, 2, 0]
        """
        if isinstance(index, slice) or not isinstance(index, int | np.integer):
            return super().__getitem__(index)
        length = len(self)
        if 0 < length <= index:
            epoch, position = divmod(int(index), length)
            (element,) = fetch(
                self._node, np.array([position], np.int64), np.array([epoch], np.uint64)
            )
            return element
        return super().__getitem__(index)

    def limit(self, count: int) -> Any:
        """The first `count` elements; as in Grain, `count` must be positive."""
        if isinstance(count, int) and not isinstance(count, bool) and count <= 0:
            raise InvalidArgumentError(f"MapDataset.limit: count must be > 0, got {count}.")
        return super().limit(count)

    def filter(self, transform: Any) -> Any:
        """`filter`, with the thresholds of the pipeline's `DatasetOptions` (Grain's)."""
        thresholds = filter_thresholds(self)
        node = FilterMap(self._node, transform, thresholds)
        result = self._then(node, stage("filter", fn=transform))
        result._grain_thresholds = thresholds
        return result

    @property
    def set_slice(self) -> Callable[..., None]:
        """`set_slice(sl, sequential_slice=False)`: a source dataset cut down in place.

        Only source datasets (`MapDataset.source`, `range`) have it, as in Grain (on
        others it is an `AttributeError`, so `hasattr` tells them apart). With
        `sequential_slice=True`, `sl` is `slice(worker_index, None, worker_count)` and
        the dataset becomes that worker's contiguous part, split as Grain splits;
        otherwise any slice of the original positions. Datasets built from this one
        afterwards read the slice; those built before keep their data.

        Example:
            >>> import chute.grain as grain
            >>> ds = grain.MapDataset.range(10)
            >>> ds.set_slice(slice(1, None, 3), sequential_slice=True)
            >>> list(ds), list(ds.map(lambda x: -x))
            ([4, 5, 6], [-4, -5, -6])
        """
        node, stages = self._node, self._stages
        if isinstance(node, SlicedInPlace):
            original, stages = node.original, stages[:-1]
        elif [item.op for item in stages] == ["source"]:
            original = node
        else:
            raise AttributeError(
                "set_slice: only a source dataset (MapDataset.source or MapDataset.range) "
                f"is sliced in place, as in Grain; this one ends with {stages[-1].op!r}: slice "
                "its source, or use ds.slice(...) for a new dataset."
            )
        plain = self._family(original, seed=self._seed, stages=stages)

        def set_slice(sl: slice, sequential_slice: bool = False) -> None:
            if not isinstance(sequential_slice, bool):
                raise TypeError(
                    f"set_slice: sequential_slice must be a bool, got {sequential_slice!r}."
                )
            slice_in_place(self, original, plain, sl, sequential_slice)

        return set_slice

    def to_iter_dataset(
        self, read_options: Any = None, *, allow_nones: bool = False
    ) -> _iter_dataset.IterDataset[T]:
        """A stream of the elements in order; with `allow_nones`, None where one was dropped.

        As in Grain: positions a `filter` dropped are skipped, or, with
        `allow_nones=True`, read as None (so positions and stream elements stay aligned).

        Example:
            >>> import chute.grain as grain
            >>> ds = grain.MapDataset.range(5).filter(lambda x: x % 2 == 0)
            >>> list(ds.to_iter_dataset()), list(ds.to_iter_dataset(allow_nones=True))
            ([0, 2, 4], [0, None, 2, None, 4])
        """
        if not isinstance(allow_nones, bool):
            raise TypeError(f"to_iter_dataset: allow_nones must be a bool, got {allow_nones!r}.")
        source = self
        if allow_nones:  # A map over every position, dropped ones included.
            source = self._then(_DroppedAsNone(self._node), stage("map", fn=_DroppedAsNone))
        return super(MapDataset, source).to_iter_dataset(read_options)

    _chute = _map_dataset.MapDataset


class _DroppedAsNone(MapNode[Any]):
    """`parent` with None at the positions a filter dropped (Grain's `allow_nones`)."""

    def __init__(self, parent: Any) -> None:
        self._parent = parent

    def __len__(self) -> int:
        return len(self._parent)

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[Any]:
        return [None if x is DROPPED else x for x in fetch(self._parent, positions, epochs)]


IterDataset._family = IterDataset
MapDataset._family = MapDataset
MapDataset._iter_family = IterDataset
