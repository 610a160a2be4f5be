"""Grain's stream operations on `IterDataset`: `repeat`, `limit`, `rebatch`, `cache`, `apply`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from chute_samplers import CacheIter, ConcatenateIter, LimitIter, RepeatIter, ZipIter
from chute_transforms import MapWithKeyIter, RebatchIter

from ._apply import apply_transforms
from ._args import check_int, check_optional_int
from ._coerce import as_iter_dataset
from ._element_spec import spec_of
from ._factories import EmptyIterator, Factory, JoinFactory, OpFactory
from ._pipeline import Stage, stage

if TYPE_CHECKING:
    from ._iter_dataset import IterDataset

__all__ = ["GrainIterMixin"]

T = TypeVar("T")


class GrainIterMixin(Generic[T]):
    """The stream operations a Grain user reaches for, each one stage of the chain."""

    __slots__ = ()
    _factory: Factory
    _seed: int | None

    def _grain_then(self, op: Any, item: Stage, *args: Any, **kwargs: Any) -> IterDataset[Any]:
        from ._iter_dataset import IterDataset

        return IterDataset(OpFactory(self._factory, item, op, *args, **kwargs), seed=self._seed)

    def repeat(self, num_epochs: int | None = None) -> IterDataset[T]:
        """Reads the stream again from its start, `num_epochs` times (None: endlessly).

        Every epoch yields the same elements as the first (the stages before the
        repeat are not reseeded, as in Grain); a random stage after the repeat draws
        anew each epoch. Each epoch restores the stream's starting state rather than
        building the iterators again, so a `cache()` before the repeat replays from
        memory. The state is the epoch and the stream's state. An empty stream ends at
        once, even when endless.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(3).to_iter_dataset().filter(lambda x: x != 1)
            >>> list(ds.repeat(2)), list(ds.repeat().limit(5))
            ([0, 2, 0, 2], [0, 2, 0, 2, 0])
        """
        num_epochs = check_optional_int(num_epochs, "num_epochs", "IterDataset.repeat")
        return self._grain_then(RepeatIter, stage("repeat", num_epochs=num_epochs), num_epochs)

    def limit(self, count: int) -> IterDataset[T]:
        """The first `count` elements of the stream (all of them if it has fewer).

        Nothing past the `count`-th element is read. The state is the number yielded
        and the stream's state.

        Example:
            >>> import chute
            >>> list(chute.MapDataset.range(10).to_iter_dataset().limit(3))
            [0, 1, 2]
        """
        count = check_int(count, "count", "IterDataset.limit")
        return self._grain_then(LimitIter, stage("limit", count=count), count)

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
        return self._grain_then(RebatchIter, item, batch_size, drop_remainder)

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
        return self._grain_then(MapWithKeyIter, stage("map_with_key", fn=transform), transform)

    def cache(self) -> IterDataset[T]:
        """Keeps the stream's first pass in memory and replays it when repeated.

        Memory: every element of the stream (its whole first pass) stays in each
        iterator for that iterator's lifetime, so cache only a stream that fits.
        After the first pass, `repeat()` after the cache replays the elements from
        memory without running the stages before it again (as Grain's
        `CacheIterDataset`). The state holds positions only: restored into a new
        iterator, the cache is rebuilt by reading the stream again up to there.

        Example:
            >>> import chute
            >>> calls = []
            >>> ds = chute.MapDataset.range(3).to_iter_dataset().map(lambda x: calls.append(x) or x)
            >>> list(ds.cache().repeat(2)), calls
            ([0, 1, 2, 0, 1, 2], [0, 1, 2])
        """
        return self._grain_then(CacheIter, stage("cache"))

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

    @property
    def element_spec(self) -> Any:
        """The shapes and dtypes of an element: a pytree of `chute.ShapeDtypeStruct`.

        Computed from one element: the first of a new iterator (which runs the
        pipeline, workers included, up to it; then the iterator is closed). After a
        `batch`, the spec is the batch's, with its leading batch dimension. Grain
        spells it `grain.experimental.get_element_spec(ds)`.

        Example:
            >>> import chute
            >>> chute.MapDataset.range(5).to_iter_dataset().batch(2).element_spec
            ShapeDtypeStruct(shape=(2,), dtype=dtype('int64'))
        """
        from ._iter_dataset import IterDataset

        assert isinstance(self, IterDataset)
        with self.iter() as iterator:
            for element in iterator:
                return spec_of(element)
        raise ValueError("element_spec: the dataset has no element to read a spec from.")

    @staticmethod
    def zip(*datasets: Any, strict: bool = False) -> IterDataset[tuple[Any, ...]]:
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
        return _join(datasets, op, "zip", "IterDataset.zip", shown)

    @staticmethod
    def concatenate(datasets: Sequence[Any]) -> IterDataset[Any]:
        """Every element of `datasets[0]`, then of `datasets[1]`, ...

        A `MapDataset` is read in order. The state is which stream is being read and
        each stream's state.

        Example:
            >>> import chute
            >>> a, b = chute.MapDataset.range(2), chute.MapDataset.range(5, 7)
            >>> list(chute.IterDataset.concatenate([a.to_iter_dataset(), b]))
            [0, 1, 5, 6]
        """
        return _join(
            _listed(datasets, "IterDataset.concatenate"),
            ConcatenateIter,
            "concatenate",
            "IterDataset.concatenate",
        )


def _listed(datasets: Any, owner: str) -> Sequence[Any]:
    """`datasets` if it is a list or tuple, else a clear error."""
    if not isinstance(datasets, list | tuple):
        raise TypeError(
            f"{owner} takes a list of datasets, got {type(datasets).__name__}; e.g. "
            f"{owner}([a, b])."
        )
    return datasets


def _join(
    datasets: Sequence[Any],
    op: Any,
    name: str,
    owner: str,
    params: tuple[tuple[str, str], ...] = (),
) -> IterDataset[Any]:
    from ._iter_dataset import IterDataset

    if not datasets:
        raise ValueError(f"{owner} needs at least one dataset.")
    checked = [as_iter_dataset(d) for d in datasets]
    item = Stage(name, params, tuple(d._stages for d in checked))
    return IterDataset(JoinFactory([d._factory for d in checked], op, item))
