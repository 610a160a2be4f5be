"""What a Ray worker runs: one chunk of a shipped plan (a module-level, importable task).

The plan travels once per Ray worker process: the task gets a reference to the shipped
bytes (inside a list, so Ray does not fetch them for every task), and each worker
process keeps the loaded plan under its key. The result travels back through Ray's
object store: array outputs are serialised out of band, so the consumer reads them in
place, without a copy. Like a local worker, a Ray worker has glibc keep the memory it
frees (`keep_freed_memory`), so the arrays of each chunk reuse the last one's pages
instead of faulting in new ones. An exception comes back as a `WorkerFailure` (its type, notes,
traceback and how many outputs came before it), never as a Ray error. A task whose
iterator no longer wants it (closed, restored, or past an error: see `_ray_board`)
returns `("cancelled", None)`: without running its chunk if it has not started, or
between two elements if it has (the board is asked between elements, its answer kept
for `_ray_board.FRESH` seconds), so a closed iterator leaves no chunk running longer
than one element takes.
"""

from __future__ import annotations

from typing import Any

from ._chunk_cancel import ChunkCancelled
from ._ray_board import still_wanted
from ._worker import WorkerFailure, counted, keep_freed_memory, load_plan

__all__ = ["run_chunk"]

_PLANS: dict[str, Any] = {}
"""The plans this Ray worker process has loaded, by key (the most recent few)."""
_KEEP = 4


def run_chunk(
    key: str,
    holder: list[Any],
    chunk: Any,
    replay: tuple[Any, ...],
    worker: int,
    workers: int,
    wanted: tuple[Any, str, int],
) -> tuple[str, Any]:
    """Runs `chunk` (a span) of the plan `key` (shipped in `holder[0]`): `("ok", result)`.

    Or an error. `worker` is the unit's worker index (`unit % workers`): `worker_init_fn` is called
    with it once, in each Ray worker process, before the first chunk of the plan there.
    `wanted` is `(board, token, generation)`: the chunk runs, and goes on from one
    element to the next, only while the board still wants that generation of the
    iterator `token`'s tasks.
    """
    if not still_wanted(*wanted):
        return "cancelled", None
    try:
        plan = _PLANS.get(key)
        if plan is None:
            import ray

            plan_bytes, init_bytes = ray.get(holder[0])
            keep_freed_memory()  # As a local worker: no fresh pages for each chunk's arrays.
            plan = load_plan(plan_bytes, init_bytes, worker, workers)
            while len(_PLANS) >= _KEEP:
                _PLANS.pop(next(iter(_PLANS)))
            _PLANS[key] = plan
        result = plan.run(chunk, replay=replay, cancelled=lambda: not still_wanted(*wanted))
        return "ok", counted(plan, result)
    except ChunkCancelled:
        return "cancelled", None
    except Exception as error:
        return "error", WorkerFailure(error, chunk, worker)
