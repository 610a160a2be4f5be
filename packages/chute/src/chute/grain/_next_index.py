"""Grain's `get_next_index` / `set_next_index`: an iterator's position in its own output.

Grain lets a caller ask which element an iterator yields next, counted in the
iterator's own elements (batches after a batch), and move it there without reading.
chute's iterators keep positions in their states; this module reads and rewrites them,
guided by the pipeline's description (`chute_pipeline`):

- the position lives in the reader that begins the stream (`to_iter_dataset`), or in
  the one open input of an interleave over a single dataset;
- every stage after it must yield one element per element it reads (maps, prefetch,
  worker processes), or group a fixed number into one (a batch: positions scale by its
  size, as in Grain, where the next batch index is the parent's rounded up);
- stages that drop or multiply elements (filter, flat_map, packing, mixing, ...) have
  no such index, and Grain raises `NotImplementedError` for them: so does chute.

Each stage's own counter (`map_with_index`'s index, a random map's draw number) is
moved with the position, so the elements after `set_next_index` are the ones an
uninterrupted run yields there.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

from chute_core import InvalidStateError, PipelineStage, stage_traits
from chute_samplers import InterleaveIter, upstream_iterators

__all__ = ["get_next_index", "set_next_index"]

# Stream ops that yield exactly one element per element read (until a limit ends the
# stream), though their declared traits do not say so: each counts its position.
_ONE_FOR_ONE = frozenset({"limit", "map_with_index", "random_map"})
_READER_KEYS = ({"position"}, {"position", "offset"})
_LEVEL_KEYS = ({"parent"}, {"parent", "index"}, {"parent", "count"})
_COUNTERS = ("index", "count")  # A stage's count of the elements it yielded.


def _refuse(why: str) -> NotImplementedError:
    return NotImplementedError(f"get_next_index / set_next_index: {why}")


def _segment(stages: Sequence[PipelineStage]) -> tuple[PipelineStage, list[int]]:
    """The stage that holds the position, and the batch sizes after it, last first."""
    for number in range(len(stages) - 1, -1, -1):
        stage = stages[number]
        if stage.op == "interleave" or stage_traits(stage.op).begins_stream:
            break
    else:
        raise _refuse("the pipeline has no stream stage (call them on an IterDataset's iterator).")
    sizes: list[int] = []
    for after in stages[number + 1 :]:
        traits = stage_traits(after.op)
        if traits.groups is not None:
            sizes.append(int(dict(after.params)[traits.groups]))
        elif not (
            (traits.keeps_positions or traits.elementwise or after.op in _ONE_FOR_ONE)
            and not traits.drops
        ):
            raise _refuse(
                f"the stage {after.op!r} does not yield one element per element it reads, "
                "so its output has no index to move to without reading (as in Grain)."
            )
    return stage, sizes[::-1]


def _levels(state: Any, batches: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The nested states above the position holder (top first), and the holder's state."""
    levels: list[dict[str, Any]] = []
    while isinstance(state, dict):
        keys = set(state)
        if keys in _READER_KEYS or "slots" in keys:
            if sum(set(level) == {"parent"} for level in levels) != batches:
                raise _refuse(f"this iterator's state does not follow its stages: {state!r}.")
            return levels, state
        if keys not in _LEVEL_KEYS:
            raise _refuse(f"a stage keeps more than a position in its state: {sorted(keys)}.")
        levels.append(state)
        state = state["parent"]
    raise _refuse(f"this iterator's state holds no position: {state!r}.")


def _one_input(stage: PipelineStage) -> Sequence[PipelineStage]:
    if not stage.inputs:  # Described by the sharded MapDataset it reads.
        raise _refuse(
            "an interleave over a sharded MapDataset of datasets has no single next index "
            "(Grain supports one dataset only)."
        )
    if len(stage.inputs) != 1:
        raise _refuse(
            f"an interleave of {len(stage.inputs)} datasets has no single next index (Grain "
            "supports one dataset only)."
        )
    return stage.inputs[0]


def _index(stages: Sequence[PipelineStage], state: Any) -> int:
    holder, sizes = _segment(stages)
    _, inner = _levels(state, len(sizes))
    if holder.op == "interleave":
        slot = inner["slots"][0]
        if slot is None:
            if inner["next_input"]:
                raise _refuse("the interleave's one input has ended; its position is gone.")
            return 0
        position = _index(_one_input(holder), slot["state"])
    else:
        if inner.get("offset", 0):
            raise _refuse(f"the iterator is inside a chunk of its workers' output: {inner!r}.")
        position = int(inner["position"])
    return math.ceil(position / math.prod(sizes))


def _moved(
    stages: Sequence[PipelineStage], state: Any, index: int, interleaves: list[InterleaveIter[Any]]
) -> Any:
    holder, sizes = _segment(stages)
    moved = copy.deepcopy(state)
    levels, inner = _levels(moved, len(sizes))
    scale, batch = 1, iter(sizes)
    for level in levels:
        counters = [key for key in _COUNTERS if key in level]
        if counters:
            level[counters[0]] = index * scale
        else:
            scale *= next(batch)
    target = index * scale
    if holder.op != "interleave":
        inner["position"] = target
        if "offset" in inner:
            inner["offset"] = 0
        return moved
    if not interleaves:
        raise _refuse("the interleave's iterator was not found among the iterator's parents.")
    interleave, *rest = interleaves
    inputs = _one_input(holder)
    slot = inner["slots"][0]
    start = interleave.input_start_state(0) if slot is None else slot["state"]
    inner["slots"][0] = {"input": 0, "state": _moved(inputs, start, target, rest)}
    inner["cursor"], inner["next_input"] = 0, 1
    return moved


def _stages(ds_iter: Any) -> Sequence[PipelineStage]:
    description = getattr(ds_iter, "chute_pipeline", None)
    if description is None:
        raise _refuse(f"{type(ds_iter).__name__} is not an iterator of a chute dataset.")
    return tuple(description.stages)


def _interleaves(ds_iter: Any) -> list[InterleaveIter[Any]]:
    """The interleave iterators behind `ds_iter`, outermost first."""
    found: list[InterleaveIter[Any]] = []
    todo: list[object] = [ds_iter]
    while todo:
        iterator = todo.pop(0)
        if isinstance(iterator, InterleaveIter):
            found.append(iterator)
        todo.extend(upstream_iterators(iterator))
    return found


def get_next_index(ds_iter: Any) -> int:
    """The index, in the iterator's own elements, of the element it yields next.

    After a batch it counts batches (Grain's rule: the parent's next index divided by
    the batch size, rounded up).

    Raises:
        NotImplementedError: a stage drops or multiplies elements (a filter, flat_map,
            packing, a mixture, an interleave of several datasets), as in Grain.

    Example:
        >>> import chute
        >>> it = iter(chute.MapDataset.range(10).to_iter_dataset().batch(3))
        >>> _ = next(it), next(it)
        >>> get_next_index(it)
        2
    """
    return _index(_stages(ds_iter), ds_iter.get_state())


def set_next_index(ds_iter: Any, index: int) -> None:
    """Moves the iterator so that it yields element `index` (of its own) next.

    Nothing is read: the positions in the iterator's state are rewritten and restored.

    Raises:
        NotImplementedError: as `get_next_index`.
        IndexError: `index` is negative, or past the end of the data.

    Example:
        >>> import chute
        >>> it = iter(chute.MapDataset.range(10).to_iter_dataset().batch(3))
        >>> set_next_index(it, 2)
        >>> [batch.tolist() for batch in it]
        [[6, 7, 8], [9]]
    """
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"set_next_index: index must be an int, got {index!r}.")
    if index < 0:
        raise IndexError(f"set_next_index: index must be >= 0, got {index}.")
    state = _moved(_stages(ds_iter), ds_iter.get_state(), index, _interleaves(ds_iter))
    try:
        ds_iter.set_state(state)
    except InvalidStateError as error:  # Only positions changed: one is out of range.
        raise IndexError(f"set_next_index: index {index} is out of range: {error}") from error
