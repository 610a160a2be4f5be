"""The shard stage of a saved pipeline: which shard it reads, of how many, and how.

Two kinds of stage take a shard:

- an op whose traits name its shard parameters (`StageTraits.shard`, `.shard(i, n)`):
  shard `i` of `n` reads a stride of the whole stream;
- a `chute.DataLoader`'s `sampler` (an `IndexSampler`): its `shard_options` take a
  stride of each epoch of `num_records` records, so resharding counts global positions
  epoch by epoch (`epoch_of`, `chute_samplers.internal.Frontier.epoch`). A loader
  reshards when what its operations do to positions is known: the loader records it in
  its checkpoints (`chute_stage_traits`), and a flat map among them (its records split
  inside a unit of work) is refused, as are checkpoints that do not say.

`check_reshardable` applies the rules of a restore on another process count to a
pipeline when it is built.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ._chunk_sizes import without_chunk_sizes
from ._describe import describe_pipeline, fingerprint, stage_traits_of
from ._document_shape import integer_parameter
from ._errors import CheckpointFormatError, ReshardError
from ._reshard_lengths import map_repeat_epoch
from ._reshard_stages import (
    branches,
    check_declared,
    later_stages,
    reading_traits,
    shard_params,
    shard_stage,
    traits_of,
)
from ._reshard_streams import check_window_streams
from ._reshard_strides import STRIDE, stride_of, stride_text

__all__ = [
    "check_all_processes",
    "check_divisible",
    "check_reshardable",
    "doc_name",
    "drops_remainder",
    "epoch_of",
    "shard_epoch",
    "subsamples",
    "without_shard_index",
    "find_shard",
    "own_chunk_size",
    "set_shard",
    "shard_of",
    "stages_after",
    "take_chunk_sizes",
    "takes_shard",
]

_SAMPLER = "sampler"
_EVERYTHING = "chute_samplers.NoSharding"  # How a checkpoint names a sampler's NoSharding().
_LOADER_STAGES = ("operation", "chunks", "error_budget")


def _is_sampler(stage: Mapping[str, Any]) -> bool:
    return stage.get("op") == _SAMPLER


def _fields(stage: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The fields of a sampler stage's `shard_options`."""
    options = stage["params"].get("shard_options")
    fields = options.get("fields") if isinstance(options, Mapping) else None
    if not isinstance(fields, dict):
        raise CheckpointFormatError(
            f"{where}: the sampler's shard_options must be a described ShardOptions "
            f"({{'class': ..., 'fields': {{...}}}}), got {options!r:.200}."
        )
    return fields


def takes_shard(stage: Mapping[str, Any]) -> bool:
    """Whether `stage` is a shard stage (of any count, 1 included).

    Example:
        >>> takes_shard({"op": "sampler", "params": {}}), takes_shard({"op": "map"})
        (True, False)
    """
    return _is_sampler(stage) or traits_of(stage).shard is not None


def shard_of(stage: Mapping[str, Any], number: int, where: str) -> tuple[int, int]:
    """`(index, count)`: the shard that shard stage `number` reads.

    Raises:
        CheckpointFormatError: they are missing or no ints in range.

    Example:
        >>> shard_of({"op": "shard", "params": {"shard_index": 1, "shard_count": 4}}, 2, "s")
        (1, 4)
    """
    if not _is_sampler(stage):
        index_name, count_name = shard_params(stage)
        if (index_name, count_name) == STRIDE:  # A slice `[i::n]`: its text says both.
            stride = stride_of(stage, _stride_name(stage))
            assert stride is not None  # Else `traits_of` gives it no shard.
            return stride
        count = integer_parameter(stage, number, count_name, 1, where)
        return integer_parameter(stage, number, index_name, 0, where), count
    fields = _fields(stage, where)
    shard, shards = fields.get("shard_index"), fields.get("shard_count")
    if type(shards) is not int or type(shard) is not int or not 0 <= shard < shards:
        raise CheckpointFormatError(
            f"{where}: stage {number} (sampler): shard_options must hold 0 <= shard_index < "
            f"shard_count, got shard_index={shard!r:.50}, shard_count={shards!r:.50}."
        )
    return shard, shards


def set_shard(stage: dict[str, Any], index: int | None, count: int | None = None) -> None:
    """Sets the shard stage's index (and count, if given), in place.

    Example:
        >>> stage = {"op": "shard", "params": {"shard_index": 1, "shard_count": 4}}
        >>> set_shard(stage, 0, 3)
        >>> stage["params"]
        {'shard_index': 0, 'shard_count': 3}
    """
    if _is_sampler(stage):
        params: dict[str, Any] = _fields(stage, "the sampler")
        index_name, count_name = "shard_index", "shard_count"
    else:
        params = stage["params"]
        index_name, count_name = shard_params(stage)
        if (index_name, count_name) == STRIDE:
            name = _stride_name(stage)
            stride = stride_of(stage, name)
            assert stride is not None
            params[name] = stride_text(index, stride[1] if count is None else count)
            return
    params[index_name] = index
    if count is not None:
        params[count_name] = count


def subsamples(documents: list[dict[str, Any]], at: int) -> bool:
    """Whether stage `at` is a stride slice (`[i::n]`) that every process takes alike.

    Such a slice is a subsample of the data, the same on every process (a global
    pipeline), not each process's shard.
    """
    stages = [document["pipeline"]["stages"] for document in documents]
    if len(documents) < 2 or traits_of(stages[0][at]).shard != STRIDE:
        return False
    return (
        len({stage_list[at]["params"].get(_stride_name(stages[0][at])) for stage_list in stages})
        == 1
    )


def _stride_name(stage: Mapping[str, Any]) -> str:
    name = traits_of(stage).stride
    assert name is not None
    return name


def epoch_of(stage: Mapping[str, Any]) -> int:
    """Records per epoch of a sampler's per-epoch stride; 0 for a stride of the stream.

    Example:
        >>> epoch_of({"op": "sampler", "params": {"num_records": 10}})
        10
    """
    if not _is_sampler(stage):
        return 0
    records = stage["params"].get("num_records")
    if type(records) is not int or records < 0:
        raise CheckpointFormatError(
            f"the sampler's num_records must be an int >= 0, got {records!r:.50}."
        )
    return records


def shard_epoch(stages: list[dict[str, Any]], at: int) -> int:
    """Records per epoch of shard stage `at`'s per-epoch stride; 0 for a stride of the stream.

    A sampler's (`epoch_of`), or that of a `MapDataset.repeat` of the shard (the length
    of the shard's input: see `_reshard_lengths`).

    Raises:
        ReshardError: such a repeat, over an input whose length is not described.
    """
    return epoch_of(stages[at]) or map_repeat_epoch(stages, at)


def drops_remainder(stage: Mapping[str, Any], count: int) -> bool:
    """Whether a sampler stage's shards of `count` leave records of each epoch unread.

    Example:
        >>> options = {"fields": {"shard_index": 0, "shard_count": 2, "drop_remainder": True}}
        >>> stage = {"op": "sampler", "params": {"num_records": 5, "shard_options": options}}
        >>> drops_remainder(stage, 2), drops_remainder(stage, 5)
        (True, False)
    """
    if not _is_sampler(stage) or _fields(stage, "the sampler").get("drop_remainder") is not True:
        return False
    return epoch_of(stage) % count != 0


def check_divisible(stage: Mapping[str, Any], old: int, new: int) -> None:
    """Raises if a sampler that drops each epoch's remainder would drop another one.

    With `drop_remainder`, shards of `n` read the first `n * (num_records // n)`
    records of each epoch: another count reads another set, unless neither drops any.

    Example:
        >>> options = {"fields": {"shard_index": 0, "shard_count": 2, "drop_remainder": True}}
        >>> check_divisible({"op": "sampler", "params": {"num_records": 12,
        ...                  "shard_options": options}}, 2, 3)
    """
    if not drops_remainder(stage, old) and not drops_remainder(stage, new):
        return
    records = epoch_of(stage)
    raise ReshardError(
        f"the DataLoader's IndexSampler drops the remainder of each epoch of {records} "
        f"records (shard_options drop_remainder=True), which {old} shards and {new} do not "
        f"drop alike ({records} % {old} = {records % old}, {records} % {new} = "
        f"{records % new}), so no split of the epoch gives each record once; restore with "
        "the same shard count, or use drop_remainder=False."
    )


def find_shard(stages: list[dict[str, Any]], kind: str | None) -> int | None:
    """The number of the pipeline's shard stage; None: a global pipeline.

    A DataLoader whose sampler reads every record on every process (`NoSharding`) is
    global; with any other `ShardOptions` (`ShardByJaxProcess`, one of one included),
    its sampler is the shard stage.

    Raises:
        ReshardError: several shard stages, a nested one, or a shard in no stream.
    """
    if kind != "DataLoader":
        return shard_stage(stages, kind)
    for number, item in enumerate(stages):
        if not _is_sampler(item):
            continue
        index, count = shard_of(item, number, "the pipeline")
        if item["params"]["shard_options"].get("class") == _EVERYTHING:
            return None
        if traits_of(item).shard is None:  # Not chute's IndexSampler, or an older checkpoint.
            if count == 1:
                return None
            raise ReshardError(
                f"this chute.DataLoader's sampler reads shard {index} of {count} in a way its "
                "checkpoint does not describe (a Grain sampler through chute.grain, which "
                "gives each shard its own block of records, or a checkpoint of a chute "
                "before 2026-11-28), so its states cannot be re-cut for another process "
                "count; restore with the same process count, or use chute.IndexSampler "
                "(each shard a stride of every epoch), which reshards."
            )
        return number
    return None


def stages_after(stages: list[dict[str, Any]], at: int) -> tuple[int, int | None]:
    """Elements per position of the state, and its chunk size, after shard stage `at`.

    Raises:
        ReshardError: a stage after the shard that resharding cannot continue.
    """
    if not _is_sampler(stages[at]):
        return later_stages(stages, at)
    chunk_size = None
    for number, item in enumerate(stages[at + 1 :], start=at + 1):
        op = item["op"]
        if op not in _LOADER_STAGES:
            raise ReshardError(f"stage {number} ({op}) is no stage a chute.DataLoader has.")
        traits = traits_of(item)
        if op == "operation" and not (traits.keeps_positions or traits.splits):
            transform = item["params"].get("transform")
            name = transform.get("class") if isinstance(transform, Mapping) else transform
            raise ReshardError(
                f"this chute.DataLoader's operations include one that is not known to keep "
                f"one record per position (stage {number}, {name!s:.100}): two "
                "FlatMapTransforms, or one after a BatchTransform, split records in ways "
                "another process count cannot continue, and a checkpoint of a chute before "
                "2026-11-28 does not say what its operations do; restore with the same "
                "process count, or apply the flat map after the loader."
            )
        chunk = traits.chunk
        if chunk is not None:
            chunk_size = integer_parameter(item, number, chunk, 1, "state 0")
    return 1, chunk_size


def own_chunk_size(document: Mapping[str, Any], at: int) -> int | None:
    """The chunk size of `document`'s states after its shard stage `at` (None: unchunked)."""
    return stages_after(document["pipeline"]["stages"], at)[1]


def doc_name(document: Mapping[str, Any]) -> str:
    """How messages name a state document: by its process.

    Example:
        >>> doc_name({"process_index": 3})
        'state 3'
    """
    return f"state {document['process_index']}"


def take_chunk_sizes(document: dict[str, Any], stages: list[dict[str, Any]]) -> None:
    """Gives the document's chunked stages the chunk sizes of `stages` (a live pipeline's).

    For a resharded state at a position, which restores with any chunk size: the
    default chunk size depends on the length of the shard, so another process count
    may choose another one. The fingerprint is made again.

    Example:
        >>> doc = {"pipeline": {"kind": "IterDataset", "stages": [
        ...     {"op": "mp_prefetch", "params": {"chunk_size": 1}}]}, "fingerprint": ""}
        >>> take_chunk_sizes(doc, [{"op": "mp_prefetch", "params": {"chunk_size": 3}}])
        >>> doc["pipeline"]["stages"][0]["params"]
        {'chunk_size': 3}
    """
    saved = document["pipeline"]["stages"]
    if [item["op"] for item in saved] != [item["op"] for item in stages]:
        return  # Restoring says how they differ.
    for mine, live in zip(saved, stages, strict=True):
        name = traits_of(mine).chunk
        if name is not None and name in live["params"]:
            mine["params"][name] = live["params"][name]
    document["fingerprint"] = fingerprint(document["pipeline"])


def check_reshardable(iterator: object, *, lockstep: bool = False) -> None:
    """Raises `ReshardError` now if `iterator`'s states could not continue on another count.

    Call it where the pipeline is built (or before the first save) to learn of a stage
    that resharding refuses at startup, not after a preemption. A pipeline that passes
    (without `lockstep=True`) continues on any process count from states saved at any
    positions.

    A `MapDataset.batch` after the shard is refused unless `lockstep=True`: its states
    count whole batches of the shard, and a batch cannot be split between processes, so
    they reshard only when every process saved at the same step and the batches they
    consumed together split evenly among the new processes (else the restore raises).
    `lockstep=True` says that your processes always save together and accepts that.

    Args:
        iterator: an iterator of the pipeline, as one process builds it.
        lockstep: accept a `MapDataset.batch` after the shard (see above).

    Raises:
        ReshardError: the stage that would not reshard, and why: for most stages the
            reason a restore on another count would give; for a `MapDataset.batch`
            after the shard, what the restore requires and how to batch instead.

    Example:
        >>> import chute
        >>> ds = chute.MapDataset.range(8).shard(0, 2).to_iter_dataset()
        >>> check_reshardable(iter(ds.filter(bool).batch(2)))
        >>> try:
        ...     check_reshardable(iter(ds.batch(2).window_shuffle(4, seed=0)))
        ... except ReshardError as error:
        ...     print(str(error)[:60])
        stage 4 (window_shuffle) follows the shard stage and changes
        >>> batched = chute.MapDataset.range(8).shard(0, 2).batch(2).to_iter_dataset()
        >>> check_reshardable(iter(batched), lockstep=True)
    """
    pipeline = describe_pipeline(iterator)
    stages = pipeline["stages"]
    with reading_traits() as saved:
        saved.update(stage_traits_of(iterator))
        check_declared(stages)
        if pipeline.get("kind") == "DataLoader":
            at = find_shard(stages, "DataLoader")
            if at is not None:
                stages_after(stages, at)
            return
        parts = branches(stages)
        for component, branch in enumerate(parts):
            at = shard_stage(branch, "IterDataset")
            if at is None:  # A global pipeline: every process has the same state.
                continue
            map_repeat_epoch(branch, at)  # Such a repeat needs the length of its input.
            unit, _ = later_stages(branch, at)  # (In a restore's order: the same error.)
            if unit > 1 and not lockstep:
                whose = f"the mixture's component {component}: " if parts[0] is not stages else ""
                raise ReshardError(whose + _batched_after_shard(branch, at, unit))
        check_window_streams(iterator, parts)


def _batched_after_shard(stages: list[dict[str, Any]], at: int, unit: int) -> str:
    """Why a `MapDataset.batch` after shard stage `at` does not reshard from any positions."""
    number = next(  # The first batch of more than one element (`later_stages`' unit).
        number
        for number, item in enumerate(stages[at + 1 :], start=at + 1)
        if (name := traits_of(item).groups) is not None
        and integer_parameter(item, number, name, 1, "state 0") > 1
    )
    return (
        f"stage {number} ({stages[number]['op']}) batches the shard before to_iter_dataset() "
        f"(MapDataset.batch), so the states count whole batches ({unit} elements each), and "
        "a batch cannot be split between processes: they reshard only when every process "
        "saved at the same step and the batches consumed together split evenly among the "
        "new processes. Batch after to_iter_dataset() (IterDataset.batch) to reshard from "
        "any positions, or pass lockstep=True if every process always saves at the same step."
    )


def check_all_processes(documents: list[dict[str, Any]]) -> None:
    """Raises unless `documents` are one state of each process; sorts them by process."""
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


def without_shard_index(document: dict[str, Any], at: int) -> list[Any] | None:
    """The document's pipeline with the shard index and chunk sizes blanked (None: no `at`).

    The default chunk size follows the length of the shard, so shards of one run may
    differ in it; it never changes the elements.
    """
    stages = copy.deepcopy(document["pipeline"]["stages"])
    if len(stages) <= at:
        return None
    if takes_shard(stages[at]):  # Else it differs from the first: the caller says so.
        set_shard(stages[at], None)
    without_chunk_sizes(stages, lambda op: traits_of({"op": op}))
    return [document["pipeline"].get("kind"), *stages]
