"""How `IterDataset.mp_prefetch` cuts work into chunks, and how its stage is shown."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._factories import OpFactory, SkipErrorsFactory
from ._pipeline import Stage

__all__ = ["default_chunk_size", "mp_prefetch_stage", "with_chunk_size"]


def default_chunk_size(factory: Any, stages: Sequence[Stage]) -> int:
    """64 elements or 1 batch, and at most 1/16 of the dataset's positions."""
    names = [item.op for item in stages]
    read_at = names.index("to_iter_dataset") if "to_iter_dataset" in names else 0
    size = 1 if "batch" in names[:read_at] else 64
    while isinstance(factory, OpFactory | SkipErrorsFactory):
        factory = factory.parent
    length = len(getattr(factory, "node", ()))
    if length:
        size = min(size, max(1, -(-length // 16)))
    return size


def mp_prefetch_stage(num_workers: int, chunk_size: int) -> Stage:
    """The `mp_prefetch` stage: its chunk size is part of the state, the worker count not."""
    return Stage(
        "mp_prefetch", (("num_workers", repr(num_workers)),), raw=(("chunk_size", chunk_size),)
    )


def with_chunk_size(stages: Sequence[Stage], chunk_size: int) -> tuple[Stage, ...]:
    """`stages` with the last `mp_prefetch` stage showing `chunk_size` (when batch changed it)."""
    out = list(stages)
    for number in range(len(out) - 1, -1, -1):
        if out[number].op == "mp_prefetch":
            workers = int(dict(out[number].params)["num_workers"])
            out[number] = mp_prefetch_stage(workers, chunk_size)
            break
    return tuple(out)
