"""`MultiprocessBatchIter`: workers stack their chunks; the consumer slices out batches.

The batches equal `BatchIter` over `MultiprocessPrefetchIter` of the same plan (the
elements of each batch, its dtypes, remainder and padding), and so do the states:
`{"parent": {"position": p, "offset": k}}` at the start of the next batch, and so do
the elements an error budget skips, charged as the rows after them are taken. But the
stacking runs in the workers, and a batch that lies within one chunk reaches the
consumer without any copy beyond the one out of shared memory (a batch across chunks
costs one `np.concatenate`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from chute_core import InvalidStateError, IteratorState
from chute_core.internal import check_count, state_dict, state_parent
from chute_samplers import IterNode
from chute_transforms import batch_elements, batch_rows, concat_batches, pad_batch, slice_batch

from ._autotune_options import TuningDecision
from ._chunk_plan import ChunkPlan, Unstacked, outputs_before
from ._mp_options import MultiprocessingOptions
from ._mp_prefetch import MultiprocessPrefetchIter
from ._ray_options import RayOptions
from ._tuning_memory import TuningMemory
from ._worker_pool import WorkerDiedError, WorkerTimeoutError

__all__ = ["MultiprocessBatchIter", "chunk_iterator"]


class MultiprocessBatchIter(IterNode[Any]):
    """Batches of `batch_size` outputs of a plan whose chunks the workers stack.

    Args:
        plan: the chunked pipeline; its `stack` is set here.
        options: the workers (local processes, or a Ray cluster's with `RayOptions`).
        batch_size: outputs per batch.
        drop_remainder: leave out a last short batch.
        pad: pad a short batch with zeros; every batch is then a `(batch, mask)` pair.
        worker_init_fn: called as `fn(worker_index, num_workers)` in each worker.
        caller: how messages name what runs the workers (e.g. `DataLoader(...)`).
        tuning_memory: where the autotuner of this plan's last iterator settled (see
            `MultiprocessPrefetchIter`).

    Example:
        >>> plan = ChunkPlan(range(7), chunk_size=3)
        >>> it = MultiprocessBatchIter(plan, MultiprocessingOptions(0), batch_size=2)
        >>> [batch.tolist() for batch in it]
        [[0, 1], [2, 3], [4, 5], [6]]
    """

    def __init__(
        self,
        plan: ChunkPlan,
        options: MultiprocessingOptions | RayOptions,
        batch_size: int,
        *,
        drop_remainder: bool = False,
        pad: bool = False,
        worker_init_fn: Callable[[int, int], Any] | None = None,
        caller: str = "mp_prefetch",
        tuning_memory: TuningMemory | None = None,
    ) -> None:
        self._size = check_count(batch_size, "batch_size", "MultiprocessBatchIter", minimum=1)
        if drop_remainder and pad:
            raise ValueError("MultiprocessBatchIter: drop_remainder and pad contradict.")
        self._drop_remainder, self._pad = drop_remainder, pad
        self._plan = dataclasses.replace(plan, stack=True, adaptive=False)
        self._chunks = chunk_iterator(self._plan, options, worker_init_fn, caller, tuning_memory)
        self._failure: Exception | None = None  # Of the loaded chunk, after its last row.
        self._num_chunks = plan.num_chunks
        self._chunk, self._offset = 0, 0
        self._cached: tuple[int, Any, int, Sequence[Any]] | None = None
        self._last_origin: Any = None

    def _load(self, chunk: int) -> tuple[Any, int, Sequence[Any]]:
        if self._cached is None or self._cached[0] != chunk:
            self._failure = None
            try:
                stacked, origins, skips, *_ = self._chunks.chunk_result(chunk)
            except (WorkerDiedError, WorkerTimeoutError, InvalidStateError):
                raise
            except Exception as error:
                # The rows before the failure are handed out first, as without workers.
                replay = self._chunks.replay_for(chunk)  # The plan the workers run now:
                plan = self._chunks.plan  # through a resharded state's skips.
                outputs, origins, skips, *_ = outputs_before(plan, chunk, error, replay)
                stacked, self._failure = Unstacked(outputs), error
            if stacked is None:
                rows = 0
            else:
                rows = len(stacked) if isinstance(stacked, Unstacked) else batch_rows(stacked)
            self._cached = (chunk, stacked, rows, origins)
            self._chunks.set_skips(skips)  # Charged as their rows are taken.
        return self._cached[1], self._cached[2], self._cached[3]

    def _charge(self, upto: int) -> None:
        """Charges the skipped elements before output `upto` of the loaded chunk."""
        if self._chunks.next_skip <= upto:
            self._chunks.charge_skips(upto)

    def __next__(self) -> Any:
        chunk, offset = self._chunk, self._offset
        pieces: list[Any] = []
        first_origin = None
        need = self._size
        while need and chunk < self._num_chunks:
            stacked, rows, origins = self._load(chunk)
            if offset > rows:
                raise InvalidStateError(
                    f"the state's offset {offset} is past the {rows} outputs of chunk {chunk}"
                )
            take = min(need, rows - offset)
            if take:
                self._charge(offset + take - 1)
                if not pieces:
                    first_origin = origins[offset]
                if isinstance(stacked, Unstacked):  # Batched here, as BatchIter would.
                    pieces.append(batch_elements(stacked[offset : offset + take]))
                else:
                    pieces.append(slice_batch(stacked, offset, offset + take))
                offset += take
                need -= take
            if offset == rows and need and self._failure is not None:
                self._charge(rows)
                raise self._failure  # The batch it falls in is lost, as with BatchIter.
            if offset == rows and (need or self._chunks.next_skip > rows):
                self._charge(rows)  # Skips after its last row, when more rows are needed.
                chunk, offset = chunk + 1, 0
        if not pieces or (need and self._drop_remainder):
            self._chunk, self._offset = chunk, offset
            self._chunks.close()
            raise StopIteration
        self._chunk, self._offset = chunk, offset
        self._last_origin = first_origin
        batch = pieces[0] if len(pieces) == 1 else concat_batches(pieces)
        if not self._pad:
            return batch
        if need:
            return pad_batch(batch, self._size)
        return batch, np.ones(self._size, np.bool_)

    @property
    def origin(self) -> tuple[int, ...] | None:
        return self._last_origin  # type: ignore[no-any-return]

    def get_state(self) -> IteratorState:
        around: Sequence[Any] = ()
        cached = self._cached
        if self._offset and cached is not None and cached[0] == self._chunk:
            around = cached[3][self._offset - 1 : self._offset + 1]
        return {"parent": self._chunks.state_at(self._chunk, self._offset, *around)}

    def set_state(self, state: IteratorState, /) -> None:
        parent = state_parent(self, state_dict(self, state, ("parent",)))
        self._chunks.set_state(parent)  # Validates, and forgets work in flight.
        self._chunk, self._offset = self._chunks.cursor()
        self._cached = None

    @property
    def observer(self) -> Callable[[tuple[tuple[int, float], ...]], None] | None:
        """Told each chunk's stage times as they arrive (metrics); see the prefetch's."""
        return self._chunks.observer

    @observer.setter
    def observer(self, value: Callable[[tuple[tuple[int, float], ...]], None] | None) -> None:
        self._chunks.observer = value

    def stage_times(self) -> list[tuple[int, float]]:
        """Per stage of the workers' plan: elements and seconds (see the prefetch's)."""
        return self._chunks.stage_times()

    @property
    def tuning(self) -> tuple[TuningDecision, ...]:
        """The autotuner's changes so far (see the prefetch's)."""
        return self._chunks.tuning

    @property
    def num_workers(self) -> int:
        """The worker processes running now (see the prefetch's)."""
        return self._chunks.num_workers

    def close(self) -> None:
        """Ends the workers' work (also at exhaustion and GC); they park or stop."""
        self._chunks.close()

    def __repr__(self) -> str:
        return f"MultiprocessBatchIter(batch_size={self._size}, {self._chunks!r})"


def chunk_iterator(
    plan: ChunkPlan,
    options: MultiprocessingOptions | RayOptions,
    worker_init_fn: Callable[[int, int], Any] | None = None,
    caller: str = "mp_prefetch",
    tuning_memory: TuningMemory | None = None,
) -> MultiprocessPrefetchIter:
    """The iterator that runs `plan`'s chunks where `options` say: local processes or Ray.

    Example:
        >>> it = chunk_iterator(ChunkPlan(range(3), chunk_size=2), MultiprocessingOptions(0))
        >>> list(it)
        [0, 1, 2]
    """
    if isinstance(options, RayOptions):
        from ._ray_prefetch import RayPrefetchIter  # ray loads only when it is used.

        return RayPrefetchIter(plan, options, worker_init_fn, caller)
    return MultiprocessPrefetchIter(plan, options, worker_init_fn, caller, tuning_memory)
