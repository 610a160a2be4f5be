"""Elastic restore across process counts, for index-based pipelines.

Two kinds of pipeline continue exactly on another number of JAX processes:

- *Global* pipelines have no shard stage: every process walks the same positions, so
  every process has the same state. `MapDataset.batch(global_size, sharding=...)` is
  one: each process builds its own rows of global batch `b`, and the state is `b`.
  Each new process gets that state.
- *Sharded* pipelines have one `.shard(i, n)` stage (stride sharding, also from
  `ShardByJaxProcess` or Loadax's `shard(mesh, data_axis_name)`): shard `i` reads the
  positions `i, i + n, i + 2n, ...`, and each may stop at its own local position `j_i`
  (a preemption, or a filter that kept a different share of each shard). Shard `k` of
  `m` then reads the positions `k, k + m, ...` from the first one nobody consumed, and
  skips the later ones an old shard consumed: a `chute_samplers.Frontier` in its
  reader's state says which. Stages after the shard must keep positions (map, filter,
  batch, prefetching, `to_device`), except one stream flat map, whose element a process
  stopped inside goes back to be read, minus its outputs delivered (`_reshard_splits`),
  and one window shuffle or packer, whose elements held go back to be read, minus the
  ones it yielded (`_reshard_windows`).
  A `MapDataset.batch(b)` after the shard counts positions in batches, which cannot be
  split between processes: such states reshard only from processes in lockstep, and
  where `j * n` splits into whole batches.

Anything else (global pipelines at different states, stages that reorder or hold
elements after the shard) raises `ReshardError` saying why.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from chute_core import PositionLayout
from chute_execution.internal import CHUNK_POSITIONS, THROUGH
from chute_samplers.internal import (
    FRONTIER,
    READER_POSITIONS,
    Frontier,
    is_watermark,
    level_of,
    watermark,
)

from ._describe import describe_pipeline, fingerprint
from ._document_shape import check_positions, damaged_state, integer_parameter
from ._errors import ReshardError
from ._format import MAX_PROCESS_COUNT, process_position, validate_document
from ._reshard_budgets import budget_failures, share_failures
from ._reshard_mix import MixPlan, mix_document, mix_plan, mixture_shard
from ._reshard_splits import assign_skips, delivered_ahead
from ._reshard_stages import (
    check_declared,
    check_loader_shards,
    later_stages,
    mixes_sharded,
    reading_traits,
    remember_traits,
    shard_params,
    shard_stage,
    traits_of,
)
from ._reshard_windows import inner_state, merge_taken, rebuild_state, taken_ahead

__all__ = ["reshard", "reshard_for"]

_LAYOUTS: tuple[PositionLayout, ...] = (READER_POSITIONS, CHUNK_POSITIONS)
"""The state layouts that hold a stream's position, each owned by the layer that keeps it."""


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What the saved states say, for any new process count."""

    base: dict[str, Any]  # The document of shard 0 (or of process 0: a global pipeline).
    shard_at: int | None  # The shard stage; None: a global pipeline.
    count: int = 1  # Shards saved.
    local: int = 0  # Elements of its shard each has consumed (all the same).
    unit: int = 1  # Elements per position of the state (MapDataset batches after shard).
    chunk_size: int | None = None  # mp_prefetch's, in positions of the state.
    # With one element per position: the global positions below `watermark` were all
    # consumed, and of those above, the ones `levels` say (see `chute_samplers.Frontier`).
    levels: tuple[tuple[int, tuple[int, ...]], ...] | None = None
    watermark: int = 0
    # Per error budget (skip_errors) in the state, outermost first: the shards' failures.
    failures: tuple[int, ...] = ()
    # A flat map's elements delivered in part: (global position, outputs delivered).
    delivered: tuple[tuple[int, int], ...] = ()
    taken: tuple[int, ...] = ()  # Global positions above it consumed one by one.


def reshard(documents: Sequence[Mapping[str, Any]], process_count: int) -> list[dict[str, Any]]:
    """The state documents of `process_count` processes that continue `documents`' stream.

    `documents` are the states of all `n` processes. A global pipeline (no shard
    stage, e.g. batched with `batch(..., sharding=...)`) gives every new process the
    common state. A pipeline with one `.shard(i, n)` stage, its processes each at any
    position, gets process `k` of the result running `.shard(k, process_count)` over
    what no process consumed (see the module docs), so every element comes once.

    Raises:
        ReshardError: the pipeline or positions do not allow it (the message says why,
            e.g. a stage after the shard that reorders elements).

    Example:
        >>> import chute
        >>> from chute_checkpoint import make_document
        >>> def pipeline(i, n):
        ...     return chute.MapDataset.range(12).shard(i, n).to_iter_dataset()
        >>> iterators = [iter(pipeline(i, 2)) for i in range(2)]
        >>> seen = sorted(next(it) for it in iterators for _ in range(3))
        >>> docs = [make_document(it, i, 2) for i, it in enumerate(iterators)]
        >>> [d["state"] for d in reshard(docs, 3)]
        [{'position': 2}, {'position': 2}, {'position': 2}]
        >>> seen, [x for x in range(12) if x not in seen]
        ([0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11])
    """
    if isinstance(process_count, bool) or not isinstance(process_count, int) or process_count < 1:
        raise ReshardError(f"process_count must be a positive int, got {process_count!r}.")
    if process_count > MAX_PROCESS_COUNT:
        raise ReshardError(
            f"process_count must be at most {MAX_PROCESS_COUNT:,} (more processes than any JAX "
            f"cluster runs), got {process_count}."
        )
    with reading_traits():
        plan = _plan(documents)
        return [_document(plan, k, process_count, k, process_count) for k in range(process_count)]


def reshard_for(
    documents: Sequence[Mapping[str, Any]],
    iterator: object,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
) -> dict[str, Any]:
    """The state document that continues `documents`' stream in `iterator`.

    Like `reshard`, but the new shard is read from `iterator`'s own pipeline, so it also
    serves meshes where processes share a data-parallel replica (`shard(mesh, axis)`
    gives them the same shard, and fewer shards than processes). `restore` and the Orbax
    handler call it when a checkpoint holds the states of another number of processes.
    `process_index` and `process_count` default to JAX's (see `save`).

    Raises:
        ReshardError: the states cannot continue in this iterator (the message says why).

    Example:
        >>> import chute
        >>> from chute_checkpoint import apply_document, make_document
        >>> ds = chute.MapDataset.range(8).batch(2).to_iter_dataset()
        >>> olds = [iter(ds), iter(ds)]  # A global pipeline: both at global batch 1.
        >>> _ = [next(it) for it in olds]
        >>> docs = [make_document(it, i, 2) for i, it in enumerate(olds)]
        >>> single = iter(ds)
        >>> apply_document(single, reshard_for(docs, single, process_index=0, process_count=1))
        >>> [b.tolist() for b in single]
        [[2, 3], [4, 5], [6, 7]]
    """
    index, count = process_position(process_index, process_count)
    with reading_traits():
        return _reshard_into(documents, iterator, index, count)


def _reshard_into(
    documents: Sequence[Mapping[str, Any]], iterator: object, index: int, count: int
) -> dict[str, Any]:
    plan = _plan(documents)
    if isinstance(plan, MixPlan):
        return _document(plan, *mixture_shard(describe_pipeline(iterator)["stages"]), index, count)
    if plan.shard_at is None:
        return _document(plan, 0, 1, index, count)
    stages = describe_pipeline(iterator)["stages"]
    at = plan.shard_at
    if len(stages) <= at or not traits_of(stages[at]).shard:
        raise ReshardError(
            f"the checkpoint's pipeline shards at stage {at} (.shard(i, n)), but this "
            f"iterator's pipeline has no shard stage there (its stages: "
            f"{[item['op'] for item in stages]}); restore into the same pipeline."
        )
    params = stages[at]["params"]
    shard_index, shard_count = shard_params(stages[at])
    return _document(plan, int(params[shard_index]), int(params[shard_count]), index, count)


def _plan(documents: Sequence[Mapping[str, Any]]) -> _Plan | MixPlan:
    if not documents:
        raise ReshardError("reshard needs the state documents of all processes, got none.")
    checked = [
        validate_document(
            copy.deepcopy(dict(d)) if isinstance(d, Mapping) else d, f"state {number}"
        )
        for number, d in enumerate(documents)
    ]
    remember_traits(checked)
    _check_all_processes(checked)
    check_loader_shards(checked[0]["pipeline"])
    stages = checked[0]["pipeline"]["stages"]
    check_declared(stages)  # What an op does to positions must be known to reshard.
    if mixes_sharded(stages):
        plan = mix_plan(checked, _branch_plan)
        counts = [budget_failures(d["state"], f"state {d['process_index']}") for d in checked]
        return dataclasses.replace(plan, failures=tuple(map(sum, zip(*counts, strict=True))))
    at = shard_stage(stages, checked[0]["pipeline"].get("kind"))
    return _global_plan(checked) if at is None else _sharded_plan(checked, at)


def _branch_plan(documents: list[dict[str, Any]]) -> _Plan:
    """The plan of one component of a mixture (its own pipeline)."""
    stages = documents[0]["pipeline"]["stages"]
    at = shard_stage(stages, "IterDataset")
    return _global_plan(documents) if at is None else _sharded_plan(documents, at)


def _check_all_processes(documents: list[dict[str, Any]]) -> None:
    for number, document in enumerate(documents):
        if document["process_count"] != len(documents):
            raise ReshardError(
                f"state {number} is of process {document['process_index']} of "
                f"{document['process_count']}, but {len(documents)} states were given: pass "
                "the states of all processes."
            )
    indices = sorted(document["process_index"] for document in documents)
    if indices != list(range(len(documents))):
        raise ReshardError(
            f"the states are of the processes {indices}, not of each of 0..{len(documents) - 1} "
            "once: pass the state of every process of one step."
        )
    documents.sort(key=lambda document: int(document["process_index"]))


def _global_plan(documents: list[dict[str, Any]]) -> _Plan:
    first = documents[0]
    for number, document in enumerate(documents[1:], start=1):
        if document["fingerprint"] != first["fingerprint"]:
            raise ReshardError(
                f"state {number} is of a different pipeline than state 0; reshard only the "
                "states of one training run."
            )
        if document["state"] != first["state"]:
            raise ReshardError(
                f"the pipeline has no shard stage, so every process walks the same positions, "
                f"but process {number}'s state {document['state']!r:.200} differs from process "
                f"0's {first['state']!r:.200}: save every process at the same step (or shard "
                "the data with .shard(...) or batch(..., sharding=...))."
            )
    return _Plan(first, None)


def _sharded_plan(documents: list[dict[str, Any]], at: int) -> _Plan:
    by_shard: dict[int, dict[str, Any]] = {}
    first = documents[0]
    index_name, count_name = shard_params(first["pipeline"]["stages"][at])
    count = integer_parameter(first["pipeline"]["stages"][at], at, count_name, 1, "state 0")
    common = _without_shard_index(first, at, index_name)
    shards: list[int] = []
    for number, document in enumerate(documents):
        if _without_shard_index(document, at, index_name) != common:
            raise ReshardError(
                f"state {number} is of a different pipeline than state 0 (beyond the shard "
                "index); reshard only the states of one training run."
            )
        stage = document["pipeline"]["stages"][at]
        shard = integer_parameter(stage, at, index_name, 0, f"state {number}")
        shards.append(shard)
        same = by_shard.setdefault(shard, document)
        if same["state"] != document["state"]:
            raise ReshardError(
                f"processes {same['process_index']} and {number} read the same shard {shard} "
                "(they share a data-parallel replica) but are at different states; save every "
                "process at the same step."
            )
    if len(by_shard) != count or max(by_shard) >= count:  # Each of 0..count-1, in O(states).
        raise ReshardError(
            f"the shard indices {shards} (by process) are not each of 0..{count - 1} at least "
            "once: pass the states of all processes."
        )
    ordered = [by_shard[shard] for shard in range(count)]
    unit, chunk_size = later_stages(first["pipeline"]["stages"], at)
    frontiers = [
        _frontier(doc["state"], shard, count, f"state {doc['process_index']}")
        for shard, doc in enumerate(ordered)
    ]
    positions = [
        _position(doc["state"], chunk_size, doc["pipeline"], f"state {doc['process_index']}", f)
        for doc, f in zip(ordered, frontiers, strict=True)
    ]
    counts = [budget_failures(doc["state"], f"state {doc['process_index']}") for doc in ordered]
    failures = tuple(map(sum, zip(*counts, strict=True)))
    if unit == 1:
        states = [doc["state"] for doc in ordered]
        stages = first["pipeline"]["stages"][at + 1 :]
        taken = taken_ahead(states, positions, count, stages, "the state of shard")
        plan = _elastic_plan(first, at, positions, frontiers, chunk_size, taken)
        delivered = delivered_ahead(states, positions, count, "the state of shard")
        return dataclasses.replace(plan, failures=failures, delivered=delivered)
    if len(set(positions)) != 1 or any(frontiers):
        raise ReshardError(
            f"the processes are at different local positions {positions} (by shard index), "
            f"in batches of {unit} (the MapDataset.batch after the shard): a batch cannot be "
            "split between processes; batch after to_iter_dataset() (IterDataset.batch) to "
            "reshard from any positions, or save every process at the same step."
        )
    return _Plan(first, at, count, positions[0] * unit, unit, chunk_size, failures=failures)


def _elastic_plan(
    first: dict[str, Any],
    at: int,
    positions: list[int],
    frontiers: list[Frontier | None],
    chunk_size: int | None,
    taken: tuple[int, ...],
) -> _Plan:
    """The plan that continues shards at any `positions`, and `taken` ahead of them."""
    levels: list[tuple[int, tuple[int, ...]]] = []
    for frontier in frontiers:
        for level in () if frontier is None else frontier.levels:
            if level not in levels:  # Every process holds the levels it has not passed.
                levels.append(level)
    newest = level_of(positions)
    low = watermark(newest)
    levels = [level for level in levels if max(level[1]) > low]
    if not is_watermark(newest):
        levels.append(newest)
    olds = [() if frontier is None else frontier.taken for frontier in frontiers]
    taken = merge_taken(taken, *olds, below=low)
    return _Plan(
        first,
        at,
        len(positions),
        chunk_size=chunk_size,
        levels=tuple(levels),
        watermark=low,
        taken=taken,
    )


def _frontier(state: Any, shard: int, count: int, where: str) -> Frontier | None:
    leaf = _leaf(state)
    if FRONTIER not in leaf:
        return None
    try:
        frontier = Frontier.from_json(leaf[FRONTIER], where)
    except ValueError as error:
        raise ReshardError(str(error)) from None
    if (frontier.index, frontier.count) != (shard, count):
        raise ReshardError(
            f"{where} holds the frontier of shard {frontier.index} of {frontier.count}, but is "
            f"of shard {shard} of {count}; the file is damaged or of another pipeline."
        )
    return frontier


def _without_shard_index(document: dict[str, Any], at: int, name: str) -> list[Any] | None:
    """The document's pipeline with the shard index blanked; None without a stage `at`."""
    stages = copy.deepcopy(document["pipeline"]["stages"])
    if len(stages) <= at:
        return None
    stages[at]["params"][name] = None
    return [document["pipeline"].get("kind"), *stages]


def _position(
    state: Any,
    chunk_size: int | None,
    pipeline: Mapping[str, Any],
    where: str,
    frontier: Frontier | None = None,
) -> int:
    leaf = {k: v for k, v in _leaf(state).items() if k != FRONTIER}
    check_positions(leaf, where)  # Counters only: int() would hide "4", 4.5 or True.
    drops = any(traits_of(item).drops for item in pipeline["stages"])
    if frontier is not None and leaf.get("offset") and THROUGH not in leaf:  # Skips in a unit.
        if drops:
            raise ReshardError(
                f"{where} is inside a unit of a filtered stream, where the offset counts kept "
                "elements, not positions; save at a unit boundary."
            )
        leaf = {
            "position": frontier.skip_kept(int(leaf["position"]), int(leaf["offset"])),
            "offset": 0,
        }
    for layout in _LAYOUTS:
        try:
            position = layout.read(leaf, chunk_size, drops)
        except ValueError as error:
            raise ReshardError(str(error)) from None
        if position is not None:
            return position
    raise ReshardError(f"cannot find the stream position in the state {state!r:.200}.")


def _leaf(state: Any) -> dict[str, Any]:
    while isinstance(state, dict):
        try:
            inner = inner_state(state)
        except ValueError as error:
            raise ReshardError(str(error)) from None
        if inner is None:
            return state
        state = inner
    raise ReshardError(f"cannot find the stream position in the state {state!r:.200}.")


def _document(
    plan: _Plan | MixPlan,
    shard_index: int,
    shard_count: int,
    process_index: int,
    process_count: int,
) -> dict[str, Any]:
    if isinstance(plan, MixPlan):
        args = (shard_index, shard_count, process_index, process_count, _document)
        document = mix_document(plan, *args)
        share_failures(document["state"], plan.failures, shard_index, shard_count)
        return document
    document = copy.deepcopy(plan.base)
    document["process_index"], document["process_count"] = process_index, process_count
    if plan.shard_at is None:
        return document
    if plan.levels is not None:
        return _continued(document, plan, shard_index, shard_count)
    consumed = plan.local * plan.count
    if consumed % (shard_count * plan.unit):
        raise ReshardError(_indivisible(plan, consumed, shard_count, process_count))
    stage = document["pipeline"]["stages"][plan.shard_at]
    index_name, count_name = shard_params(stage)
    stage["params"][index_name], stage["params"][count_name] = shard_index, shard_count
    document["fingerprint"] = fingerprint(document["pipeline"])
    position = consumed // shard_count // plan.unit
    document["state"] = _moved(document["state"], position, plan, shard_count)
    share_failures(document["state"], plan.failures, shard_index, shard_count)
    return document


def _continued(
    document: dict[str, Any], plan: _Plan, shard_index: int, shard_count: int
) -> dict[str, Any]:
    """Shard `shard_index` of `shard_count`, from the watermark on, skipping the frontier."""
    assert plan.shard_at is not None and plan.levels is not None
    stage = document["pipeline"]["stages"][plan.shard_at]
    index_name, count_name = shard_params(stage)
    stage["params"][index_name], stage["params"][count_name] = shard_index, shard_count
    document["fingerprint"] = fingerprint(document["pipeline"])
    start = max(0, -(-(plan.watermark - shard_index) // shard_count))  # First global >= it.
    taken = tuple(g for g in plan.taken if g % shard_count == shard_index)
    frontier = Frontier(shard_index, shard_count, plan.levels, taken).after(start)
    if frontier is None and stage["params"].get("drop_remainder") is True:
        # Shards of another count drop another remainder, so `start` may lie past this
        # shard's end: a reader clamps the position of a state with a frontier.
        frontier = Frontier(shard_index, shard_count, ())
    document["state"] = _moved(document["state"], start, plan, shard_count, frontier)
    assign_skips(document["state"], plan.delivered, shard_index, shard_count)
    share_failures(document["state"], plan.failures, shard_index, shard_count)
    return document


def _indivisible(plan: _Plan, consumed: int, count: int, processes: int) -> str:
    old, new = _who(plan.count, plan.base["process_count"]), _who(count, processes)
    if consumed % count:
        return (
            f"{old} at local position {plan.local // plan.unit} consumed {consumed} elements "
            f"together, which {new} cannot split evenly ({consumed} % {count} = "
            f"{consumed % count}); restore from a step where the total is divisible by "
            f"{count}, or use a process count that divides it."
        )
    return (
        f"{old} consumed {consumed} elements together; {new} would each continue from "
        f"element {consumed // count} of their shard, inside a batch of {plan.unit} (the "
        f"MapDataset.batch after the shard): restore from a step where the total is "
        f"divisible by {count * plan.unit}."
    )


def _who(shards: int, processes: int) -> str:
    """'n processes', or 'n shards' when processes share shards (a replica of a mesh)."""
    return f"{shards} processes" if shards == processes else f"{shards} shards"


def _moved(
    state: Any, position: int, plan: _Plan, new: int, frontier: Frontier | None = None
) -> Any:
    inner = inner_state(state)
    if inner is not None:
        moved = _moved(dict(inner), position, plan, new, frontier)
        try:
            return rebuild_state(state, moved, (plan.count, new))
        except (TypeError, ValueError, OverflowError) as error:  # A counter of another type.
            raise damaged_state(state, error, f"state {plan.base['process_index']}") from error
    for layout in _LAYOUTS:
        if layout.read(state, plan.chunk_size, False) is not None:
            written = layout.write(position, plan.chunk_size)
            if frontier is None:
                return written
            written[FRONTIER] = frontier.to_json()
            return written
    raise ReshardError(f"cannot find the stream position in the state {state!r:.200}.")
