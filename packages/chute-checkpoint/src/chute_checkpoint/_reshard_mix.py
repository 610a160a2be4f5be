"""Resharding a mixture of sharded streams: each component on its own.

A pipeline whose first stage `chooses` among input streams (`IterDataset.mix` of
`MapDataset ... .shard(i, n) ... .to_iter_dataset()` streams, one per domain) keeps each
component's state apart from the others'. So the states of `n` processes reshard one
component at a time, as a pipeline of their own (every record of every component comes
once), and the mixture's position continues from the processes' total: `m` new
processes each start at `sum(positions) // m`, so a `WeightSchedule` stays at the step
the run had reached. The stages after the mixture must keep positions.

The functions of `_reshard` that plan and write one pipeline are passed in
(`plan_branch`, `write_branch`), which keeps this module below that one.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from chute_samplers.internal import MIX_STATES
from chute_transforms.internal import PARENT_STATES

from ._describe import fingerprint
from ._errors import ReshardError
from ._reshard_stages import branches, traits_of

__all__ = ["MixPlan", "mix_document", "mix_plan", "mixture_shard"]


@dataclasses.dataclass(frozen=True)
class MixPlan:
    """What the saved states of a mixture say, for any new process count."""

    base: dict[str, Any]  # Process 0's document.
    branches: tuple[Any, ...]  # Per component: the plan of its pipeline (a `_Plan`).
    positions: int  # The mixture positions of all processes, together.
    count: int  # Processes saved.
    failures: tuple[int, ...] = ()  # Of the error budgets after the mixture (see `_reshard`).


def _mixture_state(state: Any, where: str) -> dict[str, Any]:
    while isinstance(state, dict):
        if MIX_STATES.components(state) is not None:
            return state
        try:
            inner = PARENT_STATES.inner(state)
        except ValueError as error:
            raise ReshardError(f"{where}: {error}") from None
        if inner is None:
            break
        state = inner
    raise ReshardError(f"{where}: cannot find the mixture's state in {state!r:.200}.")


def mix_plan(
    documents: list[dict[str, Any]], plan_branch: Callable[[list[dict[str, Any]]], Any]
) -> MixPlan:
    """The plan of a mixture of sharded streams, from all processes' documents."""
    stages = documents[0]["pipeline"]["stages"]
    branches(stages)  # Checks the stages after the mixture.
    mixtures = [_mixture_state(d["state"], f"state {d['process_index']}") for d in documents]
    components = [MIX_STATES.components(mixture) or [] for mixture in mixtures]
    inputs = stages[0]["inputs"]
    for document, parts in zip(documents, components, strict=True):
        own = document["pipeline"]["stages"]
        if not own or own[0]["op"] != stages[0]["op"]:
            raise ReshardError(
                f"state {document['process_index']} is of a different pipeline than state 0; "
                "reshard only the states of one training run."
            )
        theirs = own[0].get("inputs", [])
        if len(parts) != len(inputs) or len(theirs) != len(inputs):
            raise ReshardError(
                f"state {document['process_index']}: the mixture has {len(parts)} component "
                f"states and {len(theirs)} components, process 0's {len(inputs)}; reshard the "
                "states of one training run."
            )
    plans = []
    for number in range(len(inputs)):
        pseudo = []
        for document, parts in zip(documents, components, strict=True):
            pipeline = {
                "kind": "IterDataset",
                "stages": copy.deepcopy(document["pipeline"]["stages"][0]["inputs"][number]),
            }
            state = parts[number]
            pseudo.append(
                {
                    **document,
                    "pipeline": pipeline,
                    "state": state,
                    "fingerprint": fingerprint(pipeline),
                }
            )
        plans.append(plan_branch(pseudo))
    try:
        positions = sum(MIX_STATES.position(mixture) for mixture in mixtures)
    except ValueError as error:
        raise ReshardError(str(error)) from None
    return MixPlan(documents[0], tuple(plans), positions, len(documents))


def _rewrap(state: Any, mixture: dict[str, Any], scale: tuple[int, int]) -> Any:
    if MIX_STATES.components(state) is not None:
        return mixture
    inner = PARENT_STATES.inner(state)
    assert inner is not None  # `_mixture_state` found the mixture below.
    return PARENT_STATES.rebuild(state, _rewrap(dict(inner), mixture, scale), scale)


def mix_document(
    plan: MixPlan,
    shard_index: int,
    shard_count: int,
    process_index: int,
    process_count: int,
    write_branch: Callable[..., dict[str, Any]],
) -> dict[str, Any]:
    """The document of shard `shard_index` of `shard_count`: every component resharded."""
    document = copy.deepcopy(plan.base)
    document["process_index"], document["process_count"] = process_index, process_count
    components = []
    for number, branch in enumerate(plan.branches):
        written = write_branch(branch, shard_index, shard_count, process_index, process_count)
        document["pipeline"]["stages"][0]["inputs"][number] = written["pipeline"]["stages"]
        components.append(written["state"])
    mixture = MIX_STATES.rebuild(components, plan.positions // shard_count)
    document["state"] = _rewrap(document["state"], mixture, (plan.count, shard_count))
    document["fingerprint"] = fingerprint(document["pipeline"])
    return document


def mixture_shard(stages: list[dict[str, Any]]) -> tuple[int, int]:
    """The (index, count) of the shards in a mixture's components (all the same).

    Raises:
        ReshardError: components sharded differently, or none sharded.
    """
    found: set[tuple[int, int]] = set()

    def visit(branch: list[dict[str, Any]]) -> None:
        for item in branch:
            names = traits_of(item).shard
            if names is not None:
                found.add((int(item["params"][names[0]]), int(item["params"][names[1]])))
            for inner in item.get("inputs", []):
                visit(inner)

    for branch in stages[0].get("inputs", []) if stages else []:
        visit(branch)
    if len(found) != 1:
        raise ReshardError(
            f"this iterator's mixture has components sharded as {sorted(found)} "
            "(index, count); each component must be sharded by this process's one shard."
        )
    return found.pop()
