"""The one worker planner: which part of a pipeline runs in workers, and how.

`IterDataset.mp_prefetch` and `DataLoader` both describe their pipeline to
`plan_workers` the same way (a random-access dataset read in order, then stream steps),
and both run what it returns. The planner decides:

- the split: the leading elementwise steps run in the workers, on chunks of positions
  (`ChunkPlan`); the rest runs in this process on the merged stream;
- batching in the workers: a batch right after the split (without a custom
  `batch_fn`) is stacked by the workers straight into shared memory, and this process
  only slices batches out (`MultiprocessBatchIter`);
- the chunk size, when the caller leaves it to chute (`default_chunk_size`): whole
  batches when the workers batch;
- where an error budget (`skip_errors`) applies: to the steps before it, in the workers
  too.

The output and the states never depend on the plan's worker count. A later backend
(e.g. a cluster) runs the same `WorkerPlan`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from chute_core import ErrorBudget, RandomAccessDataSource
from chute_transforms import SkipErrorsIter

from ._chunk_plan import ChunkPlan, StreamOp
from ._mp_batch import MultiprocessBatchIter, chunk_iterator
from ._mp_options import MultiprocessingOptions
from ._ray_options import RayOptions
from ._tuning_memory import TuningMemory

__all__ = [
    "BatchSpec",
    "PlanStep",
    "WorkerPlan",
    "batch_aligned_chunk_size",
    "default_chunk_size",
    "plan_workers",
]


@dataclasses.dataclass(frozen=True)
class BatchSpec:
    """A batch the workers can build: `batch_size` rows, stacked by `batch_elements`.

    Example:
        >>> BatchSpec(32, drop_remainder=True)
        BatchSpec(batch_size=32, drop_remainder=True, pad=False)
    """

    batch_size: int
    drop_remainder: bool = False
    pad: bool = False


@dataclasses.dataclass(frozen=True)
class PlanStep:
    """One stream step after the reader, as the planner sees it.

    Attributes:
        op: builds the step's iterator, as `op(parent, *args, **kwargs)`.
        args: positional arguments of `op`.
        kwargs: keyword arguments of `op`.
        name: what statistics and messages call the step.
        elementwise: its output for an element depends on that element alone (and its
            origin): it may run in a worker on any chunk.
        batch: set if the step is a batch the workers may stack instead.
        budget: set if the step is a `skip_errors` marker (`op` unused): the steps
            before it skip failing elements within this budget.

    Example:
        >>> from chute_transforms import MapIter
        >>> PlanStep(MapIter, (abs,), name="map(abs)", elementwise=True).name
        'map(abs)'
    """

    op: Callable[..., Any] | None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    name: str = ""
    elementwise: bool = False
    batch: BatchSpec | None = None
    budget: ErrorBudget | None = None

    def apply(self, parent: Any) -> Any:
        """This step's iterator over `parent`."""
        assert self.op is not None
        return self.op(parent, *self.args, **self.kwargs)

    def stream_op(self) -> StreamOp:
        """The step as a `ChunkPlan` op."""
        assert self.op is not None
        return (self.op, self.args, dict(self.kwargs))


def batch_aligned_chunk_size(batch_size: int, length: int) -> int:
    """A chunk size that is a multiple of `batch_size`, for workers that batch.

    About 64 elements, at most 1/16 of the dataset, and at least one batch.

    Example:
        >>> batch_aligned_chunk_size(128, 4096), batch_aligned_chunk_size(8, 10_000)
        (128, 64)
    """
    per_chunk = max(1, 64 // batch_size)
    cap = max(1, -(-length // 16))
    return batch_size * max(1, min(per_chunk, cap // batch_size))


def default_chunk_size(
    length: int, *, elements_are_batches: bool = False, batch: BatchSpec | None = None
) -> int:
    """The chunk size chute chooses: it never depends on the worker count.

    64 elements, or 1 when the elements are whole batches, and at most 1/16 of a short
    dataset so that several workers share it; with `batch` (the workers batch), a
    whole number of batches (`batch_aligned_chunk_size`).

    Example:
        >>> default_chunk_size(10_000), default_chunk_size(100), default_chunk_size(
        ...     10_000, elements_are_batches=True)
        (64, 7, 1)
    """
    if batch is not None:
        return batch_aligned_chunk_size(batch.batch_size, length)
    size = 1 if elements_are_batches else 64
    if length:
        size = min(size, max(1, -(-length // 16)))
    return size


@dataclasses.dataclass(frozen=True)
class WorkerPlan:
    """What `plan_workers` decided; `build()` makes the iterator that runs it.

    Attributes:
        chunks: the part the workers run, chunk by chunk.
        options: the workers: local processes, or a Ray cluster's (`RayOptions`).
        tail: the steps that run in this process after the workers' part; a first
            step with `batch` is stacked by the workers instead.
        skip: an error budget, how many steps of `tail` it covers, and its name.
        init_fn: called as `fn(worker_index, num_workers)` in each worker.
        caller: how messages name what runs the workers, e.g. `mp_prefetch`.
        tuning_memory: where the autotuner of the last iterator `build()` made settled:
            the next one starts there (the workers it left parked are taken over).

    Example:
        >>> from chute_transforms import MapIter
        >>> negate = PlanStep(MapIter, (abs,), name="map(abs)", elementwise=True)
        >>> plan = plan_workers(range(-3, 3), [negate], MultiprocessingOptions(0))
        >>> plan.chunks.names, plan.tail, list(plan.build())
        (('to_iter_dataset()', 'map(abs)'), (), [3, 2, 1, 0, 1, 2])
    """

    chunks: ChunkPlan
    options: MultiprocessingOptions | RayOptions
    tail: tuple[PlanStep, ...] = ()
    skip: tuple[ErrorBudget, int, str] | None = None
    init_fn: Callable[[int, int], Any] | None = None
    caller: str = "mp_prefetch"
    tuning_memory: TuningMemory = dataclasses.field(
        default_factory=TuningMemory, compare=False, repr=False
    )

    @property
    def workers_batch(self) -> bool:
        """Whether the workers stack batches (the first tail step's)."""
        return bool(self.tail) and self.tail[0].batch is not None

    def build(
        self,
        wrap: Callable[[Any, str], Any] | None = None,
        on_workers: Callable[[Any], None] | None = None,
    ) -> Any:
        """A fresh iterator running the plan from the start of the stream.

        `wrap(iterator, name)` is applied to each stage's iterator (e.g. to time it);
        `on_workers(iterator)` is told the iterator that runs the workers, right after
        it was wrapped.
        """
        wrap = wrap or _same
        if self.skip is None:
            iterator, consumed = self._head(wrap, on_workers)
            return _stack(iterator, self.tail[consumed:], wrap)
        budget, at, name = self.skip
        parts: dict[str, int] = {}

        def inner() -> Any:
            iterator, consumed = self._head(wrap, on_workers)
            parts["consumed"] = consumed
            return _stack(iterator, self.tail[consumed : max(at, consumed)], wrap)

        wrapped = wrap(SkipErrorsIter(inner, budget), name)
        return _stack(wrapped, self.tail[max(at, parts["consumed"]) :], wrap)

    def _head(
        self, wrap: Callable[[Any, str], Any], on_workers: Callable[[Any], None] | None
    ) -> tuple[Any, int]:
        iterator: Any
        if self.workers_batch:
            spec = self.tail[0].batch
            assert spec is not None
            iterator = MultiprocessBatchIter(
                self.chunks,
                self.options,
                spec.batch_size,
                drop_remainder=spec.drop_remainder,
                pad=spec.pad,
                worker_init_fn=self.init_fn,
                caller=self.caller,
                tuning_memory=self.tuning_memory,
            )
        else:
            memory = self.tuning_memory
            iterator = chunk_iterator(self.chunks, self.options, self.init_fn, self.caller, memory)
        workers = iterator
        kind = "ray_prefetch" if isinstance(self.options, RayOptions) else "mp_prefetch"
        iterator = wrap(iterator, f"{kind}(num_workers={self.options.num_workers})")
        if on_workers is not None:
            on_workers(workers)
        if self.workers_batch:
            iterator = wrap(iterator, self.tail[0].name)  # Its work ran in the workers.
        return iterator, int(self.workers_batch)


def _same(iterator: Any, name: str) -> Any:
    return iterator


def _stack(iterator: Any, steps: Sequence[PlanStep], wrap: Callable[[Any, str], Any]) -> Any:
    for step in steps:
        iterator = wrap(step.apply(iterator), step.name)
    return iterator


def plan_workers(
    dataset: RandomAccessDataSource[Any],
    steps: Sequence[PlanStep],
    options: MultiprocessingOptions | RayOptions,
    *,
    chunk_size: int | None = None,
    elements_are_batches: bool = False,
    read_threads: int = 0,
    init_fn: Callable[[int, int], Any] | None = None,
    caller: str = "mp_prefetch",
    reader_name: str = "to_iter_dataset()",
) -> WorkerPlan:
    """Plans `dataset` read in order, then `steps`, on `options.num_workers` workers.

    Args:
        dataset: the random-access base, read in order.
        steps: the stream steps over it, in order (see `PlanStep`).
        options: the workers: local processes, or a Ray cluster's (`RayOptions`).
        chunk_size: positions per unit of work; None: `default_chunk_size`, and units
            adapted to the measured cost when the workers do not batch (see
            `SpanSchedule`).
        elements_are_batches: the dataset's elements are whole batches (for the default
            chunk size).
        read_threads: threads that read each chunk's records.
        init_fn: called as `fn(worker_index, num_workers)` in each worker.
        caller: how messages name what runs the workers.
        reader_name: what statistics call the reader.

    Raises:
        ValueError: two error budgets (`skip_errors`) among `steps`.

    Example:
        >>> from chute_transforms import BatchIter, MapIter
        >>> double = PlanStep(MapIter, (lambda x: 2 * x,), name="map", elementwise=True)
        >>> batch = PlanStep(BatchIter, (2,), name="batch", batch=BatchSpec(2))
        >>> plan = plan_workers(range(5), [double, batch], MultiprocessingOptions(0))
        >>> plan.chunks.chunk_size, plan.workers_batch
        (2, True)
        >>> [b.tolist() for b in plan.build()]
        [[0, 2], [4, 6], [8]]
    """
    budgets = [number for number, step in enumerate(steps) if step.budget is not None]
    if len(budgets) > 1:
        raise ValueError(
            f"{caller}: the pipeline before it has skip_errors twice; give one budget "
            "(the last skip_errors covers every stage before it)."
        )
    at = budgets[0] if budgets else None
    ops = [step for step in steps if step.budget is None]
    split = 0
    while split < len(ops) and ops[split].elementwise:
        split += 1
    tail = ops[split:]
    batch = tail[0].batch if tail else None  # Set if the workers batch.
    adaptive = chunk_size is None and batch is None  # Stacked batches keep their grid.
    if chunk_size is None:
        chunk_size = default_chunk_size(
            len(dataset), elements_are_batches=elements_are_batches, batch=batch
        )
    names = (reader_name, *(step.name for step in ops[:split]))
    covered = None if at is None else min(at, split)
    chunks = ChunkPlan(
        dataset,
        [step.stream_op() for step in ops[:split]],
        chunk_size,
        read_threads,
        covered=covered,
        names=names,
        adaptive=adaptive,
    )
    skip = None
    budget = None if at is None else steps[at].budget
    if at is not None and budget is not None:
        skip = (budget, max(0, at - split), steps[at].name)
    return WorkerPlan(chunks, options, tuple(tail), skip, init_fn, caller)
