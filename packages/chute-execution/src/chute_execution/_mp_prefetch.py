"""`MultiprocessPrefetchIter`: chunks of a plan run on worker processes, merged in order.

The base positions are cut into units of work (`SpanSchedule`: the `chunk_size` grid, or
adaptive units sized by the measured cost); unit `u` goes to worker `u % num_workers`,
and the consumer takes results strictly in order, so the stream is the one a single
process gives, for any number of workers and any cut (0 workers run the grid's chunks in
this process). The state is `{"position": p, "offset": k}`: the next element is output
`k` of the stream from base position `p` (the start of the current unit). It restores
with any number of workers and any cut, re-running at most one unit; older versions'
`{"chunk": c, "offset": k}` (grid chunk `c`) restore too.

Under an error budget (an active `ErrorLedger` when the iterator is built), the plan
skips failing elements and reports them with each chunk; the consumer charges each to
the budget when it reaches its place among the outputs, as a single process would.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import sys
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from chute_core import ChuteError, InvalidStateError, IteratorState, StageTraits, declare_op
from chute_core.internal import COUNTERS, active_ledger, state_dict, state_int
from chute_samplers import IterNode
from chute_samplers.internal import Frontier

from ._chunk_plan import ChunkPlan, ChunkResult, Skip, outputs_before
from ._chunk_skips import ChunkSkips
from ._consumer_trace import ConsumerTrace
from ._leases import LeaseBook, default_budget
from ._mp_options import WORKER_KNOBS, MultiprocessingOptions
from ._mp_resources import Resources as _Resources
from ._mp_resources import WorkerError, rebuild_failure
from ._shipping import ship
from ._spans import SpanSchedule
from ._transport.codec import SlabMessage
from ._tuning import Tuning
from ._tuning_memory import TuningMemory
from ._unit_state import Drops, UnitStates, reading_through, split_extras
from ._worker import WorkerFailure
from ._worker_pool import WorkerDiedError, WorkerPool, WorkerTimeoutError

__all__ = ["MP_PREFETCH", "MultiprocessPrefetchIter", "WorkerError"]


class MultiprocessPrefetchIter(ChunkSkips, Tuning, UnitStates, IterNode[Any]):
    """Runs a `ChunkPlan` on worker processes and yields its outputs in order.

    Args:
        plan: the chunked pipeline (shipped once for the workers, when this iterator
            is made: what cannot travel to a worker is refused here, before any starts).
        options: workers and how many chunks each may work ahead.
        worker_init_fn: called as `fn(worker_index, num_workers)` in each worker first.
        caller: what the user called, to start error messages with.
        tuning_memory: where the autotuner of this plan's last iterator settled: an
            autotuned iterator starts there and leaves its own settling in it.

    Results come back through each worker's shared-memory slabs: array bytes are never
    pickled. Large arrays (a result with 1 MiB of them or more) reach the user as
    writable views into the slab, leased to them until the last such array is garbage
    (the worker uses another slab meanwhile); beyond 1 GiB of leased slabs (or a
    quarter of `/dev/shm`), and for small arrays, the consumer copies the bytes out
    once. Either way, a batch stays valid and unchanged for as long as it is held.

    Example:
        >>> from chute_transforms import MapIter
        >>> plan = ChunkPlan(range(10), [(MapIter, (abs,), {})], chunk_size=4)
        >>> it = MultiprocessPrefetchIter(plan, MultiprocessingOptions(num_workers=0))
        >>> [next(it), next(it)], it.get_state()
        ([0, 1], {'position': 0, 'offset': 2, 'through': 2})
        >>> list(it)
        [2, 3, 4, 5, 6, 7, 8, 9]
    """

    def __init__(
        self,
        plan: ChunkPlan,
        options: MultiprocessingOptions,
        worker_init_fn: Callable[[int, int], Any] | None = None,
        caller: str = "mp_prefetch",
        tuning_memory: TuningMemory | None = None,
    ) -> None:
        self._plan, self._options, self._caller = plan, options, caller
        self._resources = _Resources()
        self._leases = LeaseBook(default_budget())
        self._pool_serial = 0
        self._finalizer = weakref.finalize(self, self._resources.release)
        self._chunk = self._first_unit = 0  # The first unit since the start or restore.
        self._offset = self._generation = self._next_submit = 0
        self._outputs: list[Any] | None = None
        self._failure: Exception | None = None  # Raised once the outputs before it are out.
        self._origins: Sequence[tuple[int, ...] | None] = []
        self._last_origin: tuple[int, ...] | None = None
        self.start_tuning(options, tuning_memory)  # Tuned: the cut is for the most workers.
        tuned, most = self._tuner is not None, self.most_workers()
        adaptive = plan.adaptive and most > 0
        self._spans = SpanSchedule(
            len(plan.dataset), plan.chunk_size, adaptive=adaptive, workers=most
        )
        self._sent: dict[int, float] = {}  # Unit -> when it was sent (adaptive timing).
        self._carry = False  # Whether the restored offset may run past the first unit.
        self._heard: list[float] = []  # Per worker: when its last result came.
        self._in_flight: list[collections.deque[tuple[int, int]]] = []
        self._stage_times: list[list[Any]] = []
        self.observer: Callable[[tuple[tuple[int, float], ...]], None] | None = None  # Metrics
        self._ledger = active_ledger()
        self._skips: tuple[Skip, ...] = ()  # Of the current chunk, not yet charged.
        self._skip_at = sys.maxsize  # The output before which the next skip is charged.
        if self._ledger is not None:
            self._plan = dataclasses.replace(self._plan, skip_errors=True)
            self._stages = plan.count_stages()
            self._first_stage = self._ledger.register(self._stages)
        self._trace = ConsumerTrace.active(self._plan)  # Built under `tracing`: recorded.
        if self._trace is not None:
            self._plan = self._trace.plan
        self._frontier: Frontier | None = None  # Positions a resharded restore skips.
        self._drops: Drops = ()  # Outputs of split elements a resharded restore leaves out.
        self._restored = None
        self._shipped: tuple[bytes, bytes | None] | None = None
        if options.num_workers or tuned:
            init = None
            if worker_init_fn is not None:
                init = ship(worker_init_fn, [("worker_init_fn", worker_init_fn)], caller)
            self._shipped = (ship(self._plan, self._plan.parts(), caller), init)

    def _skip(self, frontier: Frontier | None, drops: Drops = ()) -> None:
        """Reads the base through `frontier`, leaving out `drops` (workers get the new plan)."""
        if (frontier, drops) == (self._frontier, self._drops):
            return
        self._frontier, self._drops = frontier, drops
        self._plan = reading_through(self._plan, frontier, drops)
        if self._trace is not None:
            self._trace.plan = reading_through(self._trace.plan, frontier, drops)
        if self._shipped is not None:
            self._resources.release()  # The next chunk starts workers with the new plan.
            self._shipped = (ship(self._plan, self._plan.parts(), self._caller), self._shipped[1])
            self._reshipped()

    def _reshipped(self) -> None:
        """Called when the plan the workers run changed (`_shipped`); for subclasses."""

    # --- the stream -------------------------------------------------------------------

    def __next__(self) -> Any:
        while True:
            outputs = self._outputs
            if outputs is not None:
                if self._offset < len(outputs):
                    if self._offset >= self._skip_at:
                        self.charge_skips(self._offset)
                    self._last_origin = self._origins[self._offset]
                    self._offset += 1
                    return outputs[self._offset - 1]
                if self._skip_at <= len(outputs):
                    self.charge_skips(len(outputs))
                if self._failure is None:
                    self._chunk, self._offset, self._outputs = self._chunk + 1, 0, None
                    self._spans.forget_before(self._chunk)
            if (failure := self._failure) is not None:
                self._failure = self._outputs = None
                raise failure  # After the chunk's outputs that came before it.
            span = self._spans.span(self._chunk)
            if span is None:
                if self._offset:
                    raise InvalidStateError(
                        f"the state's offset goes {self._offset} outputs past the end of the "
                        "stream: the state belongs to another pipeline."
                    )
                self.close()
                raise StopIteration
            try:
                outputs, origins, skips, *_ = self.chunk_result(self._chunk)
            except (WorkerDiedError, WorkerTimeoutError, InvalidStateError):
                raise
            except Exception as error:
                replay = self.replay_for(self._chunk)
                outputs, origins, skips, *_ = outputs_before(self._plan, span, error, replay)
                if self._offset >= len(outputs):
                    self.set_skips(skips)
                    self.charge_skips(len(outputs))
                    raise
                self._failure = error
            if self._offset > len(outputs):
                if not self._carry and self._spans.is_grid_chunk(span):
                    raise InvalidStateError(
                        f"the state's offset {self._offset} is past the {len(outputs)} outputs "
                        f"of chunk {self._chunk}: the state belongs to another pipeline."
                    )
                # A state saved in a longer unit: its outputs go on in the next ones.
                self._offset -= len(outputs)
                self._chunk += 1
                continue
            self._outputs, self._origins = outputs, origins
            self.set_skips(skips)

    @property
    def origin(self) -> tuple[int, ...] | None:
        return self._last_origin

    @property
    def dataset(self) -> Any:
        """The dataset the workers read in order (origins `(p,)` are its positions)."""
        return self._plan.dataset

    def get_state(self) -> IteratorState:
        chunk, offset = self._chunk, self._offset
        if (
            self._outputs is not None
            and self._offset == len(self._outputs)
            and self._failure is None
            and self._skip_at > self._offset
        ):
            chunk, offset = chunk + 1, 0
        around: Sequence[tuple[int, ...] | None] = ()
        if offset and self._outputs is not None and offset <= len(self._origins):
            around = self._origins[offset - 1 : offset + 1]
        return self.state_at(chunk, offset, *around)

    def unit_start(self, chunk: int) -> int:
        """The base position unit `chunk` starts at (the length, past the end)."""
        span = self._spans.span(chunk)
        return len(self._plan.dataset) if span is None else span[0]

    def cursor(self) -> tuple[int, int]:
        """`(unit, offset)`: the unit the next output comes from, and its index there."""
        return self._chunk, self._offset

    def set_state(self, state: IteratorState, /) -> None:
        """Moves to the output `state` names; the workers start again from there.

        Raises:
            InvalidStateError: a field is malformed or out of range, before any chunk
                runs: the position is past the dataset, or the offset past the outputs
                the plan can give from there (its `max_fan_out` times the positions
                left; unbounded after a flat map without a declared fan-out, where an
                offset past the stream's outputs is found when they run out).
        """
        state, frontier, drops, before = split_extras(
            state, type(self).__name__, len(self._plan.dataset)
        )
        keys = ("position", "offset") if isinstance(state, dict) and "position" in state else None
        checked = state_dict(self, state, keys or ("chunk", "offset"))
        length = len(self._plan.dataset)
        if keys is not None:
            position = state_int(self, checked, "position", maximum=length)
            left = length - position  # The offset counts outputs from there on.
        else:
            chunk = state_int(self, checked, "chunk", maximum=self._plan.num_chunks)
            position = min(chunk * self._plan.chunk_size, length)
            left = min(self._plan.chunk_size, length - position)  # Within grid chunk `chunk`.
        fan_out = self._plan.max_fan_out
        most = sys.maxsize if fan_out is None else min(sys.maxsize, left * fan_out)
        offset = state_int(self, checked, "offset", maximum=most)
        self._skip(None if frontier is None else frontier.after(position), drops)
        self._chunk = self._first_unit = self._spans.restart(position)
        self._offset, self._outputs = offset, None
        self.restored(self._chunk, offset, before)
        # A state saved in a unit of another cut may count outputs past this first unit.
        self._carry = keys is not None or self._spans.adaptive
        self._failure = None
        self.set_skips(())
        self._restart()

    # --- chunks ---------------------------------------------------------------------

    def chunk_result(self, chunk: int) -> ChunkResult:
        """The whole result of chunk `chunk`: from a worker, or run here with 0 workers.

        The chunk-level API (with `set_skips`, `next_skip`, `charge_skips` and
        `replay_for`) for iterators that consume whole chunks rather than elements,
        such as `MultiprocessBatchIter`. Chunks must be asked for in order (the
        workers run ahead on the next ones); a restore starts again with `set_state`.

        Raises:
            WorkerDiedError: the worker running the chunk died (the workers stop).
            Exception: what running the chunk raised, as a single process would.
        """
        began = 0.0 if self._tuner is None else self.tuned_before(chunk)
        if self._options.num_workers == 0:
            span, replay = self.span_of(chunk), self.replay_for(chunk)
            run = self._plan.run if self._trace is None else self._trace.runner(chunk)
            result = run(span, replay=replay, read_ahead=True)
        else:
            result = self._remote_result(chunk)
        if result.times:
            self._add_times(result)
        if self._tuner is not None:
            self.tuned_after(self.span_of(chunk), began)
        return result

    def span_of(self, chunk: int) -> tuple[int, int]:
        """The base positions of unit `chunk` (see `SpanSchedule`)."""
        span = self._spans.span(chunk)
        if span is None:
            raise InvalidStateError(f"{self!r}: unit {chunk} is past the end of the stream.")
        return span

    def worker_of(self, chunk: int) -> int:
        """The worker that runs unit `chunk`: in turn from worker 0 at the first unit.

        So after a restore the first unit goes to the worker that starts first.
        """
        return (chunk - self._first_unit) % max(1, self._options.num_workers)

    def sent(self, chunk: int) -> None:
        """Notes when unit `chunk` went to its worker (for the adaptive cut's timing)."""
        if self._spans.adaptive:
            self._sent[chunk] = time.monotonic()

    def heard(self, chunk: int) -> None:
        """Notes that unit `chunk`'s result arrived: its worker's time feeds the cut."""
        if (sent := self._sent.pop(chunk, None)) is None:
            return
        worker = self.worker_of(chunk)
        self._heard.extend([0.0] * (worker + 1 - len(self._heard)))
        now = time.monotonic()
        start, stop = self.span_of(chunk)
        self._spans.observe(stop - start, now - max(sent, self._heard[worker]))
        self._heard[worker] = now

    def _remote_result(self, chunk: int) -> ChunkResult:
        """Chunk `chunk` from the workers (the backend: here, local worker processes)."""
        try:
            return self._receive(self._ensure_pool(), chunk)
        except WorkerDiedError:
            self.close()
            raise

    def _add_times(self, result: ChunkResult) -> None:
        if result.counts:
            COUNTERS.merge(result.counts)
        if self.observer is not None:
            self.observer(result.times)
        if not self._stage_times:
            self._stage_times = [[0, 0.0] for _ in result.times]
        for total, (elements, seconds) in zip(self._stage_times, result.times, strict=True):
            total[0] += elements
            total[1] += seconds

    def stage_times(self) -> list[tuple[int, float]]:
        """With a timed plan: per stage (reader, then ops), elements and seconds so far.

        Seconds are the stage's own time summed over all workers (they run at once).
        """
        return [(int(elements), float(seconds)) for elements, seconds in self._stage_times]

    def _receive(self, pool: WorkerPool, chunk: int) -> ChunkResult:
        self._end_leases(pool)
        self._submit_ahead(pool, chunk)
        worker = self.worker_of(chunk)
        expected = self.span_of(chunk)
        while True:
            _, sent_chunk = self._in_flight[worker][0]  # Popped only once answered.
            waited = time.perf_counter_ns()
            message = pool.receive(worker, f"while running chunk {sent_chunk}")
            sent_generation, _ = self._in_flight[worker].popleft()
            try:
                kind, generation, got_chunk, payload = message[:4]  # Traced: + events.
                if kind == "error" and got_chunk == -1:  # The worker could not start.
                    self.close()
                    raise self._rebuild(payload)
                times = (waited, time.perf_counter_ns())
                result = self._read(worker, payload) if kind == "ok" else None
                if self._trace is not None:
                    number = chunk if got_chunk == expected else None
                    self._trace.received(worker, number, times, message, result, self._in_flight)
                if generation != self._generation or sent_generation != self._generation:
                    continue  # Work from before a restore: discard.
                if got_chunk != expected:
                    raise RuntimeError(
                        f"chute: worker {worker} answered {got_chunk}, not {expected}"
                    )
                if kind == "error":
                    self._restart()
                    raise self._rebuild(payload)
                assert result is not None
                self.heard(chunk)
                return result
            except BaseException:
                # Interrupted (Ctrl-C) or failed after the answer was taken: ask again
                # from the current chunk; answers still on their way are discarded.
                self._restart()
                raise

    def _submit_ahead(self, pool: WorkerPool, chunk: int) -> None:
        """Sends the workers the chunks from `chunk` on that are not yet in flight."""
        workers = self._options.num_workers
        ahead = workers * self._options.per_worker_buffer_size
        if self._next_submit <= chunk:
            self._next_submit = chunk  # After a restore, start at the wanted chunk.
        while self._next_submit < chunk + ahead and not self.holding_units():
            target = self._next_submit
            span = self._spans.span(target)
            if span is None:
                break
            task = ("task", self._generation, span, self.replay_for(target))
            pool.send(self.worker_of(target), task)
            self._in_flight[self.worker_of(target)].append((self._generation, target))
            self.sent(target)
            self._next_submit += 1

    def start_prefetch(self) -> None:
        """Starts the worker processes now and gives them the first chunks to run.

        Otherwise they start at the first `next()`. Idempotent; nothing happens with
        0 workers or at the end of the stream. The chunks run from the current state,
        so call it after `set_state` when restoring.
        """
        idle = self._outputs is None and self._spans.span(self._chunk) is not None
        if self._options.num_workers and idle:
            self._submit_ahead(self._ensure_pool(), self._chunk)

    def _read(self, worker: int, message: SlabMessage) -> ChunkResult:
        """A result as views into the worker's slab (leased), or copied out of it."""
        pool, reader = self._resources.pool, self._resources.reader
        if pool is None or reader is None:
            raise ChuteError("the iterator was closed while it waited for a worker")
        if self._tuner is not None:  # What the unit holds: the tuner's memory bound.
            self._slab_bytes = len(message.data) + sum(size for _, size in message.spans)
        leases = self._leases
        if leases.worth_leasing(message):
            assert message.token is not None
            pool.send(worker, ("lease", message.token))
            end = leases.take(self._pool_serial, worker, message.token, message.slab_size)
            try:
                leased: ChunkResult = reader.read_leased(message, end)
            except BaseException:
                end()
                raise
            return leased
        try:
            result: ChunkResult = reader.read(message)
        finally:
            if message.token is not None:
                pool.send(worker, ("release", message.token))
        return result

    def _end_leases(self, pool: WorkerPool) -> None:
        """Tells the workers which leased slabs their batches no longer hold."""
        for serial, worker, token in self._leases.drain():
            if serial == self._pool_serial and not pool.closed:
                try:
                    pool.send(worker, ("release", token))
                except WorkerDiedError:
                    pass  # Reported by the next receive, with what the worker was doing.

    def _rebuild(self, failure: WorkerFailure) -> BaseException:
        return rebuild_failure(failure, self._plan, self._spans.is_grid_chunk)

    def _ensure_pool(self) -> WorkerPool:
        pool = self._resources.pool
        if pool is None or pool.closed:
            self._resources.release()
            assert self._shipped is not None
            plan, init = self._shipped
            start = functools.partial(WorkerPool, plan, self._options, init, self._caller)
            pool = start() if self._trace is None else self._trace.started(start)
            self._resources.start(pool, self._options.per_worker_buffer_size + 1)
            self._pool_serial += 1
            self._in_flight = [collections.deque() for _ in range(self._options.num_workers)]
            self._next_submit = self._chunk
        return pool

    def _restart(self) -> None:
        """Forgets work in flight (its answers will be discarded) and resubmits lazily."""
        self._generation += 1
        self._next_submit = self._chunk

    def _park(self) -> None:
        """Ends the workers' work for now (see `close`): they park, or stop.

        Ended leases are reported first, so their slabs go to the next workers (`SlabPool`).
        """
        if (pool := self._resources.pool) is not None and not pool.closed:
            self._end_leases(pool)
        self._resources.release()

    def __repr__(self) -> str:
        workers, size = self._options.num_workers, self._plan.chunk_size
        return f"MultiprocessPrefetchIter(num_workers={workers}, chunk_size={size})"


MP_PREFETCH = declare_op(
    "mp_prefetch",
    StageTraits(
        keeps_positions=True, chunk="chunk_size", performance=WORKER_KNOBS, names_splits=True
    ),
    iter_node=MultiprocessPrefetchIter,
)
"""The op's declaration (see `chute_core.declare_op`)."""
