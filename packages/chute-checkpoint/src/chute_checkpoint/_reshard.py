"""Elastic restore across process counts, for index-based pipelines.

Two kinds of pipeline continue exactly on another number of JAX processes:

- *Global* pipelines have no shard stage: every process walks the same positions, so
  every process has the same state. `MapDataset.batch(global_size, sharding=...)` is
  one: each process builds its own rows of global batch `b`, and the state is `b`.
  Each new process gets that state.
- *Sharded* pipelines have one `.shard(i, n)` stage (stride sharding, also from
  `ShardByJaxProcess` or Loadax's `shard(mesh, data_axis_name)`): shard `i` reads the
  positions `i, i + n, i + 2n, ...`. When all `n` shards are at local position `j` (in
  lockstep, as data-parallel training keeps them), they have together consumed exactly
  the first `j * n` positions; `m` shards continue from local position `j * n / m`.
  Stages after the shard must keep positions (map, filter, batch, prefetching,
  `to_device`); a `MapDataset.batch(b)` after the shard counts positions in batches.

Anything else (processes at different positions, a filter that left the shards at
different positions, totals the new count cannot split) raises `ReshardError` saying why.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from chute_core import PositionLayout, StageTraits, declared_stages, is_declared, stage_traits
from chute_execution.internal import CHUNK_POSITIONS
from chute_samplers.internal import READER_POSITIONS
from chute_transforms.internal import PARENT_STATES, SKIPS_REFUSED

from ._describe import describe_pipeline, fingerprint
from ._document_shape import check_positions, damaged_state, integer_parameter
from ._errors import ReshardError
from ._format import MAX_PROCESS_COUNT, process_position, validate_document
from ._stage_traits import saved_traits

__all__ = ["reshard", "reshard_for"]

_LAYOUTS: tuple[PositionLayout, ...] = (READER_POSITIONS, CHUNK_POSITIONS)
"""The state layouts that hold a stream's position, each owned by the layer that keeps it."""


_SAVED: contextvars.ContextVar[dict[str, StageTraits] | None] = contextvars.ContextVar(
    "chute_checkpoint_saved_traits", default=None
)
"""The traits the documents being resharded carry, by op (see `_stage_traits`)."""


def _traits(stage: Mapping[str, Any]) -> StageTraits:
    """What the documents say the stage's op does; else what this process declares."""
    op = str(stage["op"])
    saved = _SAVED.get()
    if saved is not None and op in saved:
        return saved[op]
    return stage_traits(op)


def _known(op: str) -> bool:
    saved = _SAVED.get()
    return (saved is not None and op in saved) or is_declared(op)


@contextlib.contextmanager
def _reading_traits() -> Iterator[dict[str, StageTraits]]:
    """Holds the traits of the documents read during the block (filled by `_plan`)."""
    token = _SAVED.set({})
    try:
        yield _SAVED.get() or {}
    finally:
        _SAVED.reset(token)


def _shard_params(stage: Mapping[str, Any]) -> tuple[str, str]:
    names = _traits(stage).shard
    assert names is not None
    return names


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What the saved states say, for any new process count."""

    base: dict[str, Any]  # The document of shard 0 (or of process 0: a global pipeline).
    shard_at: int | None  # The shard stage; None: a global pipeline.
    count: int = 1  # Shards saved.
    local: int = 0  # Elements of its shard each has consumed (all the same).
    unit: int = 1  # Elements per position of the state (MapDataset batches after shard).
    chunk_size: int | None = None  # mp_prefetch's, in positions of the state.


def reshard(documents: Sequence[Mapping[str, Any]], process_count: int) -> list[dict[str, Any]]:
    """The state documents of `process_count` processes that continue `documents`' stream.

    `documents` are the states of all `n` processes of one step. A global pipeline (no
    shard stage, e.g. batched with `batch(..., sharding=...)`) gives every new process
    the common state. A pipeline with one `.shard(i, n)` stage gets process `k` of the
    result running `.shard(k, process_count)` from local position `j * n /
    process_count` (see the module docs), so the global sequence continues with nothing
    lost or repeated.

    Raises:
        ReshardError: the pipeline or positions do not allow it (the message says why,
            e.g. `j * n` not divisible by `process_count`).

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
    with _reading_traits():
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
    with _reading_traits():
        return _reshard_into(documents, iterator, index, count)


def _reshard_into(
    documents: Sequence[Mapping[str, Any]], iterator: object, index: int, count: int
) -> dict[str, Any]:
    plan = _plan(documents)
    if plan.shard_at is None:
        return _document(plan, 0, 1, index, count)
    stages = describe_pipeline(iterator)["stages"]
    at = plan.shard_at
    if len(stages) <= at or not _traits(stages[at]).shard:
        raise ReshardError(
            f"the checkpoint's pipeline shards at stage {at} (.shard(i, n)), but this "
            f"iterator's pipeline has no shard stage there (its stages: "
            f"{[item['op'] for item in stages]}); restore into the same pipeline."
        )
    params = stages[at]["params"]
    shard_index, shard_count = _shard_params(stages[at])
    return _document(plan, int(params[shard_index]), int(params[shard_count]), index, count)


def _plan(documents: Sequence[Mapping[str, Any]]) -> _Plan:
    if not documents:
        raise ReshardError("reshard needs the state documents of all processes, got none.")
    checked = [
        validate_document(
            copy.deepcopy(dict(d)) if isinstance(d, Mapping) else d, f"state {number}"
        )
        for number, d in enumerate(documents)
    ]
    saved = _SAVED.get()
    if saved is not None:
        for document in checked:
            saved.update(saved_traits(document))
    _check_all_processes(checked)
    stages = checked[0]["pipeline"]["stages"]
    _check_declared(stages)  # What an op does to positions must be known to reshard.
    found = [number for number, item in enumerate(stages) if _traits(item).shard]
    nested = sum(_count_shards(item.get("inputs", [])) for item in stages)
    if not found and not nested:
        return _global_plan(checked)
    streams = any(_traits(item).begins_stream for item in stages)
    if not streams or len(found) != 1 or nested:
        raise ReshardError(
            "reshard needs a chute.IterDataset pipeline with no shard stage or exactly one "
            f"(MapDataset...shard(i, n)...to_iter_dataset()); found {len(found) + nested} shard "
            f"stages in a {checked[0]['pipeline'].get('kind')} pipeline."
        )
    return _sharded_plan(checked, found[0])


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


def _check_declared(stages: list[dict[str, Any]]) -> None:
    for number, item in enumerate(stages):
        if not _known(str(item["op"])):
            raise ReshardError(
                f"stage {number} ({item['op']}) is of an op whose traits neither the "
                "checkpoint carries nor any imported package declares, so what it does to "
                "positions is unknown; import the package that declares the op before "
                "resharding its states."
            )


def _keeping_positions() -> list[str]:
    known = {**declared_stages(), **(_SAVED.get() or {})}
    return sorted(op for op, traits in known.items() if traits.keeps_positions)


def _count_shards(branches: list[list[dict[str, Any]]]) -> int:
    return sum(
        bool(_traits(item).shard) + _count_shards(item.get("inputs", []))
        for branch in branches
        for item in branch
    )


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
    index_name, count_name = _shard_params(first["pipeline"]["stages"][at])
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
    unit, chunk_size = _later_stages(first["pipeline"]["stages"], at)
    positions = [
        _position(doc["state"], chunk_size, doc["pipeline"], f"state {doc['process_index']}")
        for doc in ordered
    ]
    if len(set(positions)) != 1:
        dropping = sorted(
            {item["op"] for item in first["pipeline"]["stages"] if _traits(item).drops}
        )
        if dropping:
            raise ReshardError(
                f"the shards are at different local positions {positions} (by shard index): "
                f"{' and '.join(dropping)} kept a different number of each shard's elements, "
                "so at the same step they have read different amounts of their shards, and "
                "what remains is no continuation of one global order that another number of "
                "processes could split; restore with the same number of processes."
            )
        raise ReshardError(
            f"the processes are at different local positions {positions} (by shard index); "
            "resharding needs them in lockstep: save every process at the same step."
        )
    return _Plan(first, at, count, positions[0] * unit, unit, chunk_size)


def _without_shard_index(document: dict[str, Any], at: int, name: str) -> list[Any] | None:
    """The document's pipeline with the shard index blanked; None without a stage `at`."""
    stages = copy.deepcopy(document["pipeline"]["stages"])
    if len(stages) <= at:
        return None
    stages[at]["params"][name] = None
    return [document["pipeline"].get("kind"), *stages]


def _later_stages(stages: list[dict[str, Any]], shard_at: int) -> tuple[int, int | None]:
    """Elements per position of the state, and the chunk size of the state (if chunked)."""
    unit, chunk_size, streaming = 1, None, False
    for number, item in enumerate(stages[shard_at + 1 :], start=shard_at + 1):
        traits = _traits(item)
        if traits.records_skips:
            raise ReshardError(SKIPS_REFUSED)
        if not traits.keeps_positions:
            raise ReshardError(
                f"stage {number} ({item['op']}) follows the shard stage and changes which "
                "position of the shard an element is (or keeps state across elements), so "
                "the global sequence cannot be re-cut; put it before .shard(...), or "
                f"restore with the same process count. Stages allowed after shard: "
                f"{_keeping_positions()}."
            )
        if traits.begins_stream:
            streaming = True
        elif traits.groups is not None and not streaming:
            unit *= integer_parameter(item, number, traits.groups, 1, "state 0")
        if traits.chunk is not None and item["params"].get(traits.chunk) is not None:
            chunk_size = integer_parameter(item, number, traits.chunk, 1, "state 0")
    return unit, chunk_size


def _position(state: Any, chunk_size: int | None, pipeline: Mapping[str, Any], where: str) -> int:
    leaf = _leaf(state)
    check_positions(leaf, where)  # Counters only: int() would hide "4", 4.5 or True.
    drops = any(_traits(item).drops for item in pipeline["stages"])
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
            inner = PARENT_STATES.inner(state)
        except ValueError as error:
            raise ReshardError(str(error)) from None
        if inner is None:
            return state
        state = inner
    raise ReshardError(f"cannot find the stream position in the state {state!r:.200}.")


def _document(
    plan: _Plan, shard_index: int, shard_count: int, process_index: int, process_count: int
) -> dict[str, Any]:
    document = copy.deepcopy(plan.base)
    document["process_index"], document["process_count"] = process_index, process_count
    if plan.shard_at is None:
        return document
    consumed = plan.local * plan.count
    if consumed % (shard_count * plan.unit):
        raise ReshardError(_indivisible(plan, consumed, shard_count, process_count))
    stage = document["pipeline"]["stages"][plan.shard_at]
    index_name, count_name = _shard_params(stage)
    stage["params"][index_name], stage["params"][count_name] = shard_index, shard_count
    document["fingerprint"] = fingerprint(document["pipeline"])
    position = consumed // shard_count // plan.unit
    document["state"] = _moved(document["state"], position, plan, shard_count)
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


def _moved(state: Any, position: int, plan: _Plan, new: int) -> Any:
    inner = PARENT_STATES.inner(state)
    if inner is not None:
        moved = _moved(dict(inner), position, plan, new)
        try:
            return PARENT_STATES.rebuild(state, moved, (plan.count, new))
        except (TypeError, ValueError, OverflowError) as error:  # A counter of another type.
            raise damaged_state(state, error, f"state {plan.base['process_index']}") from error
    for layout in _LAYOUTS:
        if layout.read(state, plan.chunk_size, False) is not None:
            return layout.write(position, plan.chunk_size)
    raise ReshardError(f"cannot find the stream position in the state {state!r:.200}.")
