"""How the `mp_prefetch` stage is shown and described (the planner chose its chunk size)."""

from __future__ import annotations

from ._pipeline import Stage

__all__ = ["mp_prefetch_stage"]


def mp_prefetch_stage(num_workers: int, chunk_size: int) -> Stage:
    """The `mp_prefetch` stage: its chunk size is part of the state, the worker count not."""
    return Stage(
        "mp_prefetch", (("num_workers", repr(num_workers)),), raw=(("chunk_size", chunk_size),)
    )
