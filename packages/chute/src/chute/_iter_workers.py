"""How an `IterDataset` hands its pipeline so far to workers: processes or a Ray cluster."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from chute_execution import MultiprocessingOptions, RayOptions
from chute_execution.internal import add_preload, warm_up

from ._args import check_chunk_size
from ._factories import Factory, MultiprocessFactory, plan_request
from ._mp_stage import mp_prefetch_stage
from ._pipeline import has_stage

if TYPE_CHECKING:
    from ._iter_dataset import IterDataset

__all__ = ["WorkersMixin"]

T = TypeVar("T")


class WorkersMixin(Generic[T]):
    """`mp_prefetch` and `ray_prefetch`: one planner, two backends (see `plan_workers`)."""

    __slots__ = ()
    _factory: Factory
    _seed: int | None

    def mp_prefetch(
        self,
        options: MultiprocessingOptions | None = None,
        worker_init_fn: Callable[[int, int], Any] | None = None,
        *,
        chunk_size: int | None = None,
        **option_values: Any,
    ) -> IterDataset[T]:
        """Runs the pipeline so far on worker processes; the output does not change.

        Work is cut into chunks of `chunk_size` consecutive positions of the dataset
        the pipeline reads; maps, filters, flat maps and random maps run on the
        workers, chunk by chunk, and the results are put back in order, so 0, 1 or 8
        workers yield the same elements in the same order (and a checkpoint restores
        with any number of workers). Stages that need the whole stream (batch,
        map_with_index, window shuffle, ...) run in this process on the merged stream.
        Transforms must be picklable (module-level functions or classes).

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
        if chosen.num_workers:
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
    ) -> IterDataset[T]:
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
    ) -> IterDataset[T]:
        from ._iter_dataset import IterDataset

        if has_stage(self._factory.stages, frozenset({"to_device"})):
            raise ValueError(
                f"{name} cannot follow to_device: worker processes never touch jax. "
                f"Call {name} first and to_device last."
            )
        request = plan_request(self._factory, options, worker_init_fn, check_chunk_size(chunk_size))
        item = functools.partial(mp_prefetch_stage, options.num_workers, shown_as=name)
        return IterDataset(MultiprocessFactory(self._factory, request, item), seed=self._seed)


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
