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

What a state keeps stays bounded: the open streams of every old process, at most
`cycle_length` each, and what was still pending from an earlier reshard; a pending
stream goes once its new owner opens it.

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
from collections.abc import Sequence
from typing import Any

import numpy as np

from chute_samplers.internal import OPEN_STREAMS, residue, shard_global, shard_locals

from ._errors import ReshardError
from ._reshard_windows import inner_state

__all__ = ["assign_opened", "opened_ahead"]


def _interleave_state(state: Any) -> dict[str, Any] | None:
    """The interleave's state inside `state` (walking parents' states), if any."""
    while isinstance(state, dict):
        if OPEN_STREAMS.is_state(state):
            return state
        try:
            state = inner_state(state)
        except ValueError:
            return None
    return None


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


def assign_opened(state: Any, opened: Sequence[tuple[int, Any]], shard: int, count: int) -> Any:
    """`state` (shard `shard` of `count`'s) continuing the open streams its shard holds."""
    interleave = _interleave_state(state)
    if interleave is None:
        return state
    mine = [(g, inner) for g, inner in opened if residue(g, count, 0) == shard]
    if mine:
        locals_ = shard_locals(np.array([g for g, _ in mine], np.int64), shard, count, 0)
        pending = [(int(p), inner) for p, (_, inner) in zip(locals_, mine, strict=True)]
        written = OPEN_STREAMS.write(interleave, OPEN_STREAMS.position(interleave), pending)
        interleave.update(written)
    return state
