"""Cancelling Ray tasks without `ray.cancel`: a board of the chunks no longer wanted.

`ray.cancel` races with a task's reply in Ray's core worker: cancelling a task whose
result is arriving at that moment fails an internal check that aborts the calling
process (seen with Ray 2.60). chute cancels cooperatively instead. Each driver process
has one `Board`, a small actor (no CPU reserved) that records, per iterator, the lowest
generation of its tasks still wanted: a restore or an error raises it, closing the
iterator withdraws every generation. A task looks at the board before it runs its
chunk, and one no longer wanted returns at once without running it. A chunk already
running looks again between its elements (`ChunkPlan.run`'s `cancelled`) and stops
at the next one once it is no longer wanted.

Workers keep the board's answers for `FRESH` seconds, so a stream of short chunks costs
one question per worker every `FRESH` seconds, not one per chunk.
"""

from __future__ import annotations

import sys
import time
from typing import Any

__all__ = ["CLOSED", "FRESH", "Board", "still_wanted"]

CLOSED = sys.maxsize
"""The floor of a closed iterator: no generation of its tasks is wanted."""

FRESH = 0.1
"""Seconds a worker trusts its last answer from the board."""

_FORGET_AFTER = 3600.0  # Seconds after which a closed iterator's entry is dropped.
_ASK_TIMEOUT = 30.0  # Seconds a task waits for the board before running anyway.


class Board:
    """The chunks no longer wanted: per iterator token, the lowest wanted generation.

    A Ray actor (see `_ray_prefetch._Cluster`); the methods are called remotely.

    Example:
        >>> board = Board()
        >>> board.withdraw("it", 2)
        >>> board.floor("it"), board.floor("other")
        (2, 0)
        >>> board.withdraw("it", CLOSED)
        >>> board.floor("it") == CLOSED
        True
    """

    def __init__(self) -> None:
        self._floors: dict[str, tuple[int, float]] = {}  # token -> (floor, when set)

    def withdraw(self, token: str, below: int) -> None:
        """Marks the tasks of iterator `token` with a generation below `below` unwanted."""
        now = time.monotonic()
        floor = max(below, self._floors.get(token, (0, now))[0])
        self._floors[token] = (floor, now)
        stale = [
            key
            for key, (value, when) in self._floors.items()
            if value == CLOSED and now - when > _FORGET_AFTER
        ]
        for key in stale:
            del self._floors[key]

    def floor(self, token: str) -> int:
        """The lowest generation of iterator `token`'s tasks still wanted (0: all)."""
        return self._floors.get(token, (0, 0.0))[0]


_ANSWERS: dict[str, tuple[int, float]] = {}
"""This Ray worker process's last answers from the board: token -> (floor, when)."""


def still_wanted(board: Any, token: str, generation: int) -> bool:
    """Whether a task of iterator `token`, of `generation`, should run (in a Ray worker).

    Asks the board (a Ray actor handle) unless its answer is fresher than `FRESH`
    seconds; a board that cannot answer (lost with its driver, or slow) counts as "run
    it": a chunk is never dropped on a guess, only on the board's word.
    """
    now = time.monotonic()
    answer = _ANSWERS.get(token)
    if answer is None or now - answer[1] > FRESH:
        import ray

        try:
            floor = ray.get(board.floor.remote(token), timeout=_ASK_TIMEOUT)
        except ray.exceptions.RayError:
            return True
        if len(_ANSWERS) > 1024:
            _ANSWERS.clear()
        answer = (floor, time.monotonic())
        _ANSWERS[token] = answer
    return generation >= answer[0]
