"""Resharding an interleave of the shard's streams: the streams open go to their owners.

An interleave after the shard (`IterDataset.interleave(files.shard(i, n).map(open))`)
opens position after position of its shard as a stream of its own. Its state
(`chute_samplers.internal.OPEN_STREAMS`) says the next position it opens, so the
positions before it were opened, and the state of each stream still open. For
resharding, a process counts as stopped at its next position, as a reader does: the
streams it read to the end are behind it, and the new processes skip the positions it
opened (a `Frontier`). The streams it left open are read in part: each goes, with its
state, to the new process whose shard holds its position, which continues it (as
`pending`) before opening any position of its own. So every element of every stream
comes once.

A window shuffle after the interleave counts as stopped at its window's start (its
state holds the interleave's state there), so the window goes back to be read; the
elements it already yielded are named by their stream and position in it (the
window's `reads`), and go, by stream, to the new owner of the stream, which leaves them
out when it reads it (the interleave's `skips`). A packer that puts whole elements in
rows (first fit, best fit) does the same with its open rows: its state holds the
interleave's state before the oldest element in one, and names the elements read since
(`reads`), of which those not held were emitted.

What a state keeps stays bounded: the open and pending streams (at most `cycle_length`
times the largest process count of the run) and the positions to skip (a window per old
process when processes read a window between reshards); a pending stream goes once its
new owner opens it, a position to skip once it is read.

Example:
    >>> olds = [{"cursor": 0, "next_input": 2, "slots": [{"input": 1, "state": {"p": 3}}]},
    ...         {"cursor": 0, "next_input": 1, "slots": [None]}]
    >>> opened_ahead(olds, 2)  # Position 1 of shard 0 of 2 is global position 2.
    ((2, {'p': 3}),)
    >>> new = {"cursor": 0, "next_input": 1, "slots": [None]}
    >>> assign_opened(new, opened_ahead(olds, 2), 0, 1)["pending"]  # Position 2 of 1 shard.
    [[2, {'p': 3}]]
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from chute_core import InvalidStateError, StageTraits
from chute_samplers import InterleaveIter, MixIter, upstream_iterators
from chute_samplers.internal import (
    OPEN_STREAMS,
    residue,
    shard_global,
    shard_locals,
)

from ._errors import ReshardError
from ._reshard_stages import traits_of
from ._reshard_windows import find_state, holding_states

__all__ = ["assign_opened", "check_window_streams", "opened_ahead", "skips_ahead"]


def _interleave_state(state: Any) -> dict[str, Any] | None:
    """The interleave's state inside `state`, if any."""
    found: dict[str, Any] | None = find_state(state, OPEN_STREAMS.is_state)
    return found


def opened_ahead(
    states: Sequence[Any], count: int, where: str = "the state of shard"
) -> tuple[tuple[int, Any], ...]:
    """`(global position, stream state)` of the streams the shards left open, in order.

    Args:
        states: the state of each shard `0..count-1`, in shard order.
        count: the number of shards.
        where: how to name the states in errors.

    Raises:
        ReshardError: a damaged interleave state.
    """
    found: dict[int, Any] = {}
    for shard, state in enumerate(states):
        interleave = _interleave_state(state)
        if interleave is None:
            continue
        try:
            opened = OPEN_STREAMS.opened(interleave)
        except ValueError as error:
            raise ReshardError(f"{where} {shard}: {error}") from None
        for local, inner in opened.items():
            found[shard_global(local, shard, count)] = copy.deepcopy(inner)
    return tuple(sorted(found.items(), key=lambda entry: entry[0]))


def skips_ahead(
    states: Sequence[Any],
    count: int,
    stages: Sequence[Mapping[str, Any]],
    where: str = "the state of shard",
) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """`(global position, positions)`: the elements of streams delivered, by stream.

    Those a window shuffle after the interleave yielded of its window, or a packer
    emitted in rows since its oldest open row, and those an earlier reshard said to skip
    that were not read yet.

    Raises:
        ReshardError: a damaged state, or a window that does not name what it yielded.
    """
    found: dict[int, set[int]] = {}
    for shard, state in enumerate(states):
        interleave = _interleave_state(state)
        if interleave is None:
            continue
        try:
            by_input = OPEN_STREAMS.skipped(interleave)
            for layout, held, params in holding_states(state, stages):
                for local, yielded in layout.yielded(held, params).items():
                    by_input.setdefault(local, []).extend(yielded)
        except (ValueError, InvalidStateError) as error:
            raise ReshardError(f"{where} {shard}: {error}") from None
        for local, positions in by_input.items():
            found.setdefault(shard_global(local, shard, count), set()).update(positions)
    return tuple((g, tuple(sorted(found[g]))) for g in sorted(found))


def assign_opened(
    state: Any,
    opened: Sequence[tuple[int, Any]],
    shard: int,
    count: int,
    skips: Sequence[tuple[int, Sequence[int]]] = (),
) -> Any:
    """`state` (shard `shard` of `count`'s) continuing the open streams its shard holds.

    And leaving out of its streams the elements `skips` names (by global position).
    """
    interleave = _interleave_state(state)
    if interleave is None:
        return state
    pending = _mine(opened, shard, count)
    skipped = dict(_mine(skips, shard, count))
    if pending or skipped:
        position = OPEN_STREAMS.position(interleave)
        interleave.update(OPEN_STREAMS.write(interleave, position, pending, skipped))
    return state


def _mine(entries: Sequence[tuple[int, Any]], shard: int, count: int) -> list[tuple[int, Any]]:
    """The entries of shard `shard` of `count`, by the shard's own position."""
    mine = [(g, value) for g, value in entries if residue(g, count, 0) == shard]
    if not mine:
        return []
    locals_ = shard_locals(np.array([g for g, _ in mine], np.int64), shard, count, 0)
    return [(int(p), value) for p, (_, value) in zip(locals_, mine, strict=True)]


def _names_elements(traits: StageTraits) -> bool:
    """Whether a stage names the interleave's elements in its state: it holds or splits."""
    return traits.holds or traits.splits


def check_window_streams(iterator: object, parts: Sequence[Sequence[Mapping[str, Any]]]) -> None:
    """Raises if a window shuffle (or packer, flat map) follows streams without positions.

    Such streams' elements have no position in their stream as origin
    (`InterleaveIter.stream_positions` is False), so what the window yielded could not
    be named at a reshard. Read from the live iterator: its description does not say it
    (the streams are made by the same function on every process, and a process may have
    none). In a mixture, each component's interleave is checked against its own stages.

    Raises:
        ReshardError: such a window, named with the interleave.
    """
    found = [_naming_after_interleave(stages) for stages in parts]
    if not any(found):
        return
    roots: list[tuple[int, object]] = [(0, iterator)]
    if len(parts) > 1:
        components = _components(iterator, len(parts))
        if components is None:  # Not found: the whole tree, against the first such stage.
            roots = [(next(k for k, item in enumerate(found) if item), iterator)]
        else:
            roots = list(enumerate(components))
    for component, root in roots:
        named = found[component]
        if named is None or not _unnumbered_interleave(root):
            continue
        stages, (number, opened) = parts[component], named
        whose = f"the mixture's component {component}: " if len(parts) > 1 else ""
        verb = "splits" if traits_of(stages[number]).splits else "holds"
        raise ReshardError(
            f"{whose}stage {number} ({stages[number]['op']}) {verb} elements of the interleave "
            f"of stage {opened}, whose streams do not number their elements by position "
            "(each is not a MapDataset read in order with to_iter_dataset(), nor a source "
            "whose class says origins_are_positions as ParquetStream does, or it splits or "
            "repeats inside), so what it yielded cannot be named for another process count; "
            "read each file as a MapDataset or with functools.partial(chute.ParquetStream, "
            "path), or restore with the same process count."
        )


def _naming_after_interleave(stages: Sequence[Mapping[str, Any]]) -> tuple[int, int] | None:
    """`(stage, interleave)`: the first stage after an interleave that names its elements."""
    opens = [n for n, item in enumerate(stages) if traits_of(item).opens]
    if not opens:
        return None
    after = [n for n, item in enumerate(stages) if n > opens[0]]
    named = [n for n in after if _names_elements(traits_of(stages[n]))]
    return (named[0], opens[0]) if named else None


def _components(iterator: object, count: int) -> list[object] | None:
    """The iterators of a mixture's `count` components, in order (None: not found)."""
    mixture = _first_under(
        iterator, lambda it: isinstance(it, MixIter) and len(upstream_iterators(it)) == count
    )
    return None if mixture is None else upstream_iterators(mixture)


def _unnumbered_interleave(iterator: object) -> bool:
    """Whether an interleave under `iterator` reads streams that do not number elements."""
    found = _first_under(
        iterator, lambda it: isinstance(it, InterleaveIter) and it.stream_positions is False
    )
    return found is not None


def _first_under(iterator: object, wanted: Callable[[object], bool]) -> object | None:
    """The first iterator `wanted` in `iterator`'s tree (itself and what it reads)."""
    seen: set[int] = set()
    todo = [iterator]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if wanted(current):
            return current
        todo.extend(upstream_iterators(current))
    return None
