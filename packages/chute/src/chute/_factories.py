"""The picklable factories behind `IterDataset`: each builds a fresh iterator chain.

Worker processes receive them pickled, so they hold classes, functions and arguments,
never lambdas of ours.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, ParamSpec, TypeVar

from chute_execution import (
    ChunkPlan,
    MultiprocessBatchIter,
    MultiprocessingOptions,
    MultiprocessPrefetchIter,
    PrefetchReadIter,
    ReadOptions,
)
from chute_samplers import InterleaveIter, MixIter, SequentialIter
from chute_sources import CheckpointableIterator, ErrorBudget, RandomAccessDataSource
from chute_transforms import (
    BatchIter,
    FilterIter,
    FlatMapIter,
    MapIter,
    RandomMapIter,
    SkipErrorsIter,
)

from ._stats import RECORDER, timed

__all__ = [
    "EmptyIterator",
    "Factory",
    "InterleaveFactory",
    "MixFactory",
    "MultiprocessFactory",
    "OpFactory",
    "SequentialFactory",
    "SkipErrorsFactory",
    "split_for_workers",
]

T = TypeVar("T")
U = TypeVar("U")
P = ParamSpec("P")
R = TypeVar("R")
Factory = Callable[[], CheckpointableIterator[Any]]
"""Builds a fresh iterator at the start of the stream (picklable, for workers)."""


class SequentialFactory:
    """Builds an iterator reading a random-access dataset in order (threads optional)."""

    def __init__(
        self, node: RandomAccessDataSource[Any], read_options: ReadOptions | None = None
    ) -> None:
        self.node = node
        self.read_options = read_options

    def __call__(self) -> CheckpointableIterator[Any]:
        if self.read_options is None:
            iterator: Any = SequentialIter(self.node)
        else:
            iterator = PrefetchReadIter(self.node, self.read_options)
        return timed(iterator, "to_iter_dataset()")  # type: ignore[no-any-return]


class OpFactory:
    """Builds `op(parent(), *args, **kwargs)`: one stream op over a fresh parent."""

    def __init__(self, parent: Factory, op: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.parent, self.op, self.args, self.kwargs = parent, op, args, kwargs
        self.name = getattr(op, "__name__", "stage")

    def __call__(self) -> CheckpointableIterator[Any]:
        result: Any = self.op(self.parent(), *self.args, **self.kwargs)
        return timed(result, self.name)  # type: ignore[no-any-return]


class SkipErrorsFactory:
    """Builds `SkipErrorsIter(parent, budget)`: the parent's stages skip failing elements."""

    def __init__(self, parent: Factory, budget: ErrorBudget, name: str) -> None:
        self.parent, self.budget, self.name = parent, budget, name

    def __call__(self) -> CheckpointableIterator[Any]:
        return timed(SkipErrorsIter(self.parent, self.budget), self.name)  # type: ignore[no-any-return]


_ELEMENTWISE = frozenset({MapIter, FilterIter, FlatMapIter, RandomMapIter})
"""Stream ops whose outputs for a chunk of base positions do not depend on other chunks."""


class MultiprocessFactory:
    """Builds the chunked part on workers, then the rest of the pipeline in this process."""

    def __init__(
        self,
        plan: ChunkPlan,
        options: MultiprocessingOptions,
        init_fn: Callable[[int, int], Any] | None,
        tail: Sequence[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]],
        batch_after: str | None = None,
        auto_chunk: bool = False,
        skip: tuple[ErrorBudget, int, str] | None = None,
        names: Sequence[str] = (),
    ) -> None:
        self.plan, self.options, self.init_fn, self.tail = plan, options, init_fn, tuple(tail)
        self.batch_after = batch_after
        self.auto_chunk = auto_chunk  # The chunk size was chosen by chute, not the user.
        # A `skip_errors` stage: its budget, how many tail stages it follows, its name.
        self.skip = skip
        self.names = tuple(names)  # Of the plan's stages, for statistics.

    def with_batch_after(
        self, name: str, batch_size: int, drop_remainder: bool, pad: bool
    ) -> MultiprocessFactory | None:
        """This factory with `.batch(...)` right after it run by the workers, if it can.

        The workers then stack whole chunks into shared memory and the consumer hands
        out slices of them: the same batches and states as batching the merged stream
        here, without copying each batch once more. `name` keeps the batch's own
        stage in the statistics. None if there is something between them.
        """
        if self.tail or self.batch_after is not None:
            return None
        options = {"drop_remainder": drop_remainder, "pad": pad}
        plan = self.plan
        if self.auto_chunk:  # Whole batches per chunk: each batch is one slice of a slab.
            size = batch_aligned_chunk_size(batch_size, len(plan.dataset))
            plan = dataclasses.replace(plan, chunk_size=size)
        return MultiprocessFactory(
            plan,
            self.options,
            self.init_fn,
            [(BatchIter, (batch_size,), options)],
            name,
            skip=self.skip,
            names=self.names,
        )

    def __call__(self) -> CheckpointableIterator[Any]:
        if self.skip is None:
            iterator, consumed = self._head()
            return self._stack(iterator, self.tail[consumed:])  # type: ignore[no-any-return]
        budget, at, name = self.skip
        parts: dict[str, int] = {}

        def inner() -> CheckpointableIterator[Any]:
            iterator, consumed = self._head()
            parts["consumed"] = consumed
            return self._stack(iterator, self.tail[consumed : max(at, consumed)])  # type: ignore[no-any-return]

        wrapped = timed(SkipErrorsIter(inner, budget), name)
        return self._stack(wrapped, self.tail[max(at, parts["consumed"]) :])  # type: ignore[no-any-return]

    def _head(self) -> tuple[Any, int]:
        """The workers' iterator, and how many tail stages it took over (a batch)."""
        tail = self.tail
        iterator: Any
        consumed = 0
        recorder = RECORDER.get()
        plan = self.plan
        if recorder is not None:  # The workers time each of the plan's stages too.
            plan = dataclasses.replace(plan, timed=True)
        if tail and tail[0][0] is BatchIter and tail[0][2].get("batch_fn") is None:
            # The workers stack their chunks; this process only slices out batches.
            _, (batch_size,), options = tail[0]
            iterator = MultiprocessBatchIter(
                plan,
                self.options,
                batch_size,
                drop_remainder=options.get("drop_remainder", False),
                pad=options.get("pad", False),
                worker_init_fn=self.init_fn,
            )
            consumed = 1
        else:
            iterator = MultiprocessPrefetchIter(plan, self.options, self.init_fn)
        workers = iterator
        iterator = timed(iterator, f"mp_prefetch(num_workers={self.options.num_workers})")
        if recorder is not None:
            recorder.add_workers(self.names, workers, self.options.num_workers)
        if self.batch_after is not None:
            iterator = timed(iterator, self.batch_after)  # Its work ran in the workers.
        return iterator, consumed

    @staticmethod
    def _stack(iterator: Any, tail: Sequence[Any]) -> Any:
        for op, args, kwargs in tail:
            iterator = timed(op(iterator, *args, **kwargs), getattr(op, "__name__", "stage"))
        return iterator


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


class Split(NamedTuple):
    """A pipeline cut for workers (see `split_for_workers`)."""

    plan: ChunkPlan
    tail: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]]
    skip: tuple[ErrorBudget, int, str] | None
    names: tuple[str, ...]  # Of the plan's stages, for statistics: the reader, the ops.


def split_for_workers(factory: Factory, chunk_size: int) -> Split:
    """Cuts a pipeline into the chunked part (base + elementwise ops) and the rest.

    Returns the plan, the stages after it, and a `skip_errors` stage if there is one
    (its budget, how many stages of the rest come before it, its name): the stages
    before it skip failing elements, in the workers too (`ChunkPlan.covered`).
    """
    steps: list[Any] = []
    skips: list[SkipErrorsFactory] = []
    names: list[str] = []
    while isinstance(factory, OpFactory | SkipErrorsFactory):
        if isinstance(factory, SkipErrorsFactory):
            skips.append(factory)
            steps.append(factory)
        else:
            steps.append((factory.op, factory.args, factory.kwargs))
            names.append(factory.name)
        factory = factory.parent
    if not isinstance(factory, SequentialFactory):
        raise TypeError(
            "mp_prefetch needs a pipeline that starts by reading a random-access dataset in "
            "order (MapDataset...to_iter_dataset()), so that work can be cut into chunks of "
            "positions whose outputs do not depend on the number of workers. Apply mix, "
            "interleave or stream sources after mp_prefetch, or prefetch each component."
        )
    if len(skips) > 1:
        raise ValueError(
            "mp_prefetch: the pipeline before it has skip_errors twice; give one budget "
            "(the last skip_errors covers every stage before it)."
        )
    steps.reverse()
    at = steps.index(skips[0]) if skips else None
    ops = [step for step in steps if not isinstance(step, SkipErrorsFactory)]
    split = 0
    while split < len(ops) and ops[split][0] in _ELEMENTWISE:
        split += 1
    covered = None if at is None else min(at, split)
    names.reverse()
    shown = ("to_iter_dataset()", *names[:split])
    plan = ChunkPlan(factory.node, ops[:split], chunk_size, covered=covered, names=shown)
    skip = None if at is None else (skips[0].budget, max(0, at - split), skips[0].name)
    return Split(plan, ops[split:], skip, shown)


class MixFactory:
    def __init__(self, parents: Sequence[Factory], weights: Sequence[float] | None) -> None:
        self.parents, self.weights = tuple(parents), weights

    def __call__(self) -> CheckpointableIterator[Any]:
        return timed(MixIter([make() for make in self.parents], self.weights), "mix")  # type: ignore[no-any-return]


class InterleaveFactory:
    def __init__(self, parents: Sequence[Factory], cycle_length: int) -> None:
        self.parents, self.cycle_length = tuple(parents), cycle_length

    def __call__(self) -> CheckpointableIterator[Any]:
        iterator = InterleaveIter(list(self.parents), self.cycle_length)
        return timed(iterator, "interleave")  # type: ignore[no-any-return]


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
