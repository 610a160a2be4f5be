"""The factories behind `IterDataset`: each builds a fresh iterator chain, and says its stages.

A dataset is its last factory. Each factory holds its parent(s) and its own stage (the
`chute_core.PipelineStage` that `print`, checkpoints and the planner read), so the
pipeline's description is derived from the one chain that also builds it: there is no
second copy to keep in step. Worker processes receive what the planner cuts from the
chain, so factories hold classes, functions and arguments, never lambdas of ours.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from chute_core import CheckpointableIterator, ErrorBudget, RandomAccessDataSource
from chute_execution import (
    BatchSpec,
    MultiprocessingOptions,
    PlanStep,
    PrefetchReadIter,
    RayOptions,
    ReadOptions,
    WorkerPlan,
    plan_workers,
    sharing_reads,
)
from chute_samplers import InterleaveIter, MixIter, SequentialIter, WeightSchedule
from chute_transforms import BatchIter, SkipErrorsIter

from ._args import check_weights
from ._pipeline import Stage
from ._stats import RECORDER, timed

__all__ = [
    "EmptyIterator",
    "Factory",
    "InterleaveFactory",
    "JoinFactory",
    "MarkFactory",
    "MixFactory",
    "MultiprocessFactory",
    "OpFactory",
    "SequentialFactory",
    "SkipErrorsFactory",
    "SourceFactory",
    "batch_step",
    "mix_weights",
    "plan_request",
]


class Factory(Protocol):
    """Builds a fresh iterator at the start of the stream; `stages` describes it."""

    @property
    def stages(self) -> tuple[Stage, ...]: ...

    def __call__(self) -> CheckpointableIterator[Any]: ...


class SourceFactory:
    """A user's zero-argument callable that makes the stream (`IterDataset.source`)."""

    def __init__(
        self, make: Callable[[], CheckpointableIterator[Any]], stage: Stage | None
    ) -> None:
        self.make, self.stage = make, stage  # No stage: `IterDataset(make)`, undescribed.

    @property
    def stages(self) -> tuple[Stage, ...]:
        return () if self.stage is None else (self.stage,)

    def __call__(self) -> CheckpointableIterator[Any]:
        return self.make()


class SequentialFactory:
    """Reads a random-access dataset in order (threads optional): `to_iter_dataset`."""

    def __init__(
        self,
        node: RandomAccessDataSource[Any],
        read_options: ReadOptions | None,
        stages: tuple[Stage, ...],
    ) -> None:
        self.node, self.read_options = node, read_options
        self._stages = stages  # The MapDataset's, then to_iter_dataset's.

    @property
    def stages(self) -> tuple[Stage, ...]:
        return self._stages

    def __call__(self) -> CheckpointableIterator[Any]:
        if self.read_options is None:
            iterator: Any = SequentialIter(self.node)
        else:
            iterator = PrefetchReadIter(self.node, self.read_options)
        return timed(iterator, "to_iter_dataset()")  # type: ignore[no-any-return]

    def elements_are_batches(self) -> bool:
        """Whether the positions read are whole batches (a batch before the stream)."""
        return any(item.traits.groups for item in self._stages[:-1])


class _Child:
    """A factory over one parent: its stages are the parent's plus its own."""

    parent: Factory
    stage: Stage

    @property
    def stages(self) -> tuple[Stage, ...]:
        return (*self.parent.stages, self.stage)


class OpFactory(_Child):
    """Builds `op(parent(), *args, **kwargs)`: one stream op over a fresh parent."""

    def __init__(
        self, parent: Factory, stage: Stage, op: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> None:
        self.parent, self.stage = parent, stage
        self.op, self.args, self.kwargs = op, args, kwargs
        self.name = stage.line()

    def __call__(self) -> CheckpointableIterator[Any]:
        return timed(self.op(self.parent(), *self.args, **self.kwargs), self.name)  # type: ignore[no-any-return]

    def step(self) -> PlanStep:
        """This op as the worker planner sees it."""
        return PlanStep(
            self.op, self.args, self.kwargs, self.name, elementwise=self.stage.traits.elementwise
        )


class MarkFactory(_Child):
    """A stage that changes no element and builds nothing (e.g. `seed`)."""

    def __init__(self, parent: Factory, stage: Stage) -> None:
        self.parent, self.stage = parent, stage

    def __call__(self) -> CheckpointableIterator[Any]:
        return self.parent()


class SkipErrorsFactory(_Child):
    """`SkipErrorsIter(parent, budget)`: the parent's stages skip failing elements."""

    def __init__(self, parent: Factory, budget: ErrorBudget, stage: Stage) -> None:
        self.parent, self.budget, self.stage = parent, budget, stage
        self.name = stage.line()

    def __call__(self) -> CheckpointableIterator[Any]:
        return timed(SkipErrorsIter(self.parent, self.budget), self.name)  # type: ignore[no-any-return]

    def step(self) -> PlanStep:
        """This budget as the worker planner sees it (a marker)."""
        return PlanStep(None, name=self.name, budget=self.budget)


class MultiprocessFactory:
    """The part the planner gives the workers, then the rest in this process.

    Holds the planning request (`plan_workers` with its arguments), so that a
    `.batch()` right after can be planned again with the workers batching.
    """

    def __init__(
        self,
        parent: Factory,
        request: functools.partial[WorkerPlan],
        stage: Callable[[int], Stage],
        then_batch: Stage | None = None,
    ) -> None:
        self.parent, self.request, self.make_stage = parent, request, stage
        self.then_batch = then_batch  # A `.batch()` right after, that the workers run.
        self.plan = request()

    @property
    def stages(self) -> tuple[Stage, ...]:
        own = (self.make_stage(self.plan.chunks.chunk_size),)
        return (*self.parent.stages, *own, *((self.then_batch,) if self.then_batch else ()))

    def with_batch(self, stage: Stage, step: PlanStep) -> MultiprocessFactory | None:
        """This factory with the batch `step` right after it run by the workers, if it can.

        The workers then stack whole chunks into shared memory and the consumer hands
        out slices of them: the same batches and states as batching the merged stream
        here, without copying each batch once more. None if something is in between.
        """
        if self.plan.tail or self.then_batch is not None:
            return None
        dataset, steps, *rest = self.request.args
        request = functools.partial(
            self.request.func, dataset, (*steps, step), *rest, **self.request.keywords
        )
        batched = MultiprocessFactory(self.parent, request, self.make_stage, stage)
        # The same work, batched by the workers: its iterators tune from the same memory
        # (`for batch in ds.batch(8)` in an epoch loop starts where the last epoch settled).
        batched.plan = dataclasses.replace(batched.plan, tuning_memory=self.plan.tuning_memory)
        return batched

    def __call__(self) -> CheckpointableIterator[Any]:
        recorder = RECORDER.get()
        plan = self.plan
        if recorder is not None:  # The workers time each of the plan's stages too.
            plan = dataclasses.replace(plan, chunks=dataclasses.replace(plan.chunks, timed=True))

        def on_workers(workers: Any) -> None:
            if recorder is not None:  # The workers it runs now (a warm start's too).
                count = getattr(workers, "num_workers", plan.options.num_workers)
                recorder.add_workers(plan.chunks.names, workers, count)

        return plan.build(wrap=timed, on_workers=on_workers)  # type: ignore[no-any-return]


def plan_request(
    factory: Factory,
    options: MultiprocessingOptions | RayOptions,
    init_fn: Callable[[int, int], Any] | None,
    chunk_size: int | None,
) -> functools.partial[WorkerPlan]:
    """The planner's request for `factory`'s pipeline: its reader, then its stream steps.

    Raises:
        TypeError: the pipeline does not start by reading a random-access dataset in
            order, so it cannot be cut into chunks.
    """
    caller = "ray_prefetch" if isinstance(options, RayOptions) else "mp_prefetch"
    steps: list[PlanStep] = []
    while isinstance(factory, OpFactory | SkipErrorsFactory | MarkFactory):
        if not isinstance(factory, MarkFactory):
            steps.append(factory.step())
        factory = factory.parent
    if not isinstance(factory, SequentialFactory):
        raise TypeError(
            f"{caller} needs a pipeline that starts by reading a random-access dataset in "
            "order (MapDataset...to_iter_dataset()), so that work can be cut into chunks of "
            "positions whose outputs do not depend on the number of workers. Apply mix, "
            f"interleave or stream sources after {caller}, or prefetch each component."
        )
    steps.reverse()
    return functools.partial(
        plan_workers,
        factory.node,
        tuple(steps),
        options,
        chunk_size=chunk_size,
        elements_are_batches=factory.elements_are_batches(),
        init_fn=init_fn,
        caller=caller,
    )


def batch_step(stage: Stage, batch_size: int, **options: Any) -> PlanStep:
    """A `batch` as the planner sees it: one the workers may stack (no `batch_fn`)."""
    spec = None
    if options.get("batch_fn") is None:
        spec = BatchSpec(
            batch_size, options.get("drop_remainder", False), options.get("pad", False)
        )
    return PlanStep(BatchIter, (batch_size,), options, stage.line(), batch=spec)


def mix_weights(weights: Sequence[float] | WeightSchedule | None, count: int, owner: str) -> str:
    """Checks a mixture's weights (a `WeightSchedule` too); returns them as described."""
    if isinstance(weights, WeightSchedule):
        weights.check_count(count, owner)
        return repr(weights)
    check_weights(weights, count, owner)
    return repr(None if weights is None else list(weights))


class MixFactory:
    def __init__(
        self,
        parents: Sequence[Factory],
        weights: Sequence[float] | WeightSchedule | None,
        stage: Stage,
    ):
        self.parents, self.weights, self.stage = tuple(parents), weights, stage

    @property
    def stages(self) -> tuple[Stage, ...]:
        return (self.stage,)

    def __call__(self) -> CheckpointableIterator[Any]:
        with sharing_reads():  # The components' readers share threads and read-ahead.
            iterators = [make() for make in self.parents]
        return timed(MixIter(iterators, self.weights), "mix")  # type: ignore[no-any-return]


class InterleaveFactory:
    """An interleave of `parents`; `before`: the stages of the dataset that listed them.

    A `MapDataset` of datasets (`files.shard(i, n).map(make_stream)`) says which shard
    of which inputs the interleave reads, which resharding needs.
    """

    def __init__(
        self,
        parents: Sequence[Factory | None],
        cycle_length: int,
        stage: Stage,
        before: tuple[Stage, ...] = (),
        positions: bool | Callable[[], bool | None] | None = None,
    ) -> None:
        # A list is kept as a tuple; a lazy sequence (streams by position) as it is.
        self.parents = tuple(parents) if isinstance(parents, list | tuple) else parents
        self.cycle_length, self.stage, self.before = cycle_length, stage, before
        self.positions = positions  # Whether the streams' origins are positions.

    @property
    def stages(self) -> tuple[Stage, ...]:
        return (*self.before, self.stage)

    def __call__(self) -> CheckpointableIterator[Any]:
        iterator = InterleaveIter(self.parents, self.cycle_length, self.positions)
        return timed(iterator, "interleave")  # type: ignore[no-any-return]


class JoinFactory:
    """`op([parent() for parent in parents])`: one stream of several (zip, concatenate)."""

    def __init__(self, parents: Sequence[Factory], op: Callable[..., Any], stage: Stage) -> None:
        self.parents, self.op, self.stage = tuple(parents), op, stage

    @property
    def stages(self) -> tuple[Stage, ...]:
        return (self.stage,)

    def __call__(self) -> CheckpointableIterator[Any]:
        with sharing_reads():  # The inputs' readers share threads and read-ahead.
            iterators = [make() for make in self.parents]
        return timed(self.op(iterators), self.stage.op)  # type: ignore[no-any-return]


class EmptyIterator:
    """A stand-in parent used to validate options when a stage is declared."""

    def __iter__(self) -> EmptyIterator:
        return self

    def __next__(self) -> Any:
        raise StopIteration

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass
