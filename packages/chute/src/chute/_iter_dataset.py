"""`IterDataset`: a stream, re-iterable, whose iterators are checkpointable."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

import numpy as np

from chute_core import CheckpointableIterator, ErrorBudget
from chute_execution import ThreadPrefetchIter, TraceOptions, TraceRecorder, tracing
from chute_samplers import IterNode, WindowShuffleIter
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
    RandomMapIter,
    RandomMapTransform,
    UnbatchIter,
)
from chute_transforms.internal import check_key_kind

from ._args import check_device_buffers, check_int, check_weights
from ._coerce import as_iter_dataset as _as_iter_dataset
from ._describe import describe
from ._factories import (
    EmptyIterator,
    Factory,
    InterleaveFactory,
    MarkFactory,
    MixFactory,
    MultiprocessFactory,
    OpFactory,
    SkipErrorsFactory,
    SourceFactory,
    batch_step,
)
from ._iter_grain import GrainIterMixin
from ._iter_pack import PackMixin
from ._iter_workers import WorkersMixin
from ._pipeline import (
    Stage,
    check_pipeline_seed,
    render,
    stage,
    stage_seed,
)
from ._progress import ProgressIterator
from ._stats import RECORDER, Recorder
from ._subclassing import parent_seed, parents_of, subclass_iterator
from ._trace_iter import TracedIterator

__all__ = ["IterDataset"]

T = TypeVar("T")
U = TypeVar("U")
P = ParamSpec("P")
R = TypeVar("R")


class IterDataset(WorkersMixin[T], PackMixin, GrainIterMixin[T], Generic[T]):
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

    __slots__ = ("_factory", "_seed")

    def __init__(
        self, factory: Factory | Callable[[], CheckpointableIterator[T]], *, seed: int | None = None
    ) -> None:
        if type(self).__iter__ is not IterDataset.__iter__:
            # A subclass written as for Grain: `super().__init__(parents)`, then its own
            # `__iter__` (see `_subclassing`).
            seed = parent_seed(parents_of(self, factory), seed)
            make = subclass_iterator(self)
            factory = SourceFactory(make, stage("source", make=type(self)))
        elif not hasattr(factory, "stages"):  # A plain callable, as in Grain's guides.
            factory = SourceFactory(factory, None)
        self._factory: Factory = factory
        self._seed = seed

    @property
    def _stages(self) -> tuple[Stage, ...]:
        """The pipeline's description, derived from the factory chain that builds it."""
        return self._factory.stages

    @staticmethod
    def source(make_iterator: Callable[[], CheckpointableIterator[U]]) -> IterDataset[U]:
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
        if not callable(make_iterator) or hasattr(make_iterator, "__next__"):
            raise TypeError(
                "IterDataset.source needs a zero-argument callable that returns a new "
                f"checkpointable iterator (e.g. functools.partial(ParquetStream, path)), got "
                f"{type(make_iterator).__name__}: an iterator can be iterated only once."
            )
        return IterDataset(SourceFactory(make_iterator, stage("source", make=make_iterator)))

    def _then(
        self, op: Callable[..., Any], item: Stage, *args: Any, **kwargs: Any
    ) -> IterDataset[Any]:
        return IterDataset(OpFactory(self._factory, item, op, *args, **kwargs), seed=self._seed)

    def _stage_seed(self, seed: int | None, op: str) -> int:
        return stage_seed(seed, self._seed, self._stages, op)

    def seed(self, seed: int) -> IterDataset[T]:
        """Sets the seed from which later random stages without a `seed` derive theirs.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(4).to_iter_dataset().seed(1).window_shuffle(4)
            >>> sorted(ds)
            [0, 1, 2, 3]
        """
        checked = check_pipeline_seed(seed)
        return IterDataset(MarkFactory(self._factory, stage("seed", seed=checked)), seed=checked)

    def map(self, transform: MapTransform[T, U] | Callable[[T], U]) -> IterDataset[U]:
        """`transform(element)` for each element.

        Example:
            >>> import chute
            >>> list(chute.MapDataset.range(3).to_iter_dataset().map(lambda x: x + 10))
            [10, 11, 12]
        """
        return self._then(MapIter, stage("map", fn=transform), transform)

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
        return self._then(MapWithIndexIter, stage("map_with_index", fn=transform), transform)

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
        return self._then(RandomMapIter, item, transform, chosen, **params)

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
        return self._then(FlatMapIter, stage("flat_map", fn=transform), transform)

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
                return IterDataset(fused, seed=self._seed)
        return self._then(
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
        return self._then(UnbatchIter, stage("unbatch"))

    def window_shuffle(self, window_size: int, seed: int | None = None) -> IterDataset[T]:
        """Shuffles within consecutive windows of `window_size` elements.

        The state holds no elements: a restore re-reads the current window.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(6).to_iter_dataset().window_shuffle(3, seed=0)
            >>> out = list(ds)
            >>> sorted(out[:3]), sorted(out[3:])
            ([0, 1, 2], [3, 4, 5])
        """
        window_size = check_int(window_size, "window_size", "IterDataset.window_shuffle", minimum=1)
        chosen = self._stage_seed(seed, "window_shuffle")
        item = stage("window_shuffle", window_size=window_size, seed=chosen)
        return self._then(WindowShuffleIter, item, window_size, chosen)

    @staticmethod
    def mix(
        datasets: Sequence[IterDataset[Any]], weights: Sequence[float] | None = None
    ) -> IterDataset[Any]:
        """Interleaves streams in proportion to `weights` (counted in output elements).

        Works when the streams are filtered; stops when the stream whose turn it is
        runs out.

        Example:
            >>> import chute
            >>> evens = chute.MapDataset.range(20).to_iter_dataset().filter(lambda x: x % 2 == 0)
            >>> odds = chute.MapDataset.range(20).to_iter_dataset().filter(lambda x: x % 2 == 1)
            >>> list(IterDataset.mix([evens, odds], [3, 1]))[:8]
            [0, 2, 4, 1, 6, 8, 10, 3]
        """
        checked = [_as_iter_dataset(d) for d in datasets]
        check_weights(weights, len(checked), "IterDataset.mix")
        shown = None if weights is None else list(weights)
        item = Stage("mix", (("weights", repr(shown)),), tuple(d._stages for d in checked))
        return IterDataset(MixFactory([d._factory for d in checked], weights, item))

    @staticmethod
    def interleave(datasets: Sequence[IterDataset[Any]], cycle_length: int) -> IterDataset[Any]:
        """Reads `cycle_length` streams at a time, one element from each in turn.

        `datasets` may be a list or a `MapDataset` of datasets or of zero-argument
        callables making iterators (e.g. one `functools.partial(ParquetStream, path)`
        per file): the hierarchical shuffle of the guides is
        `IterDataset.interleave(files.map(make_stream), cycle_length).window_shuffle(...)`.

        Example:
            >>> import chute
            >>> parts = [chute.MapDataset.source([c] * 2).to_iter_dataset() for c in "abc"]
            >>> "".join(IterDataset.interleave(parts, cycle_length=2))
            'ababcc'
        """
        checked = [_as_iter_dataset(d) for d in datasets]
        cycle_length = check_int(cycle_length, "cycle_length", "IterDataset.interleave", minimum=1)
        item = Stage(
            "interleave", (("cycle_length", repr(cycle_length)),), tuple(d._stages for d in checked)
        )
        return IterDataset(InterleaveFactory([d._factory for d in checked], cycle_length, item))

    def skip_errors(
        self, max_failures: int = 0, *, max_failure_rate: float = 0.0
    ) -> IterDataset[T]:
        """Skips elements that fail in the stages before this one, up to a budget.

        An element whose read (a corrupt record, a truncated file) or per-element
        transform (map, random map, filter, flat map, ..., also in worker processes)
        raises is left out instead of ending the iteration, while the failures stay
        within `max_failures + floor(max_failure_rate * elements read)`; the failure
        past that raises `chute.ErrorBudgetExceededError`, naming it and the ones
        skipped before. The skips depend only on the elements: the same with any number
        of workers or threads, on every host. The iterator's `failures` and `skipped`
        say what was left out; the checkpoint state records it, so a restored iterator
        counts on and skips the same elements again. Errors that are not one element's
        (a batch that does not stack, a dead worker) still raise.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(6).to_iter_dataset().map(lambda x: 12 // (x % 3))
            >>> it = iter(ds.skip_errors(max_failures=2))
            >>> list(it), it.failures
            ([12, 6, 12, 6], 2)
        """
        budget = ErrorBudget(max_failures, max_failure_rate)
        params: dict[str, Any] = {"max_failures": max_failures}
        if max_failure_rate:
            params["max_failure_rate"] = max_failure_rate
        item = stage("skip_errors", **params)
        return IterDataset(SkipErrorsFactory(self._factory, budget, item), seed=self._seed)

    def prefetch(self, buffer_size: int) -> IterDataset[T]:
        """Produces up to `buffer_size` elements ahead on a background thread.

        The state counts only elements handed out, so a checkpoint never loses what
        was in the buffer.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(5).to_iter_dataset().prefetch(2)
            >>> list(ds)
            [0, 1, 2, 3, 4]
        """
        buffer_size = check_int(buffer_size, "buffer_size", "IterDataset.prefetch")
        return self._then(
            ThreadPrefetchIter, stage("prefetch", buffer_size=buffer_size), buffer_size
        )

    def to_device(
        self,
        device: Any,
        *,
        cpu_buffer_size: int = 2,
        device_buffer_size: int = 2,
        lockstep: bool | None = None,
    ) -> IterDataset[Any]:
        """Batches as `jax.Array`s on `device`, prepared and transferred ahead of use.

        `device` is a `jax.Device`, a `jax.sharding.Sharding` or a pytree of shardings.
        With a sharding over several JAX processes, each process's batches are its local
        rows (see `MapDataset.batch(..., sharding=...)`) and come out as global arrays.
        Checkpoints count only batches handed out (see `chute_device.DevicePutIter`).
        This must be the last stage; jax is imported only when it is used.

        Example:
            >>> import chute, jax
            >>> ds = chute.MapDataset.range(6).batch(3).to_iter_dataset()
            >>> [b.tolist() for b in ds.to_device(jax.devices()[0])]
            [[0, 1, 2], [3, 4, 5]]
        """
        from ._device import device_put_op

        cpu_buffer_size, device_buffer_size = check_device_buffers(
            cpu_buffer_size, device_buffer_size
        )
        item = stage("to_device", device=device)
        return self._then(
            device_put_op,
            item,
            device,
            cpu_buffer_size=cpu_buffer_size,
            device_buffer_size=device_buffer_size,
            lockstep=lockstep,
        )

    def pipe(
        self, fn: Callable[Concatenate[IterDataset[T], P], R], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Returns `fn(self, *args, **kwargs)`, to keep a chain readable."""
        return fn(self, *args, **kwargs)

    def iter(
        self,
        *,
        stats: bool = False,
        progress: bool = False,
        trace: str | os.PathLike[str] | TraceOptions | None = None,
    ) -> IterNode[T]:
        """A new iterator; optionally with per-stage statistics, a progress bar, a trace.

        Args:
            stats: time each stage; `iterator.stats()` then returns, per stage, the
                elements, its own time (not its inputs'), throughput and share of wall
                time, and names the bottleneck. Costs about 0.2 us per stage and element.
            progress: show a tqdm progress bar of elements produced.
            trace: write a Chrome / Perfetto trace of the iteration to this JSON file
                (or as `chute.TraceOptions(path, max_events=...)` say): a track per
                process and thread, each `next()` with its stages' own times, the
                worker processes' chunks with their stages, the waits for them and the
                reads of their results (see the guide "Tracing where time goes"). The
                file is written at the end of the stream, when `next()` raises, at
                `close()` and garbage collection, and by `iterator.write_trace()`.
                Times stages as `stats` does (and `stats()` works), plus a few us per
                `next()` and per chunk.

        Raises:
            TypeError: `trace` is not a path or `TraceOptions`.
            FileNotFoundError: the folder of the `trace` file does not exist.
            IsADirectoryError: `trace` is a folder.

        Example:
            >>> import chute
            >>> it = chute.MapDataset.range(10).to_iter_dataset().iter(stats=True)
            >>> _ = list(it)
            >>> it.stats().stages[0].elements
            10
        """
        options = None
        if trace is not None:
            options = trace if isinstance(trace, TraceOptions) else TraceOptions(trace)
        clocks = Recorder() if stats or options is not None else None
        tracer = None if options is None else TraceRecorder(options.max_events)
        token = RECORDER.set(clocks)
        try:
            with tracing(tracer):
                iterator: Any = self._factory()
        finally:
            RECORDER.reset(token)
        if tracer is not None and clocks is not None and options is not None:
            # Resolved now: a later write (e.g. at garbage collection) goes to the same file.
            iterator = TracedIterator(iterator, clocks, tracer, Path(options.path).absolute())
        if progress:
            iterator = ProgressIterator(iterator)
        describe(iterator, "IterDataset", self._stages)
        return iterator  # type: ignore[no-any-return]

    def __iter__(self) -> IterNode[T]:
        return self.iter()

    def __repr__(self) -> str:
        return render("IterDataset", self._stages)
