"""Resharding a flat map after the shard: elements delivered in part, by global position.

(A concat-then-split packer delivers an element's tokens in part the same way: its state
names the element (`at`) and the tokens emitted (`skip`), and a resharded one drops
them (`drop`); see `chute_transforms.internal.PACK_STATES`. A flat map inside the
workers, before `mp_prefetch`, too: the workers' state names the element and the
outputs of it delivered (`at`), and a resharded one lists what the workers leave out
(`skip`); see `chute_execution.internal.CHUNK_POSITIONS`.)

A flat map's state (after `.shard(i, n)...to_iter_dataset()`) is its parent's before
the element it stopped inside, so that element goes back to be read again by whichever
new process reads its position. The outputs already delivered of it must not come
again: the state names the element (`at`) and how many (`offset`, plus those a `skip`
entry had dropped), and entries of earlier reshards it has not reached yet. Resharding
gathers them as global positions (`delivered_ahead`) and hands each to the new process
whose shard holds it (`assign_skips`), which drops those outputs when it reads it.

Over an interleave of the shard's files (`_reshard_streams`) the element is named by its
file and its position in it (`[input, position]`): the entry goes to the file's new
owner, whose flat map drops the outputs when the file reaches it.

At most one entry per old process comes from each reshard, and an entry goes once its
new process reads its element, so a state holds a few pairs of ints, never more with the
data.

Example:
    >>> state = {"parent": {"position": 3}, "index": 5, "offset": 2, "at": 4}
    >>> delivered_ahead([{"parent": {"position": 1}, "index": 1, "offset": 0}, state],
    ...                 [1, 3], 2, "state")
    ((9, 2),)
    >>> new = {"parent": {"position": 3}, "index": 0, "offset": 0}
    >>> assign_skips(new, ((9, 2),), 1, 4)["skip"]  # Global 9 is position 2 of shard 1 of 4.
    [[2, 2]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from chute_execution.internal import CHUNK_POSITIONS
from chute_samplers.internal import residue, shard_global, shard_locals
from chute_transforms.internal import PACK_STATES, PARENT_STATES

from ._errors import ReshardError
from ._reshard_windows import inner_state

__all__ = ["assign_skips", "delivered_ahead"]


def _split_state(state: Any) -> tuple[dict[str, Any], Any] | None:
    """The state inside `state` of a stage that delivers elements in part, with its layout.

    A flat map's (`PARENT_STATES`: outputs of an element) or a concat-then-split
    packer's (`PACK_STATES`: tokens of an element), walking the parents' states; else
    the workers' (`CHUNK_POSITIONS`: outputs of an element a flat map split in them).
    """
    while isinstance(state, dict):
        for layout in (PACK_STATES, PARENT_STATES):
            if layout.is_split(state):
                return state, layout
        try:
            inner = inner_state(state)
        except ValueError:
            return None  # Not a wrapper's state: no flat map below.
        if inner is None:
            return (state, CHUNK_POSITIONS) if CHUNK_POSITIONS.is_split(state) else None
        state = inner
    return None


def delivered_ahead(
    states: Sequence[Any], positions: Sequence[int], count: int, where: str, epoch: int = 0
) -> tuple[tuple[Any, int], ...]:
    """`(global position, outputs delivered)` of the elements the shards left in part.

    Over an interleave an element is named by its stream and its position in it: the
    global position of the stream's input and the element's, as a pair.

    Args:
        states: the state of each shard `0..count-1`, in shard order.
        positions: each shard's reader position (what it has read: the positions before
            it are consumed, so entries there are stale).
        count: the number of shards (global position of shard `i`'s `j`: `i + count * j`,
            or of each epoch of `epoch` records, see `chute_samplers.internal.shard_global`).
        where: how to name the states in errors.
        epoch: records per epoch of a sampler's per-epoch stride (0: the stream's).

    Raises:
        ReshardError: a damaged flat map state.
    """
    found: dict[Any, int] = {}
    for shard, (state, position) in enumerate(zip(states, positions, strict=True)):
        inside = _split_state(state)
        if inside is None:
            continue
        split, layout = inside
        try:
            entries = layout.delivered(split)
        except ValueError as error:
            raise ReshardError(f"{where} {shard}: {error}") from None
        for local, outputs in entries.items():
            if isinstance(local, tuple):  # (input, position): the stream goes to its owner.
                found[(shard_global(local[0], shard, count), local[1])] = outputs
            elif local >= position:  # Not yet read: its owner drops what came before.
                found[shard_global(local, shard, count, epoch)] = outputs
    return tuple(sorted(found.items(), key=lambda item: (isinstance(item[0], tuple), item[0])))


def assign_skips(
    state: Any, delivered: Sequence[tuple[Any, int]], shard: int, count: int, epoch: int = 0
) -> Any:
    """`state` (shard `shard` of `count`'s) with the entries its shard holds, as `skip`."""
    found = _split_state(state)
    if found is not None:
        split, layout = found
        mine = [(g, n) for g, n in delivered if not isinstance(g, tuple)]
        mine = [(g, n) for g, n in mine if residue(g, count, epoch) == shard]
        locals_ = shard_locals(np.array([g for g, _ in mine], np.int64), shard, count, epoch)
        entries: list[list[Any]] = [[int(p), n] for p, (_, n) in zip(locals_, mine, strict=True)]
        streams = [(g, n) for g, n in delivered if isinstance(g, tuple)]
        streams = [(g, n) for g, n in streams if residue(g[0], count, 0) == shard]
        inputs = shard_locals(np.array([g[0] for g, _ in streams], np.int64), shard, count, 0)
        for number, ((_, at), n) in zip(inputs.tolist(), streams, strict=True):
            entries.append([[number, at], n])
        layout.with_skips(split, entries)
    return state
