"""`IterDataset`: a stream, re-iterable, whose iterators are checkpointable.

The ops are grouped by concept: those that change the element type (elementwise,
structure, combine) here; those that keep it in `OrderOps` (`_iter_order`) and
`ExecuteOps` (`_iter_execute`); iteration itself in `IterBase` (`_iter_base`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self, TypeVar, cast

import numpy as np

from chute_core import CheckpointableIterator
from chute_samplers import ConcatenateIter, WeightSchedule, ZipIter
from chute_transforms import (
    BatchFn,
    BatchIter,
    FilterIter,
    FilterTransform,
    FlatMapIter,
    FlatMapTransform,
    MapIter,
    MapTransform,
    MapWithIndexIter,
    MapWithIndexTransform,
    MapWithKeyIter,
    PackedRow,
    RandomMapIter,
    RandomMapTransform,
    RebatchIter,
    UnbatchIter,
)
from chute_transforms.internal import check_key_kind

from ._apply import apply_transforms
from ._args import check_int
from ._factories import (
    EmptyIterator,
    Factory,
    MixFactory,
    MultiprocessFactory,
    OpFactory,
    SourceFactory,
    batch_step,
    mix_weights,
)
from ._fluent_op import fluent_op
from ._iter_execute import ExecuteOps
from ._iter_inputs import factory_of, interleave_factory, join_factory, listed, source_factory
from ._iter_order import OrderOps
from ._pack_options import PackMethod, pack_arguments, with_bos
from ._pipeline import Stage, stage
from ._subclassing import made, parent_seed, parents_of, subclass_iterator

__all__ = ["IterDataset"]

T = TypeVar("T")
U = TypeVar("U")


class IterDataset(ExecuteOps[T], OrderOps[T]):
    """A stream of elements of type `T`; `iter(ds)` gives a checkpointable iterator.

    Usually made with `MapDataset.to_iter_dataset()`. Each method returns a new
    dataset; iterating builds a fresh chain of iterators, so a dataset can be iterated
    many times, independently. Iterators have `get_state()` (a small JSON dict) and
    `set_state(state)`.

    Example:
        >>> import chute
        >>> ds = chute.MapDataset.range(6).to_iter_dataset().filter(lambda x: x % 2).batch(2)
        >>> it = iter(ds)
        >>> next(it).tolist(), it.get_state() is not None
        ([1, 3], True)
        >>> [b.tolist() for b in it]
        [[5]]
    """

    __slots__ = ()

    _family: ClassVar[type[IterDataset[Any]]]
    """The class the methods build datasets of: `IterDataset` (set below), or a dialect's
    subclass (`chute.grain`'s), whose datasets then stay in that dialect."""

    def __init__(
        self,
        factory: Factory | Callable[[], CheckpointableIterator[T]] | Any = None,
        *,
        seed: int | None = None,
        parents: Any = None,
    ) -> None:
        if parents is not None:  # Grain's keyword: `super().__init__(parents=[...])`.
            if factory is not None:
                raise TypeError("IterDataset: pass the parents once, by position or as parents=.")
            factory = parents
        if type(self).__iter__ is not type(self)._family.__iter__:
            # A subclass written as for Grain: `super().__init__(parents)`, then its own
            # `__iter__` (see `_subclassing`).
            seed = parent_seed(parents_of(self, factory), seed)
            make = subclass_iterator(self)
            factory = SourceFactory(make, stage("source", make=type(self)))
        elif factory is None:
            raise TypeError(
                "IterDataset needs what makes its iterators: a zero-argument callable "
                "returning one (or, in a subclass, its parents); got nothing."
            )
        elif not hasattr(factory, "stages"):  # A plain callable, as in Grain's guides.
            factory = SourceFactory(factory, None)
        self._factory: Factory = cast(Factory, factory)
        self._seed = seed

    def _construct(self, factory: Factory, seed: int | None) -> Self:
        return cast(Self, made(self._family(factory, seed=seed), self))

    def _derive(
        self, op: Callable[..., Any], item: Stage, *args: Any, **kwargs: Any
    ) -> IterDataset[Any]:
        """`_then` for an op that changes the element type (the caller says to what)."""
        factory = OpFactory(self._factory, item, op, *args, **kwargs)
        return made(self._family(factory, seed=self._seed), self)

    @classmethod
    def source(cls, make_iterator: Callable[[], CheckpointableIterator[U]]) -> IterDataset[U]:
        """A stream from a zero-argument callable that returns a new checkpointable iterator.

        Each `iter(ds)` calls it once, so every iteration is independent. Use it for
        sources that are streams, e.g. `functools.partial(chute.ParquetStream, path)`.
        The callable must be picklable to run in worker processes (a class or a
        `functools.partial`, not a lambda).

        Example:
            >>> import functools
            >>> from chute_samplers import SequentialIter
            >>> ds = IterDataset.source(functools.partial(SequentialIter, ["a", "b"]))
            >>> list(ds), list(ds)
            (['a', 'b'], ['a', 'b'])
        """
        return cls._family(source_factory(make_iterator))

    # --- elementwise: one element in, its outputs out ------------------------------

    def map(self, transform: MapTransform[T, U] | Callable[[T], U]) -> IterDataset[U]:
        """`transform(element)` for each element.

        Example:
            >>> import chute
            >>> list(chute.MapDataset.range(3).to_iter_dataset().map(lambda x: x + 10))
            [10, 11, 12]
        """
        return self._derive(MapIter, stage("map", fn=transform), transform)

    def map_with_index(
        self, transform: MapWithIndexTransform[T, U] | Callable[[int, T], U]
    ) -> IterDataset[U]:
        """`transform(index, element)`, the index counting this stream's elements.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(6).to_iter_dataset().filter(lambda x: x % 2)
            >>> list(ds.map_with_index(lambda i, x: (i, x)))
            [(0, 1), (1, 3), (2, 5)]
        """
        return self._derive(MapWithIndexIter, stage("map_with_index", fn=transform), transform)

    def random_map(
        self,
        transform: RandomMapTransform[T, U] | Callable[[T, np.random.Generator], U],
        *,
        seed: int | None = None,
        key: str = "position",
    ) -> IterDataset[U]:
        """`transform(element, rng)`; `rng` is a pure function of (seed, element origin).

        The origin is the position the element was read from (plus its index among a
        flat map's outputs), so draws do not depend on earlier filtering or on workers.
        With `key="record"`: of (seed, the record's key in the source, its pass), the
        draws of `MapDataset.random_map(..., key="record")` for that record.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(3).to_iter_dataset()
            >>> noisy = ds.random_map(lambda x, rng: x + rng.random(), seed=0)
            >>> list(noisy) == list(noisy)
            True
        """
        chosen = self._stage_seed(seed, "random_map")
        check_key_kind(key, "IterDataset.random_map")
        params = {"key": key} if key != "position" else {}
        item = stage("random_map", fn=transform, seed=chosen, **params)
        return self._derive(RandomMapIter, item, transform, chosen, **params)

    def filter(self, transform: FilterTransform[T] | Callable[[T], Any]) -> IterDataset[T]:
        """Keeps the elements for which `transform(element)` is truthy.

        Example:
            >>> import chute
            >>> list(chute.MapDataset.range(5).to_iter_dataset().filter(lambda x: x > 2))
            [3, 4]
        """
        return self._then(FilterIter, stage("filter", fn=transform), transform)

    def flat_map(
        self, transform: FlatMapTransform[T, U] | Callable[[T], Iterable[U]]
    ) -> IterDataset[U]:
        """Yields every element of `transform(element)`, for each element.

        Example:
            >>> import chute
            >>> list(chute.MapDataset.range(3).to_iter_dataset().flat_map(lambda x: [x] * x))
            [1, 2, 2]
        """
        return self._derive(FlatMapIter, stage("flat_map", fn=transform), transform)

    def map_with_key(self, transform: Callable[[int, T], Any]) -> IterDataset[Any]:
        """`transform(key, element)`, `key` the record's index in the source.

        The stream must read a `MapDataset` in order (`to_iter_dataset`), with
        element-wise stages since; see `MapDataset.map_with_key`.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.source(["a", "b"]).shuffle(seed=2).to_iter_dataset()
            >>> sorted(ds.map_with_key(lambda key, x: f"{key}:{x}"))
            ['0:a', '1:b']
        """
        return self._derive(MapWithKeyIter, stage("map_with_key", fn=transform), transform)

    def apply(self, transformations: Any) -> IterDataset[Any]:
        """Applies a transform object, or a list of them in order, each by its op.

        `MapTransform` -> `map`, `RandomMapTransform` -> `random_map` (the pipeline's
        seed), `FilterTransform` -> `filter`, `FlatMapTransform` -> `flat_map`,
        `MapWithIndexTransform` -> `map_with_index`, `BatchTransform` -> `batch`.

        Raises:
            ArgumentTypeError: an object that is none of these (e.g. a plain function).

        Example:
            >>> import chute
            >>> class AddOne(chute.MapTransform):
            ...     def map(self, x): return x + 1
            >>> ds = chute.MapDataset.range(5).to_iter_dataset()
            >>> [b.tolist() for b in ds.apply([AddOne(), chute.BatchTransform(2)])]
            [[1, 2], [3, 4], [5]]
        """
        return apply_transforms(self, transformations, "IterDataset.apply")  # type: ignore[no-any-return]

    select_keys = fluent_op("select_keys")
    """Keeps only `keys` of each dict element, in that order (`chute_transforms.SelectKeysMap`)."""

    # --- structure: elements into batches, rows and back ---------------------------

    def batch(
        self,
        batch_size: int,
        *,
        drop_remainder: bool = False,
        pad: bool = False,
        batch_fn: BatchFn | None = None,
    ) -> IterDataset[Any]:
        """Groups `batch_size` consecutive elements into a batch (see `chute.batch_elements`).

        Example:
            >>> import chute
            >>> [b.tolist() for b in chute.MapDataset.range(5).to_iter_dataset().batch(2)]
            [[0, 1], [2, 3], [4]]
        """
        batch_size = check_int(batch_size, "batch_size", "IterDataset.batch", minimum=1)
        BatchIter(
            EmptyIterator(), batch_size, drop_remainder=drop_remainder, pad=pad, batch_fn=batch_fn
        )
        params: dict[str, Any] = {"batch_size": batch_size, "drop_remainder": drop_remainder}
        if pad:
            params["pad"] = True
        if batch_fn is not None:
            params["batch_fn"] = batch_fn
        item = stage("batch", **params)
        if isinstance(self._factory, MultiprocessFactory) and batch_fn is None:
            step = batch_step(item, batch_size, drop_remainder=drop_remainder, pad=pad)
            fused = self._factory.with_batch(item, step)
            if fused is not None:  # Stacked by the workers, straight into shared memory.
                return made(self._family(fused, seed=self._seed), self)
        return self._derive(
            BatchIter,
            item,
            batch_size,
            drop_remainder=drop_remainder,
            pad=pad,
            batch_fn=batch_fn,
        )

    def unbatch(self) -> IterDataset[Any]:
        """Splits each batch back into its elements.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(3).to_iter_dataset().batch(2).unbatch()
            >>> [int(x) for x in ds]
            [0, 1, 2]
        """
        return self._derive(UnbatchIter, stage("unbatch"))

    def rebatch(self, batch_size: int, drop_remainder: bool = False) -> IterDataset[Any]:
        """Cuts the stream's batches again into batches of `batch_size` rows.

        Batches are pytrees whose leaves share a leading batch dimension (what `batch`
        makes). Rows are sliced out of the input batches and joined only where an
        output spans two inputs, never unbatched one by one. The last batch is short
        unless `drop_remainder`. The state is the stream's state before the input
        batch being cut and the rows of it already used: a restore re-reads one batch.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(7).to_iter_dataset().batch(3)
            >>> [b.tolist() for b in ds.rebatch(2)]
            [[0, 1], [2, 3], [4, 5], [6]]
        """
        batch_size = check_int(batch_size, "batch_size", "IterDataset.rebatch", minimum=1)
        RebatchIter(EmptyIterator(), batch_size, drop_remainder)  # Its checks, now.
        item = stage("rebatch", batch_size=batch_size, drop_remainder=drop_remainder)
        return self._derive(RebatchIter, item, batch_size, drop_remainder)

    def pack(
        self,
        length: int | Mapping[str, int],
        *,
        method: PackMethod = "first_fit",
        num_packing_bins: int | None = None,
        max_sequences_per_bin: int | None = None,
        drop_remainder: bool = False,
        bos_id: int | None = None,
        bos_keys: Sequence[str] | None = None,
    ) -> IterDataset[PackedRow]:
        """Packs dicts of 1-D arrays (token sequences) into rows of `length` tokens.

        Each output row holds, for every key `k`, `k` (padded with 0), `k_segment_ids`
        (1, 2, ... per sequence in the row, 0 for padding) and `k_positions` (0, 1, ...
        within each sequence). The checkpoint state holds no tokens: a restore re-reads
        the few elements still in open rows. The iterator's `padding_fraction` (with
        `tokens_emitted` and `slots_emitted`) says how much of the rows returned so
        far is padding. Packing reads the whole stream, so after `mp_prefetch` it runs
        in this process on the merged stream: the rows are the same for any number of
        workers.

        Args:
            length: the row length; for "first_fit" and "best_fit", a dict may give one
                length per key (and names the keys packed).
            method: "first_fit" (`chute_transforms.FirstFitPackIter`: each sequence in
                the first open row it fits), "best_fit" (`BestFitPackIter`: in the open
                row it fills best; less padding, about the same cost) or "concat_split"
                (`ConcatSplitIter`: concatenates everything and cuts rows of exactly
                `length`, no padding but the last row; sequences may span rows, and
                every key of an element must have the same length). The fit methods
                truncate a sequence longer than the row.
            num_packing_bins: rows open at once, for the fit methods (default 16).
            max_sequences_per_bin: at most this many sequences in a row, for the fit
                methods (None: no limit).
            drop_remainder: for "concat_split", drop the last, partial row.
            bos_id: for "concat_split", a token written over the first token of every
                segment of a row, so that a sequence continued from the row before
                starts with it too (Grain's `REPLACE_FIRST_TOKEN_WITH_BOS`).
            bos_keys: the keys that get `bos_id` (None: every key).

        Raises:
            InvalidArgumentError: an unknown `method`, a value out of range, or an
                option of another method (e.g. `num_packing_bins` with "concat_split").
            ArgumentTypeError: an option of the wrong type.

        Example:
            >>> import chute, numpy as np
            >>> docs = [{"t": np.arange(1, n + 1)} for n in (2, 3, 1, 2)]
            >>> ds = chute.MapDataset.source(docs).to_iter_dataset()
            >>> [row["t"].tolist() for row in ds.pack(4, method="best_fit", num_packing_bins=2)]
            [[1, 2, 3, 1], [1, 2, 1, 2]]
            >>> it = iter(ds.pack(3, method="concat_split"))
            >>> [row["t_segment_ids"].tolist() for row in it], round(it.padding_fraction, 3)
            ([[1, 1, 2], [1, 1, 2], [1, 1, 0]], 0.111)
            >>> ds.pack(4, max_sequences_per_bin=2)
            IterDataset
              source(SequenceSource(type='list', len=4))
              .to_iter_dataset()
              .pack(length=4, method='first_fit', num_packing_bins=16, max_sequences_per_bin=2)
        """
        op, args, kwargs, params = pack_arguments(
            length, method, num_packing_bins, max_sequences_per_bin, drop_remainder
        )
        with_bos(method, bos_id, bos_keys, kwargs, params)
        op(EmptyIterator(), *args, **kwargs)  # The packer's own checks, now.
        item = stage("pack", **params)
        factory = OpFactory(self._factory, item, op, *args, **kwargs)
        return made(self._family(factory, seed=self._seed), self)

    # --- combine: several streams into one -----------------------------------------

    @classmethod
    def mix(
        cls,
        datasets: Sequence[IterDataset[Any]],
        weights: Sequence[float] | WeightSchedule | None = None,
    ) -> IterDataset[Any]:
        """Interleaves streams in proportion to `weights` (counted in output elements).

        Works when the streams are filtered; stops when the stream whose turn it is
        runs out. Weights may change, each stream going on from its own position: a
        `chute.WeightSchedule` gives them per step, and a restore with
        `allow_changes=("weights",)` takes new ones.

        Example:
            >>> import chute
            >>> evens = chute.MapDataset.range(20).to_iter_dataset().filter(lambda x: x % 2 == 0)
            >>> odds = chute.MapDataset.range(20).to_iter_dataset().filter(lambda x: x % 2 == 1)
            >>> list(IterDataset.mix([evens, odds], [3, 1]))[:8]
            [0, 2, 4, 1, 6, 8, 10, 3]
        """
        parts = list(datasets)  # Read once: it may be a generator or a MapDataset.
        factories = [factory_of(d) for d in parts]
        shown = mix_weights(weights, len(factories), "IterDataset.mix")
        item = Stage("mix", (("weights", shown),), tuple(f.stages for f in factories))
        return made(cls._family(MixFactory(factories, weights, item)), *parts)

    @classmethod
    def interleave(
        cls, datasets: Sequence[IterDataset[Any]], cycle_length: int
    ) -> IterDataset[Any]:
        """Reads `cycle_length` streams at a time, one element from each in turn.

        `datasets` may be a list or a `MapDataset` of datasets or of zero-argument
        callables making iterators (e.g. one `functools.partial(ParquetStream, path)`
        per file): the hierarchical shuffle of the guides is
        `IterDataset.interleave(files.map(make_stream), cycle_length).window_shuffle(...)`.
        A `MapDataset` whose files are sharded (`files.shard(i, n).map(...)`) is
        described by its stages, before the interleave's, so the pipeline continues on
        another number of processes (see the resharding guide).

        Example:
            >>> import chute
            >>> parts = [chute.MapDataset.source([c] * 2).to_iter_dataset() for c in "abc"]
            >>> "".join(IterDataset.interleave(parts, cycle_length=2))
            'ababcc'
        """
        factory, parts = interleave_factory(datasets, cycle_length)
        return made(cls._family(factory), *parts)

    @classmethod
    def zip(cls, *datasets: Any, strict: bool = False) -> IterDataset[tuple[Any, ...]]:
        """Tuples of the streams' elements read side by side, until one of them ends.

        With `strict`, streams that end at different lengths raise `ValueError` at the
        end instead (Grain's `ZipIterDataset` default).

        As Grain's `ZipIterDataset`; a static method: `IterDataset.zip(a, b)` (or of a
        list, `IterDataset.zip([a, b])`). A
        `MapDataset` is read in order. The state holds each stream's state.

        Example:
            >>> import chute
            >>> a = chute.MapDataset.range(3).to_iter_dataset()
            >>> b = chute.MapDataset.source(["x", "y"]).to_iter_dataset()
            >>> list(chute.IterDataset.zip(a, b))
            [(0, 'x'), (1, 'y')]
        """
        if len(datasets) == 1 and isinstance(datasets[0], list | tuple):
            datasets = tuple(datasets[0])  # Grain's spelling: ZipIterDataset([a, b]).
        if not isinstance(strict, bool):
            raise TypeError(f"IterDataset.zip: strict must be a bool, got {strict!r}.")
        op = functools.partial(ZipIter, strict=True) if strict else ZipIter
        shown = (("strict", "True"),) if strict else ()
        factory = join_factory(datasets, op, "zip", "IterDataset.zip", shown)
        return made(cls._family(factory), *datasets)

    @classmethod
    def concatenate(cls, datasets: Sequence[Any]) -> IterDataset[Any]:
        """Every element of `datasets[0]`, then of `datasets[1]`, ...

        A `MapDataset` is read in order. The state is which stream is being read and
        each stream's state.

        Example:
            >>> import chute
            >>> a, b = chute.MapDataset.range(2), chute.MapDataset.range(5, 7)
            >>> list(chute.IterDataset.concatenate([a.to_iter_dataset(), b]))
            [0, 1, 5, 6]
        """
        owner = "IterDataset.concatenate"
        parts = listed(datasets, owner)
        factory = join_factory(parts, ConcatenateIter, "concatenate", owner)
        return made(cls._family(factory), *parts)


IterDataset._family = IterDataset
