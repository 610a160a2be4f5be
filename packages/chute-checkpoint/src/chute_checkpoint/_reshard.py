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
  batch, prefetching, `to_device`), except one stream flat map (or unbatch, or
  rebatch; in the workers too), whose element a process stopped inside goes back to be
  read, minus its outputs delivered (`_reshard_splits`), and a window shuffle, a
  packer, or both in that order, whose elements held go back to be read, minus the
  ones they yielded (`_reshard_windows`). An interleave of the shard's streams
  continues the streams left open on their new owners (`_reshard_streams`), under a
  window, a packer or a split too; a stream repeat continues each epoch the processes
  are in with a frontier of its own (`_reshard_epochs`).
  A `MapDataset.batch(b)` after the shard counts positions in batches, which cannot be
  split between processes: such states reshard only from processes in lockstep, and
  where `j * n` splits into whole batches (so `check_reshardable` refuses such a
  pipeline unless told `lockstep=True`).
- A `chute.DataLoader` whose `IndexSampler` takes shard `i` of `n` (`shard_options`)
  takes a stride of each epoch rather than of the whole stream: it reshards the same
  way, with the global positions counted epoch by epoch (`Frontier.epoch`), so each
  record of each epoch comes once on any process count.

Anything else (global pipelines at different states, stages that reorder or hold
elements after the shard) raises `ReshardError` saying why.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from chute_samplers.internal import (
    Frontier,
    first_position,
    is_watermark,
    level_of,
    residue,
    watermark,
)

from ._describe import describe_pipeline, fingerprint
from ._document_shape import positions_in_range
from ._errors import ReshardError
from ._format import MAX_PROCESS_COUNT, process_position, validate_document
from ._reshard_budgets import budget_failures, share_failures
from ._reshard_epochs import epoch_plans, with_epochs
from ._reshard_lengths import repeats_stream
from ._reshard_mix import MixPlan, mix_document, mix_plan, mixture_shard
from ._reshard_positions import frontier_of, moved_state, position_of
from ._reshard_shards import (
    check_all_processes,
    check_divisible,
    doc_name,
    drops_remainder,
    find_shard,
    own_chunk_size,
    set_shard,
    shard_epoch,
    shard_of,
    stages_after,
    subsamples,
    take_chunk_sizes,
    takes_shard,
    without_shard_index,
)
from ._reshard_splits import assign_skips, delivered_ahead
from ._reshard_stages import (
    check_declared,
    mixes_sharded,
    reading_traits,
    remember_traits,
    shard_stage,
    traits_of,
)
from ._reshard_streams import assign_opened, opened_ahead, skips_ahead
from ._reshard_windows import merge_taken, taken_ahead

__all__ = ["reshard", "reshard_for"]


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
    # An interleave's streams left open: (global position, the stream's state).
    opened: tuple[tuple[int, Any], ...] = ()
    skips: tuple[tuple[int, tuple[int, ...]], ...] = ()  # Its streams' elements delivered.
    opens: bool = False  # Whether an interleave opens the shard's positions as streams.
    # A repeat after the shard: the first epoch (of the levels), later ones' (levels, low).
    repeat_epoch: int | None = None
    later: tuple[tuple[tuple[tuple[int, tuple[int, ...]], ...], int], ...] = ()
    epoch: int = 0  # Records per epoch of a sampler's per-epoch stride (0: the stream's).
    olds: tuple[Any, ...] = ()  # The states by shard (with levels).


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
    with reading_traits(), positions_in_range():
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
    with reading_traits(), positions_in_range():
        return _reshard_into(documents, iterator, index, count)


def _reshard_into(
    documents: Sequence[Mapping[str, Any]], iterator: object, index: int, count: int
) -> dict[str, Any]:
    plan = _plan(documents)
    if isinstance(plan, MixPlan):
        return _document(plan, *mixture_shard(describe_pipeline(iterator)["stages"]), index, count)
    if plan.shard_at is None:
        return _document(plan, 0, 1, index, count)
    pipeline = describe_pipeline(iterator)
    at = plan.shard_at
    if len(pipeline["stages"]) <= at or not takes_shard(pipeline["stages"][at]):
        raise ReshardError(
            f"the checkpoint's pipeline shards at stage {at} (.shard(i, n)), but this "
            f"iterator's pipeline has no shard stage there (its stages: "
            f"{[item['op'] for item in pipeline['stages']]}); restore into the same pipeline."
        )
    shard_index, shard_count = shard_of(pipeline["stages"][at], at, "the iterator's pipeline")
    document = _document(plan, shard_index, shard_count, index, count)
    if plan.levels is not None:  # A state at a position: it restores with any chunk size.
        take_chunk_sizes(document, pipeline["stages"])
    return document


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
    check_all_processes(checked)
    stages = checked[0]["pipeline"]["stages"]
    check_declared(stages)  # What an op does to positions must be known to reshard.
    if mixes_sharded(stages):
        plan = mix_plan(checked, _branch_plan)
        counts = [budget_failures(d["state"], f"state {d['process_index']}") for d in checked]
        return dataclasses.replace(plan, failures=tuple(map(sum, zip(*counts, strict=True))))
    at = find_shard(stages, checked[0]["pipeline"].get("kind"))
    if at is not None and subsamples(checked, at):
        at = None  # The same `[i::n]` on every process: not a shard, a subsample.
    return _global_plan(checked) if at is None else _sharded_plan(checked, at)


def _branch_plan(documents: list[dict[str, Any]]) -> _Plan:
    """The plan of one component of a mixture (its own pipeline)."""
    stages = documents[0]["pipeline"]["stages"]
    at = shard_stage(stages, "IterDataset")
    return _global_plan(documents) if at is None else _sharded_plan(documents, at)


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
    _, count = shard_of(first["pipeline"]["stages"][at], at, "state 0")
    epoch = shard_epoch(first["pipeline"]["stages"], at)
    common = without_shard_index(first, at)
    shards: list[int] = []
    for number, document in enumerate(documents):
        if without_shard_index(document, at) != common:
            raise ReshardError(
                f"state {number} is of a different pipeline than state 0 (beyond the shard "
                "index); reshard only the states of one training run."
            )
        shard, _ = shard_of(document["pipeline"]["stages"][at], at, f"state {number}")
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
    unit, chunk_size = stages_after(first["pipeline"]["stages"], at)
    frontiers = [
        frontier_of(doc["state"], shard, count, epoch, f"state {doc['process_index']}")
        for shard, doc in enumerate(ordered)
    ]
    positions = [  # Each with its own chunk size: a default one follows the shard's length.
        position_of(doc["state"], own_chunk_size(doc, at), doc["pipeline"], doc_name(doc), f)
        for doc, f in zip(ordered, frontiers, strict=True)
    ]
    counts = [budget_failures(doc["state"], f"state {doc['process_index']}") for doc in ordered]
    failures = tuple(map(sum, zip(*counts, strict=True)))
    if unit == 1:
        states = [doc["state"] for doc in ordered]
        stages = first["pipeline"]["stages"][at + 1 :]
        if repeats_stream(stages):  # A frontier per epoch.
            return _repeat_plan(first, ordered, at, chunk_size, failures)
        opens = any(traits_of(item).opens for item in stages)  # Windows name streams' elements.
        taken = () if opens else taken_ahead(states, positions, count, stages, "the state of shard")
        plan = _elastic_plan(first, at, positions, frontiers, chunk_size, taken, epoch)
        delivered = delivered_ahead(states, positions, count, "the state of shard", epoch)
        olds, opened = tuple(states), opened_ahead(states, count)
        skips = skips_ahead(states, count, stages) if opens else ()
        return dataclasses.replace(
            plan,
            failures=failures,
            delivered=delivered,
            olds=olds,
            opened=opened,
            skips=skips,
            opens=opens,
        )
    if len(set(positions)) != 1 or any(frontiers):
        raise ReshardError(
            f"the processes are at different local positions {positions} (by shard index), "
            f"in batches of {unit} (the MapDataset.batch after the shard): a batch cannot be "
            "split between processes; batch after to_iter_dataset() (IterDataset.batch) to "
            "reshard from any positions, or save every process at the same step."
        )
    return _Plan(first, at, count, positions[0] * unit, unit, chunk_size, failures=failures)


def _repeat_plan(
    first: dict[str, Any],
    ordered: list[dict[str, Any]],
    at: int,
    chunk_size: int | None,
    failures: tuple[int, ...],
) -> _Plan:
    """The plan of a repeat after the shard: one per epoch the shards are in."""

    def plan(positions: list[int], frontiers: list[Frontier | None]) -> _Plan:
        return _elastic_plan(first, at, positions, frontiers, chunk_size, ())

    epoch, plans = epoch_plans(ordered, at, plan)
    later = tuple((p.levels or (), p.watermark) for p in plans[1:])
    olds = tuple(doc["state"] for doc in ordered)
    return dataclasses.replace(
        plans[0], failures=failures, olds=olds, repeat_epoch=epoch, later=later
    )


def _elastic_plan(
    first: dict[str, Any],
    at: int,
    positions: list[int],
    frontiers: list[Frontier | None],
    chunk_size: int | None,
    taken: tuple[int, ...],
    epoch: int = 0,
) -> _Plan:
    """The plan that continues shards at any `positions`, and `taken` ahead of them."""
    levels: list[tuple[int, tuple[int, ...]]] = []
    for frontier in frontiers:
        for level in () if frontier is None else frontier.levels:
            if level not in levels:  # Every process holds the levels it has not passed.
                levels.append(level)
    newest = level_of(positions, epoch)
    low = watermark(newest)
    levels = [level for level in levels if max(level[1]) > low]
    if not is_watermark(newest, epoch):
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
        epoch=epoch,
    )


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
    set_shard(document["pipeline"]["stages"][plan.shard_at], shard_index, shard_count)
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
    # The same count (replicas of a mesh) keeps each shard's own state: with a remainder
    # dropped, the same one; an interleave keeps its open streams where they are.
    same = plan.count == shard_count and (plan.opens or drops_remainder(stage, shard_count))
    if not same:
        check_divisible(stage, plan.count, shard_count)
    set_shard(stage, shard_index, shard_count)
    document["fingerprint"] = fingerprint(document["pipeline"])
    if same:
        document["state"] = copy.deepcopy(plan.olds[shard_index])
        return document
    epoch = plan.epoch
    start = first_position(plan.watermark, shard_index, shard_count, epoch)
    taken = tuple(g for g in plan.taken if residue(g, shard_count, epoch) == shard_index)
    frontier = Frontier(shard_index, shard_count, plan.levels, taken, epoch).after(start)
    if stage["params"].get("drop_remainder") is True:
        # Shards of another count drop another remainder, so `start` may lie past this
        # shard's end: a reader clamps the position of a state with a frontier. The
        # clamped position says less than the watermark, so a level of it stays.
        levels = () if frontier is None else frontier.levels
        if plan.watermark:
            levels = (*levels, (1, (plan.watermark,)))
        taken = () if frontier is None else frontier.taken
        frontier = Frontier(shard_index, shard_count, levels, taken, epoch)
    elif frontier is None and plan.repeat_epoch is not None:  # Clamped at an epoch's end.
        frontier = Frontier(shard_index, shard_count, (), (), epoch)
    before = document["state"]
    document["state"] = _moved(before, start, plan, shard_count, frontier)
    if plan.repeat_epoch is not None:  # The parent's states of the later epochs.

        def move(state: Any, position: int, within: Frontier) -> Any:
            return _moved(state, position, plan, shard_count, within)

        epochs = (plan.repeat_epoch, plan.later)
        with_epochs(before, document["state"], epochs, (shard_index, shard_count), move)
    assign_skips(document["state"], plan.delivered, shard_index, shard_count, epoch)
    assign_opened(document["state"], plan.opened, shard_index, shard_count, plan.skips)
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
    where = f"state {plan.base['process_index']}"
    return moved_state(state, position, plan.chunk_size, (plan.count, new), where, frontier)
