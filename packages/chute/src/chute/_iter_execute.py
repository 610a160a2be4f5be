"""How and where a stream's elements are produced: `IterDataset`'s execution ops.

`prefetch` (a thread ahead), `mp_prefetch` and `ray_prefetch` (the pipeline so far on
worker processes or a Ray cluster: one planner, two backends, see `plan_workers`),
`skip_errors` (an error budget), `cache` (the first pass kept in memory) and
`to_device` (batches on accelerators, the last stage). None changes which elements come
out: each returns a new dataset of the same kind (`Self`), but `to_device`, after which
no op may follow.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Self, TypeVar

from chute_core import ErrorBudget
from chute_device import TO_DEVICE  # Declares to_device; jax loads only with devices.
from chute_execution import MultiprocessingOptions, RayOptions, ThreadPrefetchIter
from chute_execution.internal import add_preload, warm_up
from chute_samplers import CacheIter

from ._args import check_chunk_size, check_device_buffers, check_int
from ._factories import MultiprocessFactory, SkipErrorsFactory, plan_request
from ._iter_base import IterBase
from ._mp_stage import mp_prefetch_stage
from ._pipeline import has_stage, stage

__all__ = ["ExecuteOps"]

T = TypeVar("T")


class ExecuteOps(IterBase[T]):
    """`prefetch`, `mp_prefetch`, `ray_prefetch`, `skip_errors`, `cache`, `to_device`."""

    __slots__ = ()

    def prefetch(self, buffer_size: int) -> Self:
        """Produces up to `buffer_size` elements ahead on a background thread.

        The state counts only elements handed out, so a checkpoint never loses what
        was in the buffer.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(5).to_iter_dataset().prefetch(2)
            >>> list(ds)
            [0, 1, 2, 3, 4]
        """
        buffer_size = check_int(buffer_size, "buffer_size", "IterDataset.prefetch")
        return self._then(
            ThreadPrefetchIter, stage("prefetch", buffer_size=buffer_size), buffer_size
        )

    def mp_prefetch(
        self,
        options: MultiprocessingOptions | None = None,
        worker_init_fn: Callable[[int, int], Any] | None = None,
        *,
        chunk_size: int | None = None,
        **option_values: Any,
    ) -> Self:
        """Runs the pipeline so far on worker processes; the output does not change.

        Work is cut into chunks of `chunk_size` consecutive positions of the dataset
        the pipeline reads; maps, filters, flat maps and random maps run on the
        workers, chunk by chunk, and the results are put back in order, so 0, 1 or 8
        workers yield the same elements in the same order (and a checkpoint restores
        with any number of workers). Stages that need the whole stream (batch,
        map_with_index, window shuffle, ...) run in this process on the merged stream.
        Transforms must be picklable (module-level functions or classes).

        Unless the options give a `num_workers` (or `autotune=False`), the autotuner
        picks the workers while the iterator runs, starting from none (see
        `MultiprocessingOptions`); give `num_workers=` for a fixed count.

        Args:
            options: `MultiprocessingOptions(num_workers, per_worker_buffer_size)`.
            worker_init_fn: called as `fn(worker_index, num_workers)` in each worker.
            chunk_size: positions per unit of work; it never changes the elements. By
                default 64 elements, whole batches when the workers batch (a `.batch`
                right after), or 1 when the positions are whole batches (a
                `MapDataset.batch` before `to_iter_dataset`), and at most 1/16 of a short
                dataset, so that several workers share it. Never the worker count: a
                checkpoint counts chunks, so it restores with any number of workers.
            **option_values: the fields of `MultiprocessingOptions` instead of `options`,
                e.g. `mp_prefetch(num_workers=2)`.

        Raises:
            TypeError: `options` is not a `MultiprocessingOptions` (a worker count is
                given as `num_workers=`), or both it and `option_values` are given.

        Example:
            >>> import chute, operator
            >>> ds = chute.MapDataset.range(8).to_iter_dataset().map(operator.neg)
            >>> list(ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=0)))
            [0, -1, -2, -3, -4, -5, -6, -7]
            >>> list(ds.mp_prefetch(num_workers=0)) == list(ds)
            True
        """
        chosen = _options("mp_prefetch", MultiprocessingOptions, options, option_values)
        if chosen.num_workers or chosen.autotune is not False:
            add_preload("chute")  # The fork server imports chute once, for every worker.
            warm_up(chosen.start_method)  # Workers will then start in milliseconds.
        return self._in_workers("mp_prefetch", chosen, worker_init_fn, chunk_size)

    def ray_prefetch(
        self,
        options: RayOptions | None = None,
        worker_init_fn: Callable[[int, int], Any] | None = None,
        *,
        chunk_size: int | None = None,
        **option_values: Any,
    ) -> Self:
        """Runs the pipeline so far as tasks on a Ray cluster; the output does not change.

        The plan of `mp_prefetch`, with another backend: each chunk of positions is a
        Ray task, retried elsewhere if its worker dies, and the chunks are put back in
        order here. So the elements, and the checkpoint, are those of `mp_prefetch`
        with any number of workers: a state saved under Ray restores with local
        workers, and back. Needs `ray` (`pip install chute-execution[ray]`).

        Args:
            options: `RayOptions(num_workers, address, ...)`: the cluster and how many
                chunks run at once (by default, 2 on the cluster this process joined,
                or on a local one started for it).
            worker_init_fn: called as `fn(worker_index, num_workers)` once in each Ray
                worker process, before its first chunk.
            chunk_size: positions per task, as for `mp_prefetch`.
            **option_values: the fields of `RayOptions` instead of `options`, e.g.
                `ray_prefetch(num_workers=8, address="auto")`.

        Example:
            >>> from chute import IterDataset
            >>> import chute, operator
            >>> ds = chute.MapDataset.range(8).to_iter_dataset().map(operator.neg)
            >>> ds.ray_prefetch(chute.RayOptions(num_workers=2))
            IterDataset
              source(RangeSource(start=0, stop=8, step=1))
              .to_iter_dataset()
              .map(fn=neg)
              .ray_prefetch(num_workers=2)
        """
        chosen = _options("ray_prefetch", RayOptions, options, option_values)
        return self._in_workers("ray_prefetch", chosen, worker_init_fn, chunk_size)

    def _in_workers(
        self,
        name: str,
        options: MultiprocessingOptions | RayOptions,
        worker_init_fn: Callable[[int, int], Any] | None,
        chunk_size: int | None,
    ) -> Self:
        if has_stage(self._factory.stages, lambda traits: traits.consumer_only):
            raise ValueError(
                f"{name} cannot follow to_device: worker processes never touch jax. "
                f"Call {name} first and to_device last."
            )
        request = plan_request(self._factory, options, worker_init_fn, check_chunk_size(chunk_size))
        tuned = isinstance(options, MultiprocessingOptions) and options.autotune is not False
        item = functools.partial(
            mp_prefetch_stage, options.num_workers, shown_as=name, autotune=tuned
        )
        return self._construct(MultiprocessFactory(self._factory, request, item), self._seed)

    def skip_errors(self, max_failures: int = 0, *, max_failure_rate: float = 0.0) -> Self:
        """Skips elements that fail in the stages before this one, up to a budget.

        An element whose read (a corrupt record, a truncated file) or per-element
        transform (map, random map, filter, flat map, ..., also in worker processes)
        raises is left out instead of ending the iteration, while the failures stay
        within `max_failures + floor(max_failure_rate * elements read)`; the failure
        past that raises `chute.ErrorBudgetExceededError`, naming it and the ones
        skipped before. The skips depend only on the elements: the same with any number
        of workers or threads, on every host. The iterator's `failures` and `skipped`
        say what was left out; the checkpoint state records it, so a restored iterator
        counts on and skips the same elements again. Errors that are not one element's
        (a batch that does not stack, a dead worker) still raise.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(6).to_iter_dataset().map(lambda x: 12 // (x % 3))
            >>> it = iter(ds.skip_errors(max_failures=2))
            >>> list(it), it.failures
            ([12, 6, 12, 6], 2)
        """
        budget = ErrorBudget(max_failures, max_failure_rate)
        params: dict[str, Any] = {"max_failures": max_failures}
        if max_failure_rate:
            params["max_failure_rate"] = max_failure_rate
        item = stage("skip_errors", **params)
        return self._construct(SkipErrorsFactory(self._factory, budget, item), self._seed)

    def cache(self) -> Self:
        """Keeps the stream's first pass in memory and replays it when repeated.

        Memory: every element of the stream (its whole first pass) stays in each
        iterator for that iterator's lifetime, so cache only a stream that fits.
        After the first pass, `repeat()` after the cache replays the elements from
        memory without running the stages before it again (as Grain's
        `CacheIterDataset`). The state holds positions only: restored into a new
        iterator, the cache is rebuilt by reading the stream again up to there.

        Example:
            >>> import chute
            >>> calls = []
            >>> ds = chute.MapDataset.range(3).to_iter_dataset().map(lambda x: calls.append(x) or x)
            >>> list(ds.cache().repeat(2)), calls
            ([0, 1, 2, 0, 1, 2], [0, 1, 2])
        """
        return self._then(CacheIter, stage("cache"))

    def to_device(
        self,
        device: Any,
        *,
        cpu_buffer_size: int = 2,
        device_buffer_size: int = 2,
        lockstep: bool | None = None,
    ) -> IterBase[Any]:
        """Batches as `jax.Array`s on `device`, prepared and transferred ahead of use.

        `device` is a `jax.Device`, a `jax.sharding.Sharding` or a pytree of shardings.
        With a sharding over several JAX processes, each process's batches are its local
        rows (see `MapDataset.batch(..., sharding=...)`) and come out as global arrays.
        Checkpoints count only batches handed out (see `chute_device.DevicePutIter`).
        This must be the last stage; jax is imported only when it is used.

        Example:
            >>> import chute, jax
            >>> ds = chute.MapDataset.range(6).batch(3).to_iter_dataset()
            >>> [b.tolist() for b in ds.to_device(jax.devices()[0])]
            [[0, 1, 2], [3, 4, 5]]
        """
        from ._device import device_put_op

        cpu_buffer_size, device_buffer_size = check_device_buffers(
            cpu_buffer_size, device_buffer_size
        )
        item = stage(TO_DEVICE.name, device=device)
        return self._then(
            device_put_op,
            item,
            device,
            cpu_buffer_size=cpu_buffer_size,
            device_buffer_size=device_buffer_size,
            lockstep=lockstep,
        )


def _options(owner: str, kind: type[Any], given: Any, values: dict[str, Any]) -> Any:
    """`given`, or a `kind` made of `values` (the default one if neither is given)."""
    if given is not None and values:
        raise TypeError(
            f"{owner}: give options={kind.__name__}(...) or its fields as keywords "
            f"({', '.join(sorted(values))}), not both."
        )
    if given is None:
        try:
            return kind(**values)
        except TypeError as error:
            fields = ", ".join(field.name for field in dataclasses.fields(kind))
            raise TypeError(f"{owner}: {error}; the fields of {kind.__name__}: {fields}.") from None
    if not isinstance(given, kind):
        hint = f" (for a worker count, write {owner}(num_workers={given!r}))"
        raise TypeError(
            f"{owner}: options must be a chute.{kind.__name__}, got {type(given).__name__} "
            f"{given!r}{hint if isinstance(given, int) else ''}."
        )
    return given
