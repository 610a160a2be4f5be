"""Resharding a stream repeat after the shard: a frontier for each epoch processes are in.

`.shard(i, n).to_iter_dataset()...repeat()` reads shard `i` again every epoch. Processes
stop in different epochs: process `i` in epoch `e_i` at position `p_i` consumed all of its
shard in the epochs before `e_i`, the positions below `p_i` in `e_i`, and nothing after
(a process resharded before also lists, for the epochs after its own, the parent's
states another process count left it, `chute_samplers.internal.REPEAT_STATES`'s
`ahead`). So each epoch from the smallest `e_i` to the largest one reached has its own
positions and frontiers, and reshards as a stream without a repeat does: the new
processes start in the smallest epoch, and their state lists the parent's state for
each later epoch (where it starts, which positions others consumed), which the repeat
takes when the epoch before ends. The state grows with the spread of epochs between
the processes, never with the data.

A whole epoch consumed has no position to name in a shard whose length is unknown, so
it is written as a position past any shard's end (`END`); the new readers' start is
clamped to their shard's end.

Example:
    >>> olds = [{"epoch": 1, "parent": {"position": 2}}, {"epoch": 0, "parent": {"position": 4}}]
    >>> for epoch, shards in epochs_read(olds):
    ...     print(epoch, shards)
    0 [(1099511627776, None), (None, {'position': 4})]
    1 [(None, {'position': 2}), (0, None)]
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from chute_samplers.internal import REPEAT_ENDED as ENDED
from chute_samplers.internal import REPEAT_STATES, Frontier, first_position

from ._errors import ReshardError
from ._reshard_positions import frontier_of, position_of
from ._reshard_shards import doc_name, own_chunk_size
from ._reshard_stages import traits_of
from ._reshard_windows import find_state

__all__ = [
    "END",
    "ahead_states",
    "assign_epochs",
    "epoch_plans",
    "epochs_read",
    "repeat_parent",
    "with_epochs",
]

T = TypeVar("T")
Level = tuple[int, tuple[int, ...]]

END = 1 << 40
"""A local position past the end of any shard: the shard's whole epoch was consumed."""


def _repeat_state(state: Any) -> dict[str, Any] | None:
    """The repeat's state inside `state` (walking the states of the stages after it)."""
    found: dict[str, Any] | None = find_state(state, lambda s: REPEAT_STATES.inner(s) is not None)
    return found


def repeat_parent(state: Any) -> Any:
    """A copy of the parent's state of the repeat inside `state` (its current epoch's)."""
    repeat = _repeat_state(state)
    return None if repeat is None else copy.deepcopy(repeat["parent"])


def epochs_read(
    states: Sequence[Any], last: int | None = None, where: str = "the state of shard"
) -> list[tuple[int, list[tuple[int | None, Any]]]]:
    """For each epoch from the smallest the shards are in: `(epoch, [(position, state)])`.

    Per shard in order: in its own epoch, and those its state lists ahead, `(None, the
    parent's state)` (the position is read from the state); before its own epoch,
    `(END, None)`; after, `(0, None)`. `last`: the repeat's last epoch (None: endless);
    shards that ended stand in the epoch after it.

    Raises:
        ReshardError: a state without a repeat, or a damaged one.
    """
    read: list[tuple[int, list[Any], list[Any]]] = []  # (epoch, parent, ahead) per shard.
    for shard, state in enumerate(states):
        repeat = _repeat_state(state)
        if repeat is None:
            raise ReshardError(f"{where} {shard} holds no repeat's state; the file is damaged.")
        try:
            epoch, ahead = REPEAT_STATES.epoch(repeat), REPEAT_STATES.ahead(repeat)
            read.append((epoch, [repeat["parent"]], ahead))
        except ValueError as error:
            raise ReshardError(f"{where} {shard}: {error}") from None
    # A shard that ended read all of every epoch: it does not hold the others back. Past
    # the last epoch of a finite repeat, it consumed every epoch up to the last; an
    # endless repeat ends only on a shard with nothing in it.
    ended = [epoch > (last if last is not None else ENDED - 1) for epoch, _, _ in read]
    live = [entry for entry, done in zip(read, ended, strict=True) if not done]
    low = min(epoch for epoch, _, _ in live or read)
    high = max(epoch + len(ahead) for epoch, _, ahead in live) if live else low
    if last is not None and live:  # Every epoch to the last if a shard ended, none after.
        high = last if any(ended) else min(high, last)
    epochs: list[tuple[int, list[tuple[int | None, Any]]]] = []
    for epoch in range(low, high + 1):
        shards: list[tuple[int | None, Any]] = []
        for (own, parent, ahead), done in zip(read, ended, strict=True):
            if epoch < own or (done and live):
                shards.append((END, None))
            elif epoch == own:
                shards.append((None, parent[0]))
            elif epoch - own - 1 < len(ahead):
                shards.append((None, ahead[epoch - own - 1]))
            else:
                shards.append((0, None))
        epochs.append((epoch, shards))
    return epochs


def assign_epochs(state: Any, epoch: int, ahead: Sequence[Any]) -> Any:
    """`state` with its repeat in `epoch`, and the parent's states `ahead` for later ones."""
    repeat = _repeat_state(state)
    if repeat is not None:
        written = REPEAT_STATES.write(repeat, epoch, repeat["parent"], list(ahead))
        repeat.clear()
        repeat.update(written)
    return state


def epoch_plans(
    ordered: Sequence[Mapping[str, Any]],
    at: int,
    plan: Callable[[list[int], list[Frontier | None]], T],
) -> tuple[int, list[T]]:
    """The first epoch the shards are in, and a plan for it and each later one reached.

    `ordered` are the documents by shard, `at` the shard stage of their pipeline, and
    `plan(positions, frontiers)` gives the plan of one epoch.

    Raises:
        ReshardError: a damaged state.
    """
    stages = ordered[0]["pipeline"]["stages"][at + 1 :]
    repeat = next(item for item in stages if traits_of(item).repeats)
    epochs = repeat["params"].get("num_epochs")
    last = epochs - 1 if type(epochs) is int else None
    count = len(ordered)
    plans: list[T] = []
    read = epochs_read([document["state"] for document in ordered], last)
    for _, shards in read:
        positions: list[int] = []
        frontiers: list[Frontier | None] = []
        for shard, ((position, state), document) in enumerate(zip(shards, ordered, strict=True)):
            frontier = None
            if position is None:
                where = doc_name(document)
                frontier = frontier_of(state, shard, count, 0, where)
                size = own_chunk_size(document, at)
                position = position_of(state, size, document["pipeline"], where, frontier)
            positions.append(position)
            frontiers.append(frontier)
        plans.append(plan(positions, frontiers))
    return read[0][0], plans


def with_epochs(
    before: Any,
    after: Any,
    epochs: tuple[int, Sequence[tuple[tuple[Level, ...], int]]],
    shard: tuple[int, int],
    move: Callable[[Any, int, Frontier], Any],
) -> Any:
    """`after` (`before` moved) with its repeat in the first of `epochs`, and the rest ahead.

    `epochs`: the first epoch, and each later one's `(levels, watermark)`; `shard`:
    the new shard's (index, count); `move(state, position, frontier)` moves the
    parent's state.
    """
    first, later = epochs
    ahead = ahead_states(repeat_parent(before), later, *shard, move)
    return assign_epochs(after, first, ahead)


def ahead_states(
    template: Any,
    later: Sequence[tuple[tuple[Level, ...], int]],
    shard: int,
    count: int,
    move: Callable[[Any, int, Frontier], Any],
) -> list[Any]:
    """The parent's states of shard `shard` of `count` for the epochs `later` plans.

    Each epoch's `(levels, watermark)`: the parent's state `template` moved to where the
    shard starts in it, with the frontier of the positions others consumed. Epochs at
    the end that nobody began are left out (the repeat starts them afresh).
    """
    later = list(later)
    while later and later[-1] == ((), 0):
        later.pop()
    states: list[Any] = []
    for levels, low in later:
        start = first_position(low, shard, count)
        frontier = Frontier(shard, count, levels).after(start) or Frontier(shard, count, ())
        states.append(move(copy.deepcopy(template), start, frontier))
    return states
