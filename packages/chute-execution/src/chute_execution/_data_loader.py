"""`DataLoader`: a sampler, a source and a list of transforms, as in Grain's guide."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from chute_core import (
    ErrorBudget,
    PipelineDescription,
    PipelineStage,
    RandomAccessDataSource,
    StageTraits,
    declare_stage,
    read_records,
)
from chute_core.internal import check_count
from chute_samplers import EpochArray, IndexSampler, IterNode, MapNode, PositionArray, record_rng
from chute_samplers.internal import RNG_OP
from chute_sources import Source
from chute_transforms import (
    BatchIter,
    BatchTransform,
    FilterIter,
    FilterTransform,
    FlatMapIter,
    FlatMapTransform,
    MapIter,
    MapTransform,
    RandomMapIter,
    RandomMapTransform,
    as_filter_fn,
    as_flat_map_fn,
    as_map_fn,
    as_random_map_fn,
)

from ._autotune_options import AutotuneOptions
from ._mp_options import MultiprocessingOptions
from ._planner import BatchSpec, PlanStep, WorkerPlan, plan_workers
from ._ray_options import RayOptions
from ._read_options import ReadOptions
from ._tuning_memory import TuningMemory

__all__ = ["DataLoader"]


class _Sampled(MapNode[Any]):
    """Position p: `source[record key]` as the sampler says.

    With `pairs`, the pair `(global index, record)`: a random map draws from the
    record's own generator.
    """

    def __init__(
        self, source: RandomAccessDataSource[Any], sampler: IndexSampler, pairs: bool
    ) -> None:
        self.source, self.sampler, self.pairs = source, sampler, pairs

    def __len__(self) -> int:
        return self.sampler.positions  # An endless sampler (num_epochs=None) too.

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[Any]:
        indices, keys = self.sampler.locate(positions)
        # chute's sources take key arrays as they are; any other gets a list of ints.
        wanted: Any = keys if isinstance(self.source, Source) else keys.tolist()
        records = read_records(self.source, wanted)
        if not self.pairs:
            return records
        return list(zip(indices.tolist(), records, strict=True))


def _named(wrapper: Any, fn: object) -> None:
    name = getattr(fn, "__name__", None)
    wrapper.__name__ = name if isinstance(name, str) else type(fn).__name__


class _OnElement:
    def __init__(self, fn: Any) -> None:
        self.fn = as_map_fn(fn)
        _named(self, fn)

    def __call__(self, pair: tuple[int, Any]) -> tuple[int, Any]:
        return pair[0], self.fn(pair[1])


class _RandomOnElement:
    def __init__(self, fn: Any, seed: int) -> None:
        self.fn, self.seed = as_random_map_fn(fn), seed
        _named(self, fn)

    def __call__(self, pair: tuple[int, Any]) -> tuple[int, Any]:
        return pair[0], self.fn(pair[1], record_rng(self.seed, pair[0], RNG_OP))


class _FilterOnElement:
    def __init__(self, fn: Any) -> None:
        self.fn = as_filter_fn(fn)
        _named(self, fn)

    def __call__(self, pair: tuple[int, Any]) -> Any:
        return self.fn(pair[1])


class _FlatOnElement:
    def __init__(self, fn: Any) -> None:
        self.fn = as_flat_map_fn(fn)[0]
        _named(self, fn)

    def __call__(self, pair: tuple[int, Any]) -> list[tuple[int, Any]]:
        return [(pair[0], out) for out in self.fn(pair[1])]


def _record_step(op: Any, name: str, seed: int) -> PlanStep:
    """`op` over records (not pairs), as a per-record step."""
    if isinstance(op, RandomMapTransform):
        return PlanStep(RandomMapIter, (op, seed), name=name)
    if isinstance(op, FilterTransform):
        return PlanStep(FilterIter, (op,), name=name, elementwise=True)
    if isinstance(op, FlatMapTransform):
        return PlanStep(FlatMapIter, (op,), name=name, elementwise=True)
    if isinstance(op, MapTransform) or callable(op):
        return PlanStep(MapIter, (op,), name=name, elementwise=True)
    raise TypeError(f"DataLoader: {op!r} is not a transform or a callable.")


def _element(pair: tuple[int, Any]) -> Any:
    return pair[1]


def _stage(op: str, **params: Any) -> PipelineStage:
    return PipelineStage(
        op, tuple((k, repr(v)) for k, v in params.items()), raw=tuple(params.items())
    )


for _op in ("data_source", "sampler", "operation", "error_budget"):
    declare_stage(_op, StageTraits())  # None keeps positions a reshard could re-cut.
# How the workers cut the records; their state names a record a flat map split.
declare_stage("chunks", StageTraits(chunk="chunk_size", names_splits=True))


def _operation_name(number: int, op: object) -> str:
    """How messages name `operations[number]`, e.g. `operations[0] (Normalize)`."""
    name = getattr(op, "__name__", None)
    return f"operations[{number}] ({name if isinstance(name, str) else type(op).__name__})"


class DataLoader:
    """Reads records in the order a sampler says, transforms them, on worker processes.

    The glue of Grain's DataLoader guide: `sampler` (e.g. `IndexSampler`) decides which
    record comes next, `data_source` reads it, `operations` transform it (a
    `RandomMapTransform` gets the record's own generator, the one in its
    `RecordMetadata`), and `worker_count` processes do the work. Output and
    checkpoints do not depend on `worker_count`: a state saved with 5 workers restores
    with 0 or 2. Iterators have `get_state()` / `set_state()` (JSON dicts).

    Args:
        data_source: a random-access source.
        sampler: an `IndexSampler` (shuffling, epochs and sharding).
        operations: transforms applied in order; elementwise ones before the first
            `BatchTransform` run in the workers.
        worker_count: worker processes (0: in this process).
        ray_options: run the workers' part as tasks on a Ray cluster instead of local
            processes (`RayOptions`; `worker_count` must then stay 0). The output and
            checkpoints are the same as with local workers.
        worker_buffer_size: chunks each worker may work ahead.
        read_options: threads that read each chunk of records (per process).
        chunk_size: records per unit of work handed to a worker; None: the planner's
            choice (`chute_execution.default_chunk_size`: 64 records, whole batches when
            the workers batch). It never changes the records: a state restores into a
            loader of any chunk size (states of chute before 2026-11, which counted
            chunks, into one of the same size).
        error_budget: skip records that fail to read or to transform (the operations
            before the first batch) within this budget, instead of raising; see
            `chute.IterDataset.skip_errors`. The iterator's `failures` and `skipped`
            tell what was left out, and its state records them.
        autotune: change the workers and their buffers while the loader runs, from
            `worker_count` and `worker_buffer_size` on (see
            `MultiprocessingOptions.autotune`); never the output. Each new iterator
            of the loader starts where the last one's tuning settled.

    Example:
        >>> from chute_samplers import IndexSampler, NoSharding
        >>> from chute_sources import RangeSource
        >>> sampler = IndexSampler(
        ...     5, num_epochs=2, shard_options=NoSharding(), shuffle=True, seed=0
        ... )
        >>> loader = DataLoader(data_source=RangeSource(5), sampler=sampler, worker_count=0)
        >>> sorted(loader) == sorted(list(range(5)) * 2)
        True
    """

    def __init__(
        self,
        *,
        data_source: RandomAccessDataSource[Any],
        sampler: IndexSampler,
        operations: Sequence[Any] = (),
        worker_count: int = 0,
        worker_buffer_size: int = 1,
        read_options: ReadOptions | None = None,
        chunk_size: int | None = None,
        error_budget: ErrorBudget | None = None,
        ray_options: RayOptions | None = None,
        autotune: AutotuneOptions | bool = False,
    ) -> None:
        if not isinstance(sampler, IndexSampler):
            raise TypeError(f"DataLoader: sampler must be an IndexSampler, got {sampler!r}.")
        if len(data_source) < sampler.num_records:
            raise ValueError(
                f"DataLoader: the sampler covers {sampler.num_records} records but the source "
                f"has only {len(data_source)}."
            )
        if read_options is not None and not isinstance(read_options, ReadOptions):
            raise TypeError(
                "DataLoader: read_options must be a ReadOptions (or None), got "
                f"{type(read_options).__name__} {read_options!r}."
            )
        given: Any = autotune  # Typed as given: None is not "not given" here.
        if not isinstance(given, AutotuneOptions | bool):
            raise TypeError(
                "DataLoader: autotune must be True, False or an AutotuneOptions, got "
                f"{type(given).__name__} {given!r}."
            )
        self.data_source, self.sampler = data_source, sampler
        self.options: MultiprocessingOptions | RayOptions = MultiprocessingOptions(
            check_count(worker_count, "worker_count", "DataLoader"),
            check_count(worker_buffer_size, "worker_buffer_size", "DataLoader", minimum=1),
            autotune=autotune,
        )
        if ray_options is not None:
            if not isinstance(ray_options, RayOptions):
                raise TypeError(
                    "DataLoader: ray_options must be a RayOptions (or None), got "
                    f"{type(ray_options).__name__} {ray_options!r}."
                )
            if worker_count:
                raise ValueError(
                    f"DataLoader: worker_count={worker_count} and ray_options both ask for "
                    "workers; give one (ray_options=RayOptions(num_workers=...) sets how many "
                    "chunks run at once on the Ray cluster)."
                )
            if autotune is not False:
                raise ValueError(
                    "DataLoader: autotune applies to local worker processes; a Ray cluster "
                    "(ray_options) sizes itself. Give one of them."
                )
            self.options = ray_options
        self.read_options = read_options
        self.chunk_size = (
            None
            if chunk_size is None
            else check_count(chunk_size, "chunk_size", "DataLoader", minimum=1)
        )
        if error_budget is not None and not isinstance(error_budget, ErrorBudget):
            raise TypeError(
                "DataLoader: error_budget must be an ErrorBudget (e.g. "
                f"ErrorBudget(max_failures=10)) or None, got {error_budget!r}."
            )
        self.error_budget = error_budget
        self._seed = 0 if sampler.seed is None else sampler.seed
        self._tuning_memory = TuningMemory()  # Each iterator's tuner starts where the last settled.
        self._chunk_ops, self._tail = self._compile(list(operations))
        self._operations = tuple(operations)

    def _compile(self, operations: list[Any]) -> tuple[list[PlanStep], list[PlanStep]]:
        """The operations as planner steps, in order.

        The per-record ones (before the first batch) work on `(index, record)` pairs,
        so that a random map gets the record's own generator; the batch and the rest
        work on the records.
        """
        chunk_steps: list[PlanStep] = []
        position = 0
        while position < len(operations) and not isinstance(operations[position], BatchTransform):
            position += 1
        if not any(isinstance(op, RandomMapTransform) for op in operations[:position]):
            self._pairs = False  # No record needs its index: the records travel alone.
            for number, op in enumerate(operations[:position]):
                chunk_steps.append(_record_step(op, _operation_name(number, op), self._seed))
            return chunk_steps, self._tail_steps(operations, position)
        self._pairs = True
        position = 0
        while position < len(operations) and not isinstance(operations[position], BatchTransform):
            op = operations[position]
            name = _operation_name(position, op)
            if isinstance(op, RandomMapTransform):
                step = PlanStep(MapIter, (_RandomOnElement(op, self._seed),), name=name)
            elif isinstance(op, FilterTransform):
                step = PlanStep(FilterIter, (_FilterOnElement(op),), name=name)
            elif isinstance(op, FlatMapTransform):
                step = PlanStep(FlatMapIter, (_FlatOnElement(op),), name=name)
            else:
                step = PlanStep(MapIter, (_OnElement(op),), name=name)
            chunk_steps.append(dataclasses.replace(step, elementwise=True))
            position += 1
        chunk_steps.append(PlanStep(MapIter, (_element,), name="DataLoader", elementwise=True))
        return chunk_steps, self._tail_steps(operations, position)

    def _tail_steps(self, operations: list[Any], position: int) -> list[PlanStep]:
        tail: list[PlanStep] = []
        for number, op in enumerate(operations[position:], start=position):
            name = _operation_name(number, op)
            if isinstance(op, BatchTransform):
                spec = None
                if op.batch_fn is None:  # The workers may stack it.
                    spec = BatchSpec(op.batch_size, op.drop_remainder, op.pad)
                tail.append(PlanStep(BatchIter.from_transform, (op,), name=name, batch=spec))
            else:
                tail.append(
                    dataclasses.replace(_record_step(op, name, self._seed), elementwise=False)
                )
        return tail

    def plan(self) -> WorkerPlan:
        """What runs in the workers and what here (see `chute_execution.plan_workers`).

        The per-record operations before the first batch run in the workers, chunk by
        chunk; a `BatchTransform` right after them is stacked by the workers too, into
        shared memory, so this process only hands out slices.

        Example:
            >>> from chute_samplers import IndexSampler, NoSharding
            >>> from chute_sources import RangeSource
            >>> from chute_transforms import BatchTransform
            >>> sampler = IndexSampler(8, shard_options=NoSharding(), num_epochs=1)
            >>> loader = DataLoader(
            ...     data_source=RangeSource(8), sampler=sampler,
            ...     operations=[BatchTransform(4)], worker_count=0)
            >>> loader.plan().workers_batch
            True
        """
        steps = list(self._chunk_ops)
        if self.error_budget is not None:
            steps.append(PlanStep(None, name="error_budget", budget=self.error_budget))
        steps.extend(self._tail)
        read_threads = 0 if self.read_options is None else self.read_options.num_threads
        return plan_workers(
            _Sampled(self.data_source, self.sampler, self._pairs),
            steps,
            self.options,
            chunk_size=self.chunk_size,
            read_threads=read_threads,
            caller=self._caller(),
            reader_name="data_source",
        )

    def _caller(self) -> str:
        if isinstance(self.options, RayOptions):
            return f"DataLoader(ray_options=RayOptions(num_workers={self.options.num_workers}))"
        return f"DataLoader(worker_count={self.options.num_workers})"

    def __iter__(self) -> IterNode[Any]:
        plan = dataclasses.replace(self.plan(), tuning_memory=self._tuning_memory)
        result: IterNode[Any] = plan.build()
        result.chute_pipeline = self.description()  # type: ignore[attr-defined]
        result.chute_stage_traits = self.stage_traits()  # type: ignore[attr-defined]
        return result

    def stage_traits(self) -> dict[str, StageTraits]:
        """What the loader's stages do to positions, for resharding.

        The `sampler` takes its shard by a stride of each epoch when it is an
        `IndexSampler` itself (a subclass, such as `chute.grain`'s for Grain's samplers,
        may number its records otherwise: then it says nothing, and a restore on another
        process count is refused). Each `operation` keeps one record per position (and
        a filter drops some) unless one is a `FlatMapTransform`, which splits records in
        the workers: one, before any batch, says so (its outputs name their record);
        two, or one after a batch, say nothing either.

        Example:
            >>> from chute_samplers import IndexSampler
            >>> from chute_sources import RangeSource
            >>> from chute_transforms import FilterTransform
            >>> class Odd(FilterTransform):
            ...     def filter(self, x): return x % 2 == 1
            >>> loader = DataLoader(data_source=RangeSource(4), sampler=IndexSampler(4),
            ...                     operations=[Odd()])
            >>> traits = loader.stage_traits()["operation"]
            >>> traits.keeps_positions, traits.drops, loader.stage_traits()["sampler"].shard
            (True, True, ('shard_index', 'shard_count'))
        """
        sampler = StageTraits()
        if type(self.sampler) is IndexSampler:
            sampler = StageTraits(shard=("shard_index", "shard_count"))
        flat = [n for n, op in enumerate(self._operations) if isinstance(op, FlatMapTransform)]
        if flat:  # One, before any batch: split in the workers, by record (see `_unit_state`).
            batch = next(
                (n for n, op in enumerate(self._operations) if isinstance(op, BatchTransform)),
                len(self._operations),
            )
            one = len(flat) == 1 and flat[0] < batch
            return {"sampler": sampler, "operation": StageTraits(splits=one, drops=one)}
        drops = any(isinstance(op, FilterTransform) for op in self._operations)
        return {"sampler": sampler, "operation": StageTraits(keeps_positions=True, drops=drops)}

    def description(self) -> PipelineDescription:
        """The loader's pipeline, as a checkpoint fingerprints it (never the worker count).

        Example:
            >>> from chute_samplers import IndexSampler, NoSharding
            >>> from chute_sources import RangeSource
            >>> sampler = IndexSampler(4, shard_options=NoSharding(), num_epochs=1)
            >>> loader = DataLoader(data_source=RangeSource(4), sampler=sampler)
            >>> [stage.op for stage in loader.description().stages]
            ['data_source', 'sampler', 'chunks']
        """
        sampler = self.sampler
        sampling = {
            "num_records": sampler.num_records,
            "num_epochs": sampler.num_epochs,
            "shard_options": sampler.shard_options,
            "shuffle": sampler.shuffle,
            "seed": sampler.seed,
        }
        stages = [
            _stage("data_source", source=self.data_source),
            _stage("sampler", **sampling),
            *(_stage("operation", transform=op) for op in self._operations),
            _stage("chunks", chunk_size=self.plan().chunks.chunk_size),
        ]
        if self.error_budget is not None:
            stages.append(_stage("error_budget", budget=self.error_budget))
        return PipelineDescription("DataLoader", tuple(stages))

    def __repr__(self) -> str:
        workers = f"worker_count={self.options.num_workers}"
        if isinstance(self.options, RayOptions):
            workers = f"ray_options={self.options!r}"
        return f"DataLoader(data_source={self.data_source!r}, sampler={self.sampler!r}, {workers})"
