"""Which differences between a checkpoint's pipeline and the live one a restore accepts.

By default none: a fingerprint that differs is a `PipelineMismatchError`. A caller may
allow named parameters to change (`allow_changes=("weights",)`): a difference is then
accepted when the stage's op declares the parameter `changeable` and the stage is part
of the stream (it mixes streams, or follows the start of the stream), where continuing
with the new value is exact. Before the stream begins, a parameter decides which record
each position is (a `MapDataset.mix`'s weights do), so a change there is refused with
the reason, as is any other difference.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from chute_core import StageTraits

__all__ = ["refused_changes"]


def _streams(branch: list[Mapping[str, Any]], traits_of: Callable[[str], StageTraits]) -> bool:
    return any(
        traits_of(str(stage["op"])).begins_stream
        or any(_streams(inner, traits_of) for inner in stage.get("inputs", []))
        for stage in branch
    )


def refused_changes(
    saved: Mapping[str, Any],
    current: Mapping[str, Any],
    allow: Collection[str],
    traits_of: Callable[[str], StageTraits],
) -> list[str]:
    """Why the differences between two pipeline descriptions are not all allowed.

    Empty: every difference is an allowed change of a changeable parameter of a stream
    stage, so the restore may go on.

    Example:
        >>> import chute_core
        >>> traits = {"mix": StageTraits(changeable=frozenset({"weights"})),
        ...           "to_iter_dataset": StageTraits(begins_stream=True)}.__getitem__
        >>> stream = [[{"op": "to_iter_dataset", "params": {}}]] * 2
        >>> old = {"stages": [{"op": "mix", "params": {"weights": "[1, 1]"}, "inputs": stream}]}
        >>> new = {"stages": [{"op": "mix", "params": {"weights": "[3, 1]"}, "inputs": stream}]}
        >>> refused_changes(old, new, {"weights"}, traits)
        []
        >>> refused_changes(old, new, (), traits)
        ['stage 0 (mix): weights changed from [1, 1] to [3, 1], which was not allowed']
    """
    if saved.get("kind") != current.get("kind"):
        return [f"the pipeline kind changed from {saved.get('kind')} to {current.get('kind')}"]
    return _branch(list(saved["stages"]), list(current["stages"]), allow, traits_of, "", False)


def _branch(
    saved: list[Mapping[str, Any]],
    current: list[Mapping[str, Any]],
    allow: Collection[str],
    traits_of: Callable[[str], StageTraits],
    where: str,
    streaming: bool,
) -> list[str]:
    if [s["op"] for s in saved] != [s["op"] for s in current]:
        return [
            f"{where}the stages differ: {[s['op'] for s in saved]} -> {[s['op'] for s in current]}"
        ]
    refused: list[str] = []
    for number, (old, new) in enumerate(zip(saved, current, strict=True)):
        name = f"{where}stage {number} ({old['op']})"
        traits = traits_of(str(old["op"]))
        old_inputs, new_inputs = old.get("inputs", []), new.get("inputs", [])
        if len(old_inputs) != len(new_inputs):
            refused.append(f"{name}: {len(old_inputs)} inputs -> {len(new_inputs)}")
            continue
        stream_stage = streaming or any(_streams(list(b), traits_of) for b in old_inputs)
        for key in sorted(set(old["params"]) | set(new["params"])):
            before, after = old["params"].get(key), new["params"].get(key)
            if before == after or key in traits.performance:
                continue
            if key not in allow:
                refused.append(
                    f"{name}: {key} changed from {before} to {after}, which was not allowed"
                )
            elif key not in traits.changeable:
                refused.append(
                    f"{name}: {key} is not a parameter {old['op']} can change on restore"
                )
            elif not stream_stage:
                refused.append(
                    f"{name}: {key} decides which record each position reads before the stream "
                    "begins, so changing it would lose or repeat records; mix streams "
                    "(IterDataset.mix) to change it on restore"
                )
        for branch, (a, b) in enumerate(zip(old_inputs, new_inputs, strict=True)):
            refused += _branch(a, b, allow, traits_of, f"{name} input {branch}: ", streaming)
        streaming = streaming or traits.begins_stream
    return refused
