"""What the stages of a pipeline tell resharding: their traits, the shard, what follows it.

The traits of an op come from the documents being resharded when they carry them (see
`_stage_traits`), else from the declarations of the packages imported here; documents
are read inside `reading_traits()`, which holds what they carry.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from chute_core import StageTraits, declared_stages, is_declared, stage_traits

from ._document_shape import integer_parameter
from ._errors import ReshardError
from ._reshard_strides import STRIDE, stride_of
from ._stage_traits import saved_traits, with_readings

__all__ = [
    "branches",
    "check_declared",
    "later_stages",
    "mixes_sharded",
    "reading_traits",
    "remember_traits",
    "shard_params",
    "shard_stage",
    "traits_of",
]

_SAVED: contextvars.ContextVar[dict[str, StageTraits] | None] = contextvars.ContextVar(
    "chute_checkpoint_saved_traits", default=None
)
"""The traits the documents being resharded carry, by op (see `_stage_traits`)."""


def traits_of(stage: Mapping[str, Any]) -> StageTraits:
    """What the documents say the stage's op does; else what this process declares.

    The traits that say how to read a description (`READINGS`) are this release's. A
    stride slice `[i::n]` takes a shard (`STRIDE`).
    """
    op = str(stage["op"])
    saved = _SAVED.get()
    traits = saved[op] if saved is not None and op in saved else stage_traits(op)
    name = traits.stride
    if name is not None and traits.shard is None and stride_of(stage, name) is not None:
        return dataclasses.replace(traits, shard=STRIDE)
    return traits


def _known(op: str) -> bool:
    saved = _SAVED.get()
    return (saved is not None and op in saved) or is_declared(op)


@contextlib.contextmanager
def reading_traits() -> Iterator[dict[str, StageTraits]]:
    """Holds the traits of the documents read during the block (see `remember_traits`)."""
    saved: dict[str, StageTraits] = {}
    token = _SAVED.set(saved)
    try:
        yield saved
    finally:
        _SAVED.reset(token)


def remember_traits(documents: list[dict[str, Any]]) -> None:
    """Keeps the traits `documents` carry, for `traits_of` inside `reading_traits()`.

    Documents do not carry the readings: they are this release's (`with_readings`).
    """
    saved = _SAVED.get()
    if saved is not None:
        for document in documents:
            carried = saved_traits(document).items()
            saved.update({op: with_readings(op, traits) for op, traits in carried})


def shard_params(stage: Mapping[str, Any]) -> tuple[str, str]:
    """The names of a shard stage's (index, count) parameters."""
    names = traits_of(stage).shard
    assert names is not None
    return names


def check_declared(stages: list[dict[str, Any]]) -> None:
    """Raises unless the traits of every stage's op are known."""
    for number, item in enumerate(stages):
        if not _known(str(item["op"])):
            raise ReshardError(
                f"stage {number} ({item['op']}) is of an op whose traits neither the "
                "checkpoint carries nor any imported package declares, so what it does to "
                "positions is unknown; import the package that declares the op before "
                "resharding its states."
            )


def _saved_otherwise(op: str) -> str:
    """A note if the documents say `op` does other than this release declares, else ''."""
    saved = _SAVED.get()
    if saved is None or op not in saved or not is_declared(op) or saved[op] == stage_traits(op):
        return ""
    return (
        f" (The checkpoint records what {op} did in the chute that saved it, which this "
        "release does otherwise: a checkpoint saved by this release may reshard.)"
    )


def _keeping_positions() -> list[str]:
    known = {**declared_stages(), **(_SAVED.get() or {})}
    return sorted(op for op, traits in known.items() if traits.keeps_positions)


def _count_shards(branches: list[list[dict[str, Any]]]) -> int:
    return sum(
        bool(traits_of(item).shard) + _count_shards(item.get("inputs", []))
        for branch in branches
        for item in branch
    )


def shard_stage(stages: list[dict[str, Any]], kind: str | None) -> int | None:
    """The number of the one shard stage of a stream; None: no shard (a global pipeline).

    Raises:
        ReshardError: several shard stages, a nested one, or a shard in no stream.
    """
    found = [number for number, item in enumerate(stages) if traits_of(item).shard]
    real = [number for number in found if traits_of(stages[number]).shard != STRIDE]
    if len(real) == 1:  # A stride slice beside a shard stage subsamples.
        found = real
    nested = sum(_count_shards(item.get("inputs", [])) for item in stages)
    if not found and not nested:
        return None
    streams = any(traits_of(item).begins_stream for item in stages)
    if not streams or len(found) != 1 or nested:
        raise ReshardError(
            "reshard needs a chute.IterDataset pipeline with no shard stage or exactly one "
            f"(MapDataset...shard(i, n)...to_iter_dataset()); found {len(found) + nested} shard "
            f"stages in a {kind} pipeline."
        )
    return found[0]


def later_stages(stages: list[dict[str, Any]], shard_at: int) -> tuple[int, int | None]:
    """Elements per position of the state, and the chunk size of the state (if chunked).

    Raises:
        ReshardError: a stage after the shard that resharding cannot continue.
    """
    unit, chunk_size, streaming = 1, None, False
    split: int | None = None  # The flat map after the stream began, if any.
    held: int | None = None  # The window shuffle after the stream began, if any.
    grouped = False  # Whether a batch came before, turning positions into batches.
    split_grouped: int | None = None  # A batch of the flat map's outputs, if any.
    numbered: int | None = None  # A stage whose output follows the host's numbering.
    opened: int | None = None  # The interleave that began the stream, if any.
    repeated: int | None = None  # The stream repeat, if any.
    map_repeated: int | None = None  # A MapDataset.repeat of the shard, if any.
    for number, item in enumerate(stages[shard_at + 1 :], start=shard_at + 1):
        traits = traits_of(item)
        if map_repeated is not None and _not_by_epochs(traits, streaming):
            raise ReshardError(_after_map_repeat(stages, map_repeated, number))
        if numbered is not None and _continues_elements(item, traits):
            raise ReshardError(_renumbered(stages, numbered, number))
        if numbered is None and _numbers(item, traits):
            numbered = number
        plain = streaming and unit == 1 and not grouped  # Elements are still positions.
        if opened is not None and traits.holds and held is not None:
            raise ReshardError(_held_again(stages, opened, held, number))
        if repeated is not None and (traits.splits or traits.holds or traits.merges):
            raise ReshardError(_after_repeat(stages, repeated, number))
        if traits.repeats and streaming and (split, held, opened, repeated) != (None,) * 4:
            raise ReshardError(_repeat_after(stages, number, split, held, opened, repeated))
        if traits.repeats and plain:
            repeated = number  # Each epoch continues on its own; see `_reshard_epochs`.
        elif traits.repeats and not streaming and unit == 1 and map_repeated is None:
            map_repeated = number  # A stride of each epoch; see `_reshard_lengths`.
        elif traits.opens and not streaming and unit == 1 and not grouped:
            opened = number  # Its open streams continue elsewhere; see `_reshard_streams`.
            if stages[shard_at]["params"].get("drop_remainder") is True:
                raise ReshardError(_files_dropped(stages, shard_at, number))
        elif traits.splits and plain and split is None:
            split = number  # Its element goes back to be read; see `_reshard_splits`.
        elif traits.holds and plain and split is None and _holds_after(stages, held, traits):
            held = number if held is None else held  # See `_reshard_windows`.
        elif not traits.keeps_positions and not traits.records_skips:
            raise ReshardError(
                f"stage {number} ({item['op']}) follows the shard stage and changes which "
                "position of the shard an element is (or keeps state across elements), so "
                "the global sequence cannot be re-cut; put it before .shard(...), or "
                f"restore with the same process count. Stages allowed after shard: "
                f"{_keeping_positions()}.{_saved_otherwise(str(item['op']))}"
            )
        if traits.begins_stream:
            streaming = True
        elif traits.groups is not None and not streaming:
            unit *= integer_parameter(item, number, traits.groups, 1, "state 0")
        grouped = grouped or traits.groups is not None or traits.merges
        if split is not None and number > split and (traits.groups or traits.merges):
            split_grouped = number if split_grouped is None else split_grouped
        if traits.records_skips and held is not None:
            raise ReshardError(
                f"stage {number} ({item['op']}) counts the failures of elements that the "
                f"{stages[held]['op']} of stage {held} holds, which go back to be read at a "
                "reshard and would be counted again; put it before "
                f"{stages[held]['op']}(...), or restore with the same process count."
            )
        if traits.chunk is not None:
            _check_workers(stages, number, traits, held if held is not None else split)
            if split is not None and split_grouped is not None:
                raise ReshardError(_batched_in_workers(stages, number, split, split_grouped))
        if traits.chunk is not None and item["params"].get(traits.chunk) is not None:
            chunk_size = integer_parameter(item, number, traits.chunk, 1, "state 0")
    return unit, chunk_size


def _holds_after(stages: list[dict[str, Any]], held: int | None, traits: StageTraits) -> bool:
    """Whether a stage that holds elements may follow the one of stage `held` (if any).

    A packer may follow a window shuffle (shuffled documents packed into rows): each
    holds its parent's state before what it holds, so the elements of both go back to
    be read. A window of rows, or of another window, would hold elements whose
    positions its state does not name.
    """
    if held is None:
        return True
    return traits.merges and not traits_of(stages[held]).merges


def _not_by_epochs(traits: StageTraits, streaming: bool) -> bool:
    """Whether a stage after a `MapDataset.repeat` of the shard does not reshard with it.

    Its positions are a stride of each epoch: a window, packer, interleave, another
    repeat or a `MapDataset.batch` would name them in ways resharding does not count so.
    """
    grouped = traits.groups is not None and not streaming
    return traits.holds or traits.merges or traits.opens or traits.repeats or grouped


def _after_map_repeat(stages: list[dict[str, Any]], repeated: int, number: int) -> str:
    op = stages[number]["op"]
    if traits_of(stages[number]).groups is not None:
        op = f"MapDataset.{op}"  # A batch of the stream would be allowed.
    return (
        f"stage {number} ({op}) follows the repeat of stage {repeated}, which repeats each "
        f"shard by itself (a MapDataset.repeat after the shard): its positions are a stride "
        f"of each epoch, which resharding continues under maps, filters, flat maps, "
        f"IterDataset batches and prefetching, not under {op}; repeat before the shard, "
        "or restore with the same process count."
    )


def _held_again(stages: list[dict[str, Any]], opened: int, held: int, number: int) -> str:
    op, before = stages[number]["op"], stages[held]["op"]
    return (
        f"stage {number} ({op}) holds the elements of the {before} of stage {held}, over the "
        f"{stages[opened]['op']} of stage {opened}: their order within each stream is "
        f"shuffled, which its state cannot name by stream and position for another process "
        f"count; use one of them over the {stages[opened]['op']}, or restore with the same "
        "process count."
    )


def _after_repeat(stages: list[dict[str, Any]], repeated: int, number: int) -> str:
    op = stages[number]["op"]
    return (
        f"stage {number} ({op}) follows the repeat of stage {repeated}, and holds or splits "
        "elements across the epochs it reads, which another process count cuts at other "
        f"points; put {op}(...) before the repeat (or repeat before the shard), or restore "
        "with the same process count."
    )


def _repeat_after(stages: list[dict[str, Any]], number: int, *earlier: int | None) -> str:
    before = next(n for n in earlier if n is not None)
    return (
        f"stage {number} (repeat) reads again the {stages[before]['op']} of stage {before}, "
        "whose state another process count continues only once, not per epoch; repeat "
        "before the shard, or restore with the same process count."
    )


def _files_dropped(stages: list[dict[str, Any]], shard_at: int, opened: int) -> str:
    return (
        f"the {stages[opened]['op']} of stage {opened} reads the shard of stage {shard_at}, "
        "taken with drop_remainder=True: another process count drops other positions, so "
        "a stream a process left open may be dropped; shard without drop_remainder, or "
        "restore with the same process count."
    )


def _check_workers(
    stages: list[dict[str, Any]], number: int, traits: StageTraits, ahead: int | None
) -> None:
    """Raises if chunked stage `number` runs a stage whose elements its state cannot name.

    A window or packed rows (held), or a split unless the stage `names_splits`.
    """
    if ahead is None or (traits_of(stages[ahead]).splits and traits.names_splits):
        return
    op, inner = stages[number]["op"], stages[ahead]["op"]
    raise ReshardError(
        f"stage {number} ({op}) runs the {inner} of stage {ahead} in its workers, whose "
        "state counts outputs within a unit of work, not positions, so an element or window "
        f"a process stopped inside cannot be continued elsewhere; apply the {inner} after "
        f"{op}(...), or restore with the same process count.{_saved_otherwise(str(op))}"
    )


def _batched_in_workers(stages: list[dict[str, Any]], number: int, split: int, batch: int) -> str:
    op, batched = stages[number]["op"], stages[batch]["op"]
    return (
        f"stage {number} ({op}) runs the {batched} of stage {batch} in its workers, over the "
        f"outputs of the {stages[split]['op']} of stage {split}: its state counts what "
        f"{batched} gives, outputs of several elements at once, so an element a process "
        f"stopped inside cannot be continued elsewhere; apply the {batched} after {op}(...) "
        "(the workers still build the batches), or restore with the same process count."
    )


def _numbers(item: Mapping[str, Any], traits: StageTraits) -> bool:
    """Whether the stage's output follows the number its process gives the element.

    By what the checkpoint says, or this release's declaration: older checkpoints do not
    say it.
    """
    name = traits.numbered or stage_traits(str(item["op"])).numbered
    return name is not None and (name == "always" or item["params"].get(name) != "record")


def _continues_elements(item: Mapping[str, Any], traits: StageTraits) -> bool:
    """Whether the stage continues elsewhere an element a process stopped inside.

    A split (flat map, unbatch, rebatch), an interleave (a stream left open goes on from
    its state), or a packer that cuts elements between rows (`method="concat_split"`);
    other packers put back whole elements, as a window does.
    """
    return (
        traits.splits
        or traits.opens
        or (traits.merges and item["params"].get("method") == "concat_split")
    )


def _renumbered(stages: list[dict[str, Any]], numbered: int, number: int) -> str:
    item, op = stages[number], stages[numbered]["op"]
    also = ', or key="record" to draw by record' if traits_of(stages[numbered]).random else ""
    return (
        f"stage {number} ({item['op']}) continues elsewhere an element a process stopped "
        f"inside, but stage {numbered} ({op}) before it makes that element from the number "
        "its process gives it, which another process count gives anew, so the element "
        f"would differ; put {op}(...) after {item['op']}(...){also}, or restore with the same "
        "process count."
    )


def branches(stages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The pipelines resharding treats on their own: a mixture's components, or `stages`.

    Raises:
        ReshardError: a stage after a mixture of sharded streams that resharding cannot
            continue.
    """
    if not mixes_sharded(stages):
        return [stages]
    for number, item in enumerate(stages[1:], start=1):
        traits = traits_of(item)
        if not (traits.keeps_positions or traits.records_skips):
            raise ReshardError(
                f"stage {number} ({item['op']}) follows the mixture of sharded streams and "
                "changes which element of the mixture an output is (or keeps elements across "
                "steps), so the components cannot be resharded under it; restore with the "
                "same process count."
            )
    return [list(branch) for branch in stages[0]["inputs"]]


def mixes_sharded(stages: list[dict[str, Any]]) -> bool:
    """Whether the pipeline begins with a mixture of streams with a shard stage inside."""
    if not stages or not traits_of(stages[0]).chooses:
        return False
    inputs = stages[0].get("inputs", [])
    streams = all(any(traits_of(item).begins_stream for item in branch) for branch in inputs)
    return bool(inputs) and streams and _count_shards(inputs) > 0
