"""`ChunkPlan`: the part of a pipeline that runs on chunks of base positions.

A pipeline that starts by reading a random-access dataset in order can be cut into
chunks of consecutive base positions. Elementwise stream ops (map, filter, flat map,
random map keyed by origin) give, for a chunk, the same outputs whoever runs it, so
chunks can run anywhere (this process or any worker) and be put back in order: the
merged stream is the single-process stream, for any number of workers.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from chute_core import RandomAccessDataSource
from chute_core.internal import ErrorLedger, Key, check_count, check_dataset, ledger_scope
from chute_samplers import prefetch_span
from chute_transforms import BatchError, MapChain, MapIter, batch_elements
from chute_transforms.internal import Allocate, stacking_into

from ._chunk_cancel import ChunkCancelled, run_maps_until
from ._chunk_reader import ChunkReader, has_dropped, read_chunk
from ._chunk_result import ChunkResult, ConsecutiveOrigins, Skip, StageTime, Unstacked
from ._chunk_trace import ChunkTrace
from ._stage_clock import StageClock

__all__ = [
    "Chunk",
    "ChunkPlan",
    "ChunkResult",
    "Skip",
    "StageTime",
    "StreamOp",
    "Unstacked",
    "outputs_before",
]

StreamOp = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]
"""An elementwise stream op: `(op_class, args, kwargs)`, applied as `op(parent, *a, **k)`."""

Chunk = int | tuple[int, int]
"""A unit of work: chunk `c` of the grid (`[c * chunk_size, (c + 1) * chunk_size)`), or
an explicit span `(start, stop)` of base positions."""


def outputs_before(
    plan: ChunkPlan, chunk: Chunk, error: BaseException, replay: Iterable[Key] = ()
) -> ChunkResult:
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
        ...     outputs_before(plan, 0, error).outputs
        [-2, -3, -4, -5, -10]
    """
    limit = getattr(error, "chute_outputs_before", None)
    outputs: list[Any] = []
    origins: list[tuple[int, ...] | None] = []
    if not isinstance(limit, int):
        return ChunkResult(outputs, origins)
    ledger = plan.ledger(replay)
    try:
        for element, origin in plan.iterate(chunk, ledger):
            if len(outputs) >= limit:
                break
            outputs.append(element)
            origins.append(origin)
    except Exception:
        pass  # It failed here too, at or before the same element.
    skips = () if ledger is None else tuple(s for s in ledger.reports if s[0] <= len(outputs))
    return ChunkResult(outputs, origins, skips)


_AHEAD = 4096
"""The most positions one read ahead covers (`ChunkPlan.run(..., read_ahead=True)`)."""


@dataclasses.dataclass(frozen=True)
class ChunkPlan:
    """A random-access base, elementwise ops over it, and the chunk size.

    Picklable (it is sent to each worker once). `run(chunk)` gives the outputs of
    base positions `[chunk * chunk_size, (chunk + 1) * chunk_size)`, and `run((start,
    stop))` those of any span: the outputs depend on the positions only, never on how
    they are cut into chunks.

    Attributes:
        dataset: the random-access base, read in order.
        ops: elementwise stream ops applied to the base, innermost first.
        chunk_size: base positions per chunk (fixed: it does not depend on workers).
        read_threads: threads that read a chunk's records in parallel (0 or 1: one).
        stack: return a chunk's outputs stacked into one batch (`batch_elements`), so a
            worker builds batches and the consumer only slices and joins them (as an
            `Unstacked` list if they do not stack, e.g. batches of different shapes).

        skip_errors: skip elements that fail (reading or in an op) and report them in
            the result instead of raising (the consumer charges them to its budget).
        covered: with `skip_errors`, how many ops (after the reader) skip failures;
            None: all of them. The others raise, as after a `skip_errors` stage.
        timed: time each stage (the reader and every op) and report it in the result's
            `times`, for per-stage statistics of work done in workers.
        traced: the workers record trace events of each chunk (see `ChunkTrace`) and
            send them with its result; implies `timed`.
        names: what the user calls the stages (the reader, then each op), for messages;
            empty: named after their classes.
        adaptive: the consumer may cut the positions into spans of its own sizes (at
            most `chunk_size`) from the measured cost of the work; a performance
            setting only, as the outputs do not depend on the cut.
        drops: `(position, n)` pairs: leave out the first `n` outputs of the element
            at base `position` that an op splits (a flat map's, by their origins
            `(position, k)`), which another process delivered before a reshard.

    Example:
        >>> from chute_transforms import FilterIter, MapIter
        >>> plan = ChunkPlan(range(10), [(FilterIter, (lambda x: x % 3,), {}),
        ...                               (MapIter, (lambda x: x * 10,), {})], chunk_size=4)
        >>> plan.num_chunks, plan.run(1)[:2]
        (3, ([40, 50, 70], [(4,), (5,), (7,)]))
    """

    dataset: RandomAccessDataSource[Any]
    ops: tuple[StreamOp, ...] | list[StreamOp] = ()
    chunk_size: int = 64
    read_threads: int = 0
    stack: bool = False
    skip_errors: bool = False
    covered: int | None = None
    timed: bool = False
    names: tuple[str, ...] = ()
    adaptive: bool = False
    traced: bool = False
    drops: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        check_dataset(self.dataset, "ChunkPlan", "dataset")
        check_count(self.chunk_size, "chunk_size", "ChunkPlan", minimum=1)
        check_count(self.read_threads, "read_threads", "ChunkPlan")
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "names", tuple(self.names))
        if self.traced:
            object.__setattr__(self, "timed", True)

    def parts(self) -> list[tuple[str, Any]]:
        """The plan's stages as `(name, what it holds)`: the dataset, then each op's function.

        Example:
            >>> from chute_transforms import MapIter
            >>> plan = ChunkPlan(range(3), [(MapIter, (abs,), {})], 2, names=("src", "map(abs)"))
            >>> plan.parts()
            [('src', range(0, 3)), ('map(abs)', <built-in function abs>)]
        """
        names = list(self.names)
        if len(names) != len(self.ops) + 1:
            names = [type(self.dataset).__name__, *(op.__name__ for op, _, _ in self.ops)]
        parts: list[tuple[str, Any]] = [(names[0], self.dataset)]
        for name, (_, args, kwargs) in zip(names[1:], self.ops, strict=True):
            parts.append((name, args[0] if len(args) == 1 and not kwargs else (args, kwargs)))
        return parts

    def bounds(self, chunk: Chunk) -> tuple[int, int]:
        """The base positions `[start, stop)` of a grid chunk or a span.

        Example:
            >>> plan = ChunkPlan(range(10), chunk_size=4)
            >>> plan.bounds(2), plan.bounds((3, 5))
            ((8, 10), (3, 5))
        """
        if isinstance(chunk, tuple):
            return chunk
        start = chunk * self.chunk_size
        return start, min(start + self.chunk_size, len(self.dataset))

    def prefetch(self, chunk: Chunk) -> None:
        """Tells the source that `chunk`'s records come soon (`chute_samplers.prefetch_span`).

        Sources in buckets start fetching them; others ignore it. A hint only: it never
        raises (the read itself reports a failure) and never changes the outputs.

        Example:
            >>> ChunkPlan(range(10), chunk_size=4).prefetch(1)  # range has no prefetch
        """
        start, stop = self.bounds(chunk)
        try:
            prefetch_span(self.dataset, start, stop)
        except Exception:  # A hint: the read that needs these records reports failures.
            return

    @property
    def num_chunks(self) -> int:
        """How many chunks the base has (the last may be short)."""
        return -(-len(self.dataset) // self.chunk_size)

    @property
    def max_fan_out(self) -> int | None:
        """The most outputs one base position gives, or None if an op does not bound it.

        The product of the ops' `max_fan_out` (1 for a map or a filter, a flat map's
        declared bound); None as soon as one op declares none. A state's offset counts
        outputs, so it is at most this times the positions left (cached).

        Example:
            >>> from chute_transforms import FilterIter, FlatMapIter, MapIter
            >>> ChunkPlan(range(4), [(MapIter, (abs,), {}), (FilterIter, (bool,), {})]).max_fan_out
            1
            >>> ChunkPlan(range(4), [(FlatMapIter, (lambda x: [x, x],), {})]).max_fan_out is None
            True
        """
        cached: int | None = self.__dict__.get("_fan_out", 0)
        if cached == 0:
            most: int | None = 1
            with ledger_scope(None):
                stream: Any = ChunkReader(self.dataset, 0, 0)
                for op, args, kwargs in self.ops:
                    stream = op(stream, *args, **kwargs)
                    fan_out = getattr(stream, "max_fan_out", None)
                    if most is None or not isinstance(fan_out, int) or fan_out < 1:
                        most = None
                        break
                    most *= fan_out
            cached = most
            object.__setattr__(self, "_fan_out", cached)  # Not a field: never compared or sent.
        return cached

    def count_stages(self) -> int:
        """How many of the plan's stages can skip failures (the reader and the ops)."""
        ledger = ErrorLedger(None)
        self._build(0, 0, ledger, None)
        return ledger.register(0)

    def ledger(self, replay: Iterable[Key] = ()) -> ErrorLedger | None:
        """A collecting ledger for one chunk run, if the plan skips errors."""
        if not self.skip_errors:
            return None
        ledger = ErrorLedger(None)
        ledger.preset(replay)
        return ledger

    def _build(
        self, start: int, stop: int, ledger: ErrorLedger | None, clocks: list[StageClock] | None
    ) -> Any:
        covered = len(self.ops) if self.covered is None else self.covered
        stack: list[float] = []

        def clocked(stream: Any) -> Any:
            if clocks is None:
                return stream
            clocks.append(StageClock(stream, stack))
            return clocks[-1]

        with ledger_scope(ledger):
            stream: Any = clocked(ChunkReader(self.dataset, start, stop, self.read_threads))
            for op, args, kwargs in self.ops[:covered]:
                stream = clocked(op(stream, *args, **kwargs))
        with ledger_scope(None):
            for op, args, kwargs in self.ops[covered:]:
                stream = clocked(op(stream, *args, **kwargs))
        return stream

    def iterate(
        self,
        chunk: Chunk,
        ledger: ErrorLedger | None = None,
        clocks: list[StageClock] | None = None,
    ) -> Iterator[tuple[Any, tuple[int, ...] | None]]:
        """Yields `(output, origin)` for chunk `chunk`, lazily.

        With `ledger` (collecting), failing elements are skipped and reported there,
        each stamped with the number of outputs yielded before it. With `clocks` (a
        list), each stage is timed by a `StageClock` appended to it.
        """
        start, stop = self.bounds(chunk)
        stream = self._build(start, stop, ledger, clocks)
        drops = {position: n for position, n in self.drops if start <= position < stop}
        produced = 0
        while True:
            if ledger is not None:
                ledger.at = produced
            try:
                element = next(stream)
            except StopIteration:
                return
            origin = getattr(stream, "origin", None)
            if (
                drops
                and origin is not None
                and len(origin) > 1
                and origin[1] < drops.get(origin[0], 0)
            ):
                continue  # Delivered by another process before a reshard.
            produced += 1
            yield element, origin

    def _maps_only(self) -> MapChain | None:
        """A `MapChain` of the ops if they are all plain maps, else None (cached)."""
        cached = self.__dict__.get("_maps")
        if cached is None:
            plain = all(op is MapIter and len(args) == 1 and not kw for op, args, kw in self.ops)
            cached = MapChain([args[0] for _, args, _ in self.ops]) if plain else False
            object.__setattr__(self, "_maps", cached)  # Not a field: never compared or sent.
        return cached if isinstance(cached, MapChain) else None

    def _read_ahead(self, start: int, stop: int) -> list[Any] | None:
        """The records of `[start, stop)`, read with the next chunks' in one call.

        For chunks run in order in this process: one read of several chunks costs
        little more than one of a single chunk (a sampler's or a file's per-call
        work), so reads grow while they take under 8 ms (up to `_AHEAD` positions) and
        shrink when one takes over 32 ms, as `SequentialIter`'s do. None if the read
        failed: the chunk is then read alone, and its error raised where it belongs.
        """
        held: tuple[int, list[Any]] | None = self.__dict__.get("_held")
        if held is not None and held[0] <= start and stop <= held[0] + len(held[1]):
            return held[1][start - held[0] : stop - held[0]]
        size = self.__dict__.get("_ahead_size", self.chunk_size)
        began = time.perf_counter()
        span = read_chunk(
            self.dataset, start, min(start + size, len(self.dataset)), self.read_threads, None, 0
        )
        seconds = time.perf_counter() - began
        if seconds < 0.008:
            size = min(2 * size, max(_AHEAD, self.chunk_size))
        elif seconds > 0.032:
            size = max(self.chunk_size, size // 2)
        object.__setattr__(self, "_ahead_size", size)
        end = start + len(span.elements)
        self.prefetch((end, min(len(self.dataset), end + size)))  # What the next read takes.
        if span.error is not None or span.failures or has_dropped(span.elements):
            object.__setattr__(self, "_held", None)
            return None
        object.__setattr__(self, "_held", (start, span.elements))
        return span.elements[: stop - start]

    def _run_maps(
        self,
        chunk: Chunk,
        chain: MapChain,
        read_ahead: bool,
        cancelled: Callable[[], bool] | None = None,
    ) -> tuple[list[Any], Sequence[tuple[int, ...] | None]] | None:
        """A chunk of plain maps, run over the whole list of records at once.

        The same outputs, origins and errors as the stream of `MapIter`s, without an
        iterator per op. None if a read failed or a position was dropped: the stream
        then runs the chunk and says exactly what happened.
        """
        start, stop = self.bounds(chunk)
        elements = self._read_ahead(start, stop) if read_ahead else None
        if elements is None:
            span = read_chunk(self.dataset, start, stop, self.read_threads, None, 0)
            if span.error is not None or span.failures or has_dropped(span.elements):
                return None
            elements = span.elements
        outputs: list[Any] = []
        try:
            if cancelled is None:
                chain.run(elements, start, outputs)
            else:
                run_maps_until(chain, elements, start, outputs, cancelled)
        except ChunkCancelled:
            raise
        except Exception as error:
            error.chute_outputs_before = len(outputs)  # type: ignore[attr-defined]
            raise
        return outputs, ConsecutiveOrigins(start, len(outputs))

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for name in ("_maps", "_held", "_ahead_size", "_fan_out"):
            state.pop(name, None)
        return state

    def run(
        self,
        chunk: Chunk,
        allocate: Allocate | None = None,
        replay: Iterable[Key] = (),
        read_ahead: bool = False,
        trace: ChunkTrace | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> ChunkResult:
        """The outputs of chunk `chunk`, their origins and the elements skipped, in order.

        With `stack`, `allocate` (see `chute_transforms.stacking_into`) gives the memory
        to stack the array leaves into, e.g. a worker's shared-memory slab. `replay`:
        elements of this chunk skipped before a restore (`(stage, origin)`, the plan's
        own stage numbers), skipped again without running them. `read_ahead`: chunks
        are being run in order in this process, so a plan of plain maps may read the
        next chunks' records with this one's (see `_read_ahead`); the outputs are the
        same. `trace`: told when the stages and the stacking are done. `cancelled`:
        asked between elements (see `_chunk_cancel`); once it says yes, the chunk stops
        with `ChunkCancelled`.
        """
        fast = None if self.timed or self.skip_errors or self.drops else self._maps_only()
        if read_ahead and fast is None:  # Run in order here: the next span comes next.
            start, stop = self.bounds(chunk)
            self.prefetch((stop, min(len(self.dataset), 2 * stop - start)))
        computed = None if fast is None else self._run_maps(chunk, fast, read_ahead, cancelled)
        if computed is not None:
            outputs, origins = computed
            skips: tuple[Skip, ...] = ()
            times: tuple[StageTime, ...] = ()
        else:
            outputs, origins = [], []
            ledger = self.ledger(replay)
            clocks: list[StageClock] | None = [] if self.timed else None
            try:
                for element, origin in self.iterate(chunk, ledger, clocks):
                    outputs.append(element)
                    origins.append(origin)
                    if cancelled is not None and cancelled():
                        raise ChunkCancelled(
                            f"stopped after {len(outputs)} outputs: nobody wants this chunk"
                        )
            except ChunkCancelled:
                raise
            except Exception as error:
                # How many outputs came before the failure: the consumer hands those out
                # before raising, as a single process would (see `outputs_before`).
                error.chute_outputs_before = len(outputs)  # type: ignore[attr-defined]
                raise
            skips = () if ledger is None else tuple(ledger.reports)
            times = () if clocks is None else tuple((c.elements, c.seconds) for c in clocks)
        if trace is not None:
            trace.ran(times, len(outputs))
        result: Any = outputs
        if self.stack:
            if not outputs:
                result = None
            else:
                try:
                    if allocate is None:
                        result = batch_elements(outputs)
                    else:
                        with stacking_into(allocate):
                            result = batch_elements(outputs)
                except BatchError:
                    result = Unstacked(outputs)
        if trace is not None:
            trace.stacked(self.stack and bool(outputs))
        return ChunkResult(result, origins, skips, times)
