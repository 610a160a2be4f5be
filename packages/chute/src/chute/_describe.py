"""What the fluent datasets tell the checkpoint layer about their pipeline's structure.

`describe(iterator, kind, stages)` gives an iterator a `chute_pipeline` attribute: the
pipeline's `chute_sources.PipelineDescription`, which called returns the stages with
their parameters as objects (see `chute_checkpoint.describe_pipeline`, which turns them
into the JSON a checkpoint's fingerprint hashes). It is computed only when a checkpoint
is taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chute_checkpoint import PIPELINE_ATTRIBUTE
from chute_core import PipelineDescription

from ._pipeline import Stage

__all__ = ["describe", "pipeline_description"]


def describe(iterator: Any, kind: str, stages: Sequence[Stage]) -> None:
    """Attaches the pipeline description to `iterator` (if it takes attributes)."""
    try:
        setattr(iterator, PIPELINE_ATTRIBUTE, PipelineDescription(kind, tuple(stages)))
    except AttributeError:  # A user's iterator with __slots__: described by class only.
        pass


def pipeline_description(kind: str, stages: Sequence[Stage]) -> dict[str, Any]:
    """The stages with their parameters as objects (`Stage.raw`, else the shown ones).

    Example:
        >>> import chute
        >>> ds = chute.MapDataset.range(3).shuffle(seed=7)
        >>> pipeline_description("MapDataset", ds._stages)["stages"][1]
        {'op': 'shuffle', 'params': {'seed': 7}}
    """
    return PipelineDescription(kind, tuple(stages))()
