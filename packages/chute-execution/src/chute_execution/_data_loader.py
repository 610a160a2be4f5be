"""`DataLoader`: a sampler, a source and a list of transforms, as in Grain's guide."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chute_samplers import EpochArray, IndexSampler, IterNode, MapNode, PositionArray, record_rng
from chute_samplers.internal import RNG_OP
from chute_sources import ErrorBudget, RandomAccessDataSource, read_records
from chute_sources.internal import check_count
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
    SkipErrorsIter,
    as_filter_fn,
    as_flat_map_fn,
    as_map_fn,
    as_random_map_fn,
)

from ._chunk_plan import ChunkPlan, StreamOp
from ._mp_options import MultiprocessingOptions
from ._mp_prefetch import MultiprocessPrefetchIter
from ._read_options import ReadOptions

__all__ = ["DataLoader"]


class _Sampled(MapNode[tuple[int, Any]]):
    """Position p: `(global index, source[record key])` as the sampler says."""

    def __init__(self, source: RandomAccessDataSource[Any], sampler: IndexSampler) -> None:
        self.source, self.sampler = source, sampler

    def __len__(self) -> int:
        return len(self.sampler)

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[tuple[int, Any]]:
        indices, keys = self.sampler.locate(positions)
        records = read_records(self.source, keys.tolist())
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


def _element(pair: tuple[int, Any]) -> Any:
    return pair[1]


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
        worker_buffer_size: chunks each worker may work ahead.
        read_options: threads that read each chunk of records (per process).
        chunk_size: records per unit of work handed to a worker.
        error_budget: skip records that fail to read or to transform (the operations
            before the first batch) within this budget, instead of raising; see
            `chute.IterDataset.skip_errors`. The iterator's `failures` and `skipped`
            tell what was left out, and its state records them.

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
        chunk_size: int = 64,
        error_budget: ErrorBudget | None = None,
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
        self.data_source, self.sampler = data_source, sampler
        self.options = MultiprocessingOptions(
            check_count(worker_count, "worker_count", "DataLoader"),
            check_count(worker_buffer_size, "worker_buffer_size", "DataLoader", minimum=1),
        )
        self.read_options = read_options
        self.chunk_size = check_count(chunk_size, "chunk_size", "DataLoader", minimum=1)
        if error_budget is not None and not isinstance(error_budget, ErrorBudget):
            raise TypeError(
                "DataLoader: error_budget must be an ErrorBudget (e.g. "
                f"ErrorBudget(max_failures=10)) or None, got {error_budget!r}."
            )
        self.error_budget = error_budget
        self._seed = 0 if sampler.seed is None else sampler.seed
        self._chunk_ops, self._tail = self._compile(list(operations))
        self._operations = tuple(operations)
        self._chunk_names = (
            "data_source",
            *(
                _operation_name(n, op)
                for n, op in enumerate(operations[: len(self._chunk_ops) - 1])
            ),
            "DataLoader",
        )

    def _compile(self, operations: list[Any]) -> tuple[list[StreamOp], list[StreamOp]]:
        chunk_ops: list[StreamOp] = []
        position = 0
        while position < len(operations) and not isinstance(operations[position], BatchTransform):
            op = operations[position]
            if isinstance(op, RandomMapTransform):
                chunk_ops.append((MapIter, (_RandomOnElement(op, self._seed),), {}))
            elif isinstance(op, FilterTransform):
                chunk_ops.append((FilterIter, (_FilterOnElement(op),), {}))
            elif isinstance(op, FlatMapTransform):
                chunk_ops.append((FlatMapIter, (_FlatOnElement(op),), {}))
            else:
                chunk_ops.append((MapIter, (_OnElement(op),), {}))
            position += 1
        chunk_ops.append((MapIter, (_element,), {}))
        tail: list[StreamOp] = []
        for op in operations[position:]:
            if isinstance(op, BatchTransform):
                tail.append((BatchIter.from_transform, (op,), {}))
            elif isinstance(op, RandomMapTransform):
                tail.append((RandomMapIter, (op, self._seed), {}))
            elif isinstance(op, FilterTransform):
                tail.append((FilterIter, (op,), {}))
            elif isinstance(op, FlatMapTransform):
                tail.append((FlatMapIter, (op,), {}))
            elif isinstance(op, MapTransform) or callable(op):
                tail.append((MapIter, (op,), {}))
            else:
                raise TypeError(f"DataLoader: {op!r} is not a transform or a callable.")
        return chunk_ops, tail

    def __iter__(self) -> IterNode[Any]:
        read_threads = 0 if self.read_options is None else self.read_options.num_threads
        plan = ChunkPlan(
            _Sampled(self.data_source, self.sampler),
            self._chunk_ops,
            self.chunk_size,
            read_threads,
            names=self._chunk_names,
        )
        iterator: Any
        caller = f"DataLoader(worker_count={self.options.num_workers})"
        if self.error_budget is None:
            iterator = MultiprocessPrefetchIter(plan, self.options, caller=caller)
        else:
            options = self.options
            iterator = SkipErrorsIter(
                lambda: MultiprocessPrefetchIter(plan, options, caller=caller), self.error_budget
            )
        for op, args, kwargs in self._tail:
            iterator = op(iterator, *args, **kwargs)
        result: IterNode[Any] = iterator
        result.chute_pipeline = self._describe  # type: ignore[attr-defined]
        return result

    def _describe(self) -> dict[str, Any]:
        # The structure chute_checkpoint fingerprints (not the worker count: it never
        # changes the elements).
        sampler = self.sampler
        sampling = {
            "num_records": sampler.num_records,
            "num_epochs": sampler.num_epochs,
            "shard_options": sampler.shard_options,
            "shuffle": sampler.shuffle,
            "seed": sampler.seed,
        }
        return {
            "kind": "DataLoader",
            "stages": [
                {"op": "data_source", "params": {"source": self.data_source}},
                {"op": "sampler", "params": sampling},
                *({"op": "operation", "params": {"transform": op}} for op in self._operations),
                {"op": "chunks", "params": {"chunk_size": self.chunk_size}},
                *(
                    [{"op": "error_budget", "params": {"budget": self.error_budget}}]
                    if self.error_budget is not None
                    else []
                ),
            ],
        }

    def __repr__(self) -> str:
        return (
            f"DataLoader(data_source={self.data_source!r}, sampler={self.sampler!r}, "
            f"worker_count={self.options.num_workers})"
        )
