"""What the fluent datasets remember about themselves: their stages, and seeds.

A dataset's pipeline is a tuple of `chute_core.PipelineStage`s (`Stage` here), the
one description every layer reads: `print(ds)` renders it, checkpoints fingerprint it,
resharding and the worker planner read the traits each op declares, beside its
implementation, in the layer that implements it (`chute_core.declare_op`).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from chute_core import InvalidArgumentError, PipelineDescription, PipelineStage, StageTraits
from chute_core.internal import check_int, check_seed
from chute_sources import Source

__all__ = [
    "Stage",
    "check_pipeline_seed",
    "derive_seed",
    "has_stage",
    "random_stage_count",
    "render",
    "show_fn",
    "show_source",
    "stage_seed",
]

_MASK64 = (1 << 64) - 1

Stage = PipelineStage
"""One stage of a fluent pipeline (the shared description type)."""


def stage(name: str, **params: Any) -> Stage:
    """Builds a `Stage`, showing each parameter with `repr` (functions by name)."""
    shown = tuple((key, _show(value)) for key, value in params.items())
    return Stage(name, shown, raw=tuple(params.items()))


def _show(value: Any) -> str:
    if callable(value) and not isinstance(value, type):
        return show_fn(value)
    if getattr(type(value), "__repr__", None) is object.__repr__:  # A transform: no address.
        return type(value).__name__
    return repr(value)


def show_fn(fn: object) -> str:
    """A short readable name for a user's function or transform object."""
    if isinstance(fn, functools.partial):
        args = [repr(a) if len(repr(a)) <= 40 else "..." for a in fn.args]
        return f"partial({', '.join([show_fn(fn.func), *args])})"
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


def show_source(source: object) -> str:
    """A short description of a source, costing O(1) in its size.

    A chute source shows its parameters (`SequenceSource(type='list', len=3)` for a list:
    its elements are never `repr`-ed); any other object its class and length. What a
    checkpoint's fingerprint hashes is the source object itself (`Stage.raw`), not this.

    Example:
        >>> from chute_sources import SequenceSource
        >>> show_source(SequenceSource(["a", "b"])), show_source(range(3))
        ("SequenceSource(type='list', len=2)", 'range[len=3]')
    """
    if isinstance(source, Source):
        text = repr(source)
        return text if len(text) <= 100 else text[:97] + "..."
    return f"{type(source).__name__}[len={len(source)}]"  # type: ignore[arg-type]


def render(kind: str, stages: Sequence[Stage]) -> str:
    """The pipeline as a readable chain: one stage a line, each input of a mix indented.

    Example:
        >>> print(render("MapDataset", [stage("source", n=3), stage("shuffle", seed=1)]))
        MapDataset
          source(n=3)
          .shuffle(seed=1)
    """
    return PipelineDescription(kind, tuple(stages)).render()


def random_stage_count(stages: Sequence[Stage]) -> int:
    """How many random stages a pipeline already has (the salt of the next one's seed).

    Counting only random stages means adding a `map` or a `filter` upstream does not
    change the order a later `shuffle` gives.

    Example:
        >>> random_stage_count([stage("shuffle", seed=1), stage("map", fn=abs)])
        1
    """
    return sum(1 for item in stages if item.traits.random)


def has_stage(stages: Sequence[Stage], property: Callable[[StageTraits], bool]) -> bool:
    """Whether a stage whose declared traits have `property` is in `stages` or their inputs.

    Example:
        >>> has_stage([stage("mix", weights=None)], lambda traits: traits.random)
        False
    """
    return PipelineDescription("", tuple(stages)).find(lambda item: property(item.traits))


def stage_seed(
    explicit: int | None, pipeline_seed: int | None, stages: Sequence[Stage], op: str
) -> int:
    """The seed of a new random stage: `explicit`, or one derived from the pipeline's.

    Raises:
        ValueError: neither is set; the message says how to set one.

    Example:
        >>> stage_seed(5, None, [], "shuffle"), stage_seed(None, 0, [], "shuffle") > 0
        (5, True)
    """
    if explicit is not None:
        return check_seed(explicit, op)
    if pipeline_seed is None:
        raise ValueError(
            f"{op} needs a seed: pass seed=... or set the pipeline's seed first, e.g. "
            f"ds.seed(0).{op}(...)."
        )
    return derive_seed(pipeline_seed, random_stage_count(stages), op)


def check_pipeline_seed(seed: int) -> int:
    """`seed` as an int in `[0, 2**64)`, or an error that says so (bools are refused).

    Example:
        >>> check_pipeline_seed(3)
        3
    """
    checked = check_int(seed, "seed", "seed", minimum=None, maximum=None)
    if not 0 <= checked < 2**64:
        raise InvalidArgumentError(f"seed: seed must be in [0, 2**64), got {seed!r}.")
    return checked


def derive_seed(seed: int, number: int, op: str) -> int:
    """The seed of the `number`-th random stage (an `op`) under the pipeline seed `seed`.

    Stable across processes, platforms and versions (BLAKE2b of the three values).

    Example:
        >>> first = derive_seed(0, 1, "shuffle")
        >>> first == derive_seed(0, 1, "shuffle") != derive_seed(0, 2, "shuffle")
        True
    """
    data = f"chute.stage_seed:{seed}:{number}:{op}".encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") & _MASK64
