"""What every `IterDataset` is, whatever its ops: a factory of iterators, and iteration.

`IterBase` holds the factory chain that builds a fresh iterator (`_factory`) and the
pipeline seed; it iterates (`iter`, with statistics, a progress bar or a trace) and
shows the pipeline. The fluent ops are grouped by concept on top of it: those that keep
the element type in mixins of their own (`_iter_order`, `_iter_execute`, returning
`Self`), those that change it in `IterDataset` itself. A derived dataset is always a
plain one of the same family (`_construct`), never a user's subclass.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar

from chute_execution import TraceOptions, TraceRecorder, tracing
from chute_samplers import IterNode

from . import _debug
from ._debug import SWITCHES, show_pipeline
from ._describe import describe
from ._element_spec import spec_of
from ._factories import Factory, OpFactory
from ._metrics_meter import metered, metrics_label
from ._pipeline import Stage, render, stage_seed
from ._progress import ProgressIterator
from ._stats import RECORDER, Recorder
from ._subclassing import Lineage
from ._trace_iter import TracedIterator

__all__ = ["IterBase"]

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")


class IterBase(Lineage, abc.ABC, Generic[T]):
    """A stream of elements of type `T` built by a factory chain (see `IterDataset`)."""

    __slots__ = ("_factory", "_seed")
    _factory: Factory
    _seed: int | None

    @abc.abstractmethod
    def _construct(self, factory: Factory, seed: int | None) -> Self:
        """A plain dataset of this family over `factory` (a stage added to this one)."""

    @property
    def _stages(self) -> tuple[Stage, ...]:
        """The pipeline's description, derived from the factory chain that builds it."""
        return self._factory.stages

    def _then(self, op: Callable[..., Any], item: Stage, *args: Any, **kwargs: Any) -> Self:
        return self._construct(OpFactory(self._factory, item, op, *args, **kwargs), self._seed)

    def _stage_seed(self, seed: int | None, op: str) -> int:
        return stage_seed(seed, self._seed, self._stages, op)

    def pipe(self, fn: Callable[Concatenate[Self, P], R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Returns `fn(self, *args, **kwargs)`, to keep a chain readable.

        Example:
            >>> import chute
            >>> chute.MapDataset.range(3).to_iter_dataset().pipe(list)
            [0, 1, 2]
        """
        return fn(self, *args, **kwargs)

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
        with self.iter() as iterator:
            for element in iterator:
                return spec_of(element)
        raise ValueError("element_spec: the dataset has no element to read a spec from.")

    def iter(
        self,
        *,
        stats: bool = False,
        progress: bool = False,
        trace: str | os.PathLike[str] | TraceOptions | None = None,
        metrics: str | bool | None = None,
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
            metrics: meter the iterator for live metrics (`chute.metrics`) under this
                `pipeline` label; True: under the pipeline's own label (the same for
                the same pipeline); False: not at all; None (default): as
                `chute.metrics.serve()` / `enable()` or `$CHUTE_METRICS_PORT` say.
                Times stages as `stats` does.

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
        logged = SWITCHES.stats  # Debug mode (`chute.grain.config`): time and log.
        label = metrics_label(metrics, lambda: render("IterDataset", self._stages))
        timing = stats or logged or options is not None or label is not None
        clocks = Recorder(_debug.LOG_EVERY if logged else None) if timing else None
        if clocks is not None and label is not None:
            metered(clocks, label)
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
        show_pipeline("IterDataset", self._stages)
        return iterator  # type: ignore[no-any-return]

    def __iter__(self) -> IterNode[T]:
        return self.iter()

    def __repr__(self) -> str:
        return render("IterDataset", self._stages)
