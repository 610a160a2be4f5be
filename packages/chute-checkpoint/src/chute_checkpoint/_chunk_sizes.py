"""Chunk sizes in a saved pipeline: how work was cut, never what comes out.

`mp_prefetch` and a `chute.DataLoader` record their chunk size in the pipeline, so it
is part of a checkpoint's fingerprint. A state that says where the stream stands by
position (`{"position": p, "offset": k}`) restores with any chunk size: the outputs
never depend on the cut. Only the states of older versions, which counted chunks
(`{"chunk": c, "offset": k}`), need the chunk size they were saved with. So a restore
whose pipelines differ only in chunk sizes goes ahead for a state by position; and the
default chunk size follows the length of a shard, so the shards of one run, or of a
resharded one, may differ in it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from chute_core import StageTraits

__all__ = ["counts_chunks", "only_chunk_sizes_differ", "without_chunk_sizes"]


def without_chunk_sizes(stages: list[dict[str, Any]], traits: Callable[[str], StageTraits]) -> None:
    """Blanks the chunk sizes of `stages` (and of their inputs), in place.

    Example:
        >>> stages = [{"op": "chunks", "params": {"chunk_size": 4}}]
        >>> without_chunk_sizes(stages, lambda op: StageTraits(chunk="chunk_size"))
        >>> stages
        [{'op': 'chunks', 'params': {'chunk_size': None}}]
    """
    for stage in stages:
        if not isinstance(stage, dict) or not isinstance(stage.get("params"), dict):
            continue
        name = traits(str(stage.get("op"))).chunk
        if name is not None and name in stage["params"]:
            stage["params"][name] = None
        for branch in stage.get("inputs", ()) or ():
            if isinstance(branch, list):
                without_chunk_sizes(branch, traits)


def counts_chunks(state: Any) -> bool:
    """Whether `state` holds a position counted in chunks (`{"chunk": c, "offset": k}`).

    Example:
        >>> counts_chunks({"parent": {"chunk": 2, "offset": 0}}), counts_chunks({"position": 3})
        (True, False)
    """
    if isinstance(state, Mapping):
        if "chunk" in state and "offset" in state:
            return True
        return any(counts_chunks(value) for value in state.values())
    if isinstance(state, list):
        return any(counts_chunks(value) for value in state)
    return False


def only_chunk_sizes_differ(
    saved: Mapping[str, Any],
    current: Mapping[str, Any],
    traits: Callable[[str], StageTraits],
    fingerprint: Callable[[Mapping[str, Any]], str],
) -> bool:
    """Whether the pipelines `saved` and `current` are the same but for chunk sizes.

    Example:
        >>> from chute_checkpoint import fingerprint
        >>> a = {"kind": "DataLoader", "stages": [{"op": "chunks", "params": {"chunk_size": 4}}]}
        >>> b = {"kind": "DataLoader", "stages": [{"op": "chunks", "params": {"chunk_size": 8}}]}
        >>> only_chunk_sizes_differ(a, b, lambda op: StageTraits(chunk="chunk_size"), fingerprint)
        True
    """
    blanked = []
    for pipeline in (saved, current):
        copied = copy.deepcopy(dict(pipeline))
        if isinstance(copied.get("stages"), list):
            without_chunk_sizes(copied["stages"], traits)
        blanked.append(fingerprint(copied))
    return blanked[0] == blanked[1]
