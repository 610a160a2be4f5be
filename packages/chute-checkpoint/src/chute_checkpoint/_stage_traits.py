"""What each stage of a saved pipeline does to positions, as the document itself says.

A state document (format version 2 and later) carries the traits of every op of its
pipeline, `{"traits": {op: StageTraits.as_json()}}`, written when it was saved from the
layers that declare the ops. Resharding reads them from the document, so a document is
resharded in a process that imported none of those layers. Documents of version 1
carry none: the upgrade gives them the traits the ops had when version 1 was written
(`VERSION_1_TRAITS`, a fixed table), and, for ops it does not list (a user's own), the
traits declared in this process.

Example:
    >>> ops_of({"stages": [{"op": "map", "params": {}}, {"op": "batch", "params": {}}]})
    ['map', 'batch']
    >>> VERSION_1_TRAITS["filter"]
    {'elementwise': True, 'keeps_positions': True, 'drops': True}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from chute_core import StageTraits, is_declared, stage_traits

__all__ = [
    "READINGS",
    "VERSION_1_TRAITS",
    "ops_of",
    "saved_json",
    "saved_traits",
    "traits_of_ops",
    "upgrade_version_1",
    "with_readings",
]

READINGS = ("keeps_length", "stride")
"""Traits that say how to read a stage's description, not what the op does to positions
(`StageTraits.keeps_length`, `.stride`). Documents do not carry them, so that a chute of
the same format version before them reads today's documents; resharding takes them
from this release's declarations (`with_readings`)."""

_KEEPS = {"keeps_positions": True}
_ELEMENTWISE = {"elementwise": True, "keeps_positions": True}
VERSION_1_TRAITS: dict[str, dict[str, Any]] = {
    "source": {},
    "range": {},
    "slice": {},
    "mix": {},
    "select_from": {},
    "interleave": {},
    "repeat": {},
    "unbatch": {},
    "map_with_index": {},
    "map_with_key": _ELEMENTWISE,
    "seed": _KEEPS,
    "map": _ELEMENTWISE,
    "random_map": {"elementwise": True, "random": True},
    "filter": {"elementwise": True, "keeps_positions": True, "drops": True},
    "flat_map": {"elementwise": True, "drops": True},
    "shuffle": {"random": True},
    "window_shuffle": {"random": True},
    "shard": {"shard": ["shard_index", "shard_count"]},
    "batch": {"keeps_positions": True, "groups": "batch_size", "performance": ["rows"]},
    "to_iter_dataset": {
        "keeps_positions": True,
        "begins_stream": True,
        "performance": ["read_options"],
    },
    "prefetch": {"keeps_positions": True, "performance": ["buffer_size"]},
    "mp_prefetch": {
        "keeps_positions": True,
        "chunk": "chunk_size",
        "performance": ["num_workers", "per_worker_buffer_size", "worker_buffer_size"],
    },
    "to_device": {
        "keeps_positions": True,
        "consumer_only": True,
        "performance": ["cpu_buffer_size", "device", "device_buffer_size", "lockstep"],
    },
    "skip_errors": {"records_skips": True},
    "pack": {},
    "limit": {},
    "zip": {},
    "rebatch": {},
    "cache": {},
    "concatenate": {},
    # chute.DataLoader's stages (chute_execution).
    "data_source": {},
    "sampler": {},
    "operation": {},
    "chunks": {},
    "error_budget": {},
}
"""The traits of the ops that existed when documents of format version 1 were written."""


def ops_of(pipeline: Mapping[str, Any]) -> list[str]:
    """The ops of a pipeline description, inputs included, each once, in order."""
    found: list[str] = []

    def walk(stages: Any) -> None:
        for item in stages:
            op = str(item["op"])
            if op not in found:
                found.append(op)
            for branch in item.get("inputs", ()):
                walk(branch)

    walk(pipeline["stages"])
    return found


def traits_of_ops(pipeline: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The traits this process's layers declare for the ops of `pipeline`, as JSON.

    An op nobody declared is left out (resharding then refuses it, naming it).
    """
    return {op: saved_json(stage_traits(op)) for op in ops_of(pipeline) if is_declared(op)}


def saved_json(traits: StageTraits) -> dict[str, Any]:
    """`traits` as a document carries them: `as_json()` without the `READINGS`.

    Example:
        >>> saved_json(StageTraits(random=True, keeps_length=True))
        {'random': True}
    """
    return {name: value for name, value in traits.as_json().items() if name not in READINGS}


def with_readings(op: str, traits: StageTraits) -> StageTraits:
    """`traits` (a document's) with the `READINGS` this release declares for `op`."""
    if not is_declared(op):
        return traits
    declared = stage_traits(op)
    return dataclasses.replace(traits, **{name: getattr(declared, name) for name in READINGS})


def saved_traits(document: Mapping[str, Any]) -> dict[str, StageTraits]:
    """The traits a (validated) document carries, by op."""
    return {op: StageTraits.from_json(value) for op, value in document.get("traits", {}).items()}


def upgrade_version_1(document: dict[str, Any]) -> dict[str, Any]:
    """A version 1 document as version 2: the traits its ops had then (see the module)."""
    traits: dict[str, Any] = {}
    try:
        ops = ops_of(document["pipeline"])
    except (KeyError, TypeError, AttributeError):  # Damaged: validation says how.
        ops = []
    for op in ops:
        if op in VERSION_1_TRAITS:
            traits[op] = VERSION_1_TRAITS[op]
        elif is_declared(op):
            traits[op] = saved_json(stage_traits(op))
    return {**document, "version": 2, "traits": traits}
