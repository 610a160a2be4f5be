"""`TuningMemory`: where a pipeline's last autotuned iterator settled, for the next one.

A loop over epochs makes a new iterator each epoch (`for batch in ds:`), and a restore
makes one too. Without a memory each would tune again from the options' start (no
workers), and spend its first seconds short of input. The plan that builds the
iterators holds one `TuningMemory`; each tuner writes into it what its last judged
measurement kept, and the next tuner of the plan starts from there (a "warm start" in
its decisions), where the last iterator's parked workers are waiting to be taken over.

Two iterators of one plan may run at once (a mixture of a dataset with itself, or a
second loop started while the first is still open). Only one tuner holds the memory at
a time: the first that takes it, until its iterator ends (exhausted, closed, or
garbage). The others start from their options and leave the memory alone, so the
process does not start every one of them at the first one's workers, and no tuner
overwrites what another settled on.

What is remembered never changes the elements: only who runs them, and how far ahead.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from typing import Any

from ._autotune_options import AutotuneOptions

__all__ = ["Config", "Settled", "TuningMemory"]

Config = tuple[int, int, int]
"""(workers, chunks per worker ahead of the consumer, threads reading each chunk)."""


@dataclasses.dataclass(frozen=True)
class Settled:
    """What a tuner had kept at its last judged measurement.

    Attributes:
        config: the configuration it kept (never a trial still being judged).
        resting: the directions whose trial gave no gain, with how many measurements
            each is still left alone for.
        largest: bytes of the largest chunk it saw (the memory bound from the start).
        input_wait: the share of that measurement the consumer waited for input.
        rate: positions per second over that measurement.
        start: the configuration that tuner started from (its options'); a tuner that
            starts elsewhere does not take this one.
        options: that tuner's bounds; a tuner with others does not take this one.
    """

    config: Config
    resting: tuple[tuple[str, int], ...] = ()
    largest: int = 0
    input_wait: float = 0.0
    rate: float = 0.0
    start: Config | None = None
    options: AutotuneOptions | None = None


class TuningMemory:
    """Where the autotuner of a plan's iterators last settled (None: not yet).

    Example:
        >>> memory = TuningMemory()
        >>> memory.settled is None
        True
        >>> memory.remember(Settled((2, 4, 0), rate=900.0, start=(0, 4, 0)))
        >>> memory.settled.config
        (2, 4, 0)
        >>> first, second = Settled((0, 1, 0)), Settled((0, 1, 0))  # Stand-ins for tuners.
        >>> memory.take(first), memory.take(second)  # One holds it at a time.
        (True, False)
        >>> memory.let_go(first)
        >>> memory.take(second)
        True
    """

    def __init__(self) -> None:
        self.settled: Settled | None = None
        self._holder: weakref.ref[Any] | None = None
        self._lock = threading.Lock()

    def remember(self, settled: Settled) -> None:
        """Keeps `settled` for the next tuner (an assignment: safe from any thread)."""
        self.settled = settled

    def take(self, tuner: object) -> bool:
        """Whether `tuner` may start from this memory and write it.

        True unless another tuner holds it; `tuner` then holds it until `let_go`, or
        until it is garbage.
        """
        with self._lock:
            holder = None if self._holder is None else self._holder()
            if holder is not None and holder is not tuner:
                return False
            self._holder = weakref.ref(tuner)
            return True

    def let_go(self, tuner: object) -> None:
        """Ends `tuner`'s hold (its iterator ended); nothing if it holds none."""
        with self._lock:
            if self._holder is not None and self._holder() is tuner:
                self._holder = None

    def __getstate__(self) -> dict[str, Any]:
        return {"settled": self.settled}  # A copy elsewhere is held by no tuner.

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]
        self.settled = state["settled"]

    def __repr__(self) -> str:
        return f"TuningMemory({self.settled!r})"
