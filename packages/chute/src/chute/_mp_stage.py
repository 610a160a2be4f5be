"""How the `mp_prefetch` stage is shown and described (the planner chose its chunk size)."""

from __future__ import annotations

from ._pipeline import Stage

__all__ = ["mp_prefetch_stage"]


def mp_prefetch_stage(
    num_workers: int, chunk_size: int, shown_as: str = "mp_prefetch", autotune: bool = False
) -> Stage:
    """The stage of the workers: its chunk size is part of the state, the workers not.

    `ray_prefetch` is the same stage (`shown_as` it): its state is the same, so a
    checkpoint saved with one restores with the other. An autotuned stage says so:
    its `num_workers` is where it starts.

    Example:
        >>> mp_prefetch_stage(2, 64, shown_as="ray_prefetch").line()
        'ray_prefetch(num_workers=2)'
        >>> mp_prefetch_stage(0, 64, autotune=True).line()
        'mp_prefetch(num_workers=0, autotune=True)'
    """
    tuned = (("autotune", "True"),) if autotune else ()
    return Stage(
        "mp_prefetch",
        (("num_workers", repr(num_workers)), *tuned),
        raw=(("chunk_size", chunk_size),),
        shown_as=shown_as,
    )
