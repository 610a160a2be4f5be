"""`ChunkPlan`: the part of a pipeline that runs on chunks of base positions.

A pipeline that starts by reading a random-access dataset in order can be cut into
chunks of consecutive base positions. Elementwise stream ops (map, filter, flat map,
random map keyed by origin) give, for a chunk, the same outputs whoever runs it, so
chunks can run anywhere (this process or any worker) and be put back in order: the
merged stream is the single-process stream, for any number of workers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from chute_samplers import IterNode, fetch
from chute_sources import DROPPED, IteratorState, RandomAccessDataSource
from chute_transforms import BatchError, batch_elements
from chute_transforms._batch import Allocate, stacking_into

from ._checks import check_count, check_dataset

__all__ = ["ChunkPlan", "ChunkResult", "StreamOp", "Unstacked", "outputs_before"]

StreamOp = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]
"""An elementwise stream op: `(op_class, args, kwargs)`, applied as `op(parent, *a, **k)`."""

ChunkResult = tuple[Any, list[tuple[int, ...] | None]]
"""The outputs of one chunk (a list, or with `stack` one batch of them, None if there
are none), and the origin of each output."""


def outputs_before(plan: ChunkPlan, chunk: int, error: BaseException) -> ChunkResult:
    """The outputs of `chunk` that came before `error` was raised running it.

    A failing chunk's good outputs are recomputed here (the error says how many there
    were), so that the elements before an error are handed out with any number of
    workers, as without workers. Stops early if the recomputation fails sooner.

    Example:
        >>> from chute_transforms import MapIter
        >>> plan = ChunkPlan(range(8), [(MapIter, (lambda x: 10 // (x - 5),), {})], 8)
        >>> try:
        ...     plan.run(0)
        ... except ZeroDivisionError as error:
        ...     outputs_before(plan, 0, error)
        ([-2, -3, -4, -5, -10], [(0,), (1,), (2,), (3,), (4,)])
    """
    limit = getattr(error, "chute_outputs_before", None)
    outputs: list[Any] = []
    origins: list[tuple[int, ...] | None] = []
    if not isinstance(limit, int):
        return outputs, origins
    try:
        for element, origin in plan.iterate(chunk):
            if len(outputs) >= limit:
                break
            outputs.append(element)
            origins.append(origin)
    except Exception:
        pass  # It failed here too, at or before the same element.
    return outputs, origins


class Unstacked(list):  # type: ignore[type-arg]
    """The outputs of a chunk that `stack` could not stack as one batch, as a list.

    Batches may differ in shape from one another (only the elements of one batch must
    agree), so a chunk holding several batches may not stack: its consumer then
    batches these outputs itself, exactly as if nothing had been stacked.

    Example:
        >>> Unstacked([1, 2])
        [1, 2]
    """


_READERS: dict[int, ThreadPoolExecutor] = {}
"""One reading thread pool per size, per process (workers each get their own)."""


def _fetch_chunk(
    dataset: RandomAccessDataSource[Any], start: int, stop: int, threads: int
) -> list[Any]:
    positions = np.arange(start, stop, dtype=np.int64)
    if threads <= 1 or positions.size < 2 * threads:
        return fetch(dataset, positions, np.zeros(positions.size, np.uint64))
    pool = _READERS.get(threads)
    if pool is None:
        pool = _READERS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="chute-chunk")
    parts = np.array_split(positions, threads)
    futures = [pool.submit(fetch, dataset, p, np.zeros(p.size, np.uint64)) for p in parts]
    return [element for future in futures for element in future.result()]


class _ChunkReader(IterNode[Any]):
    """Reads base positions `[start, stop)` in order (skipping DROPPED); origin `(p,)`."""

    def __init__(
        self, dataset: RandomAccessDataSource[Any], start: int, stop: int, threads: int = 0
    ) -> None:
        self._elements = _fetch_chunk(dataset, start, stop, threads)
        self._start = start
        self._next = 0
        self._last: int | None = None

    def __next__(self) -> Any:
        elements = self._elements
        while self._next < len(elements):
            index = self._next
            self._next += 1
            element = elements[index]
            if element is not DROPPED:
                self._last = self._start + index
                return element
        raise StopIteration

    @property
    def origin(self) -> tuple[int, ...] | None:
        return None if self._last is None else (self._last,)

    def get_state(self) -> IteratorState:
        return {"next": self._next}

    def set_state(self, state: IteratorState, /) -> None:
        value = state["next"]
        assert isinstance(value, int)
        self._next = value


@dataclasses.dataclass(frozen=True)
class ChunkPlan:
    """A random-access base, elementwise ops over it, and the chunk size.

    Picklable (it is sent to each worker once). `run(chunk)` gives the outputs of
    base positions `[chunk * chunk_size, (chunk + 1) * chunk_size)`.

    Attributes:
        dataset: the random-access base, read in order.
        ops: elementwise stream ops applied to the base, innermost first.
        chunk_size: base positions per chunk (fixed: it does not depend on workers).
        read_threads: threads that read a chunk's records in parallel (0 or 1: one).
        stack: return a chunk's outputs stacked into one batch (`batch_elements`), so a
            worker builds batches and the consumer only slices and joins them (as an
            `Unstacked` list if they do not stack, e.g. batches of different shapes).

    Example:
        >>> from chute_transforms import FilterIter, MapIter
        >>> plan = ChunkPlan(range(10), [(FilterIter, (lambda x: x % 3,), {}),
        ...                               (MapIter, (lambda x: x * 10,), {})], chunk_size=4)
        >>> plan.num_chunks, plan.run(1)
        (3, ([40, 50, 70], [(4,), (5,), (7,)]))
    """

    dataset: RandomAccessDataSource[Any]
    ops: tuple[StreamOp, ...] | list[StreamOp] = ()
    chunk_size: int = 64
    read_threads: int = 0
    stack: bool = False

    def __post_init__(self) -> None:
        check_dataset(self.dataset, "ChunkPlan")
        check_count(self.chunk_size, "chunk_size", "ChunkPlan", minimum=1)
        check_count(self.read_threads, "read_threads", "ChunkPlan")
        object.__setattr__(self, "ops", tuple(self.ops))

    @property
    def num_chunks(self) -> int:
        """How many chunks the base has (the last may be short)."""
        return -(-len(self.dataset) // self.chunk_size)

    def iterate(self, chunk: int) -> Iterator[tuple[Any, tuple[int, ...] | None]]:
        """Yields `(output, origin)` for chunk `chunk`, lazily."""
        start = chunk * self.chunk_size
        stop = min(start + self.chunk_size, len(self.dataset))
        stream: Any = _ChunkReader(self.dataset, start, stop, self.read_threads)
        for op, args, kwargs in self.ops:
            stream = op(stream, *args, **kwargs)
        while True:
            try:
                element = next(stream)
            except StopIteration:
                return
            yield element, getattr(stream, "origin", None)

    def run(self, chunk: int, allocate: Allocate | None = None) -> ChunkResult:
        """The outputs of chunk `chunk` and their origins, in order.

        With `stack`, `allocate` (see `chute_transforms.stacking_into`) gives the memory
        to stack the array leaves into, e.g. a worker's shared-memory slab.
        """
        outputs: list[Any] = []
        origins: list[tuple[int, ...] | None] = []
        try:
            for element, origin in self.iterate(chunk):
                outputs.append(element)
                origins.append(origin)
        except Exception as error:
            # How many outputs came before the failure: the consumer hands those out
            # before raising, as a single process would (see `outputs_before`).
            error.chute_outputs_before = len(outputs)  # type: ignore[attr-defined]
            raise
        if self.stack:
            if not outputs:
                return None, origins
            try:
                if allocate is None:
                    return batch_elements(outputs), origins
                with stacking_into(allocate):
                    return batch_elements(outputs), origins
            except BatchError:
                return Unstacked(outputs), origins
        return outputs, origins
