"""`Tuner`: what a running iterator's autotuner decides, from what the consumer measured.

It only decides; `MultiprocessPrefetchIter` measures and applies. The policy, per
measurement of `interval_seconds` (after a change to `w` workers, their first `w`
units are left out, as they arrive together once the workers started; the measurement
opens at the last of them):

- a trial (the measurement right after a change) is kept if the rate of positions per
  second rose by `GAIN`, and reverted otherwise; the direction it tried is then left
  alone for `RETRY` measurements;
- while the consumer waits for input for `WAIT_SHARE` of the time or more, it tries
  more workers (0 -> 2, then x1.5, at least +1); when those are at their bound or were
  refused, more threads reading each chunk (0 -> 4, then x2: reads that wait on storage);
  then deeper buffers (x2); never past `AutotuneOptions`' bounds, and never so that
  workers x (buffer + 1) x the largest chunk seen exceeds the memory budget;
- a consumer that waits less is not short of input: with more workers than the tuner
  started with, it tries fewer (a third fewer, at least 1, never below the start),
  kept unless the rate fell by `GAIN` or the consumer came to wait; else it is left as
  it is. A kept trial of more workers rests this direction for `RETRY` measurements.

Given a `TuningMemory`, it starts where the plan's last tuner settled, if that one
started where it does and had its bounds; rests the directions that one found no gain
in for as long as it would have; and writes into it what each judged measurement kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ._autotune_options import AutotuneOptions, TuningDecision
from ._tuning_memory import Config, Settled, TuningMemory

__all__ = ["FEWER", "GAIN", "RETRY", "WARM_START", "WAIT_SHARE", "Config", "Tuner"]

WAIT_SHARE = 0.1
"""Above this share of its time waiting for input, the consumer is short of input."""

GAIN = 0.05
"""A trial is kept only if the rate rose by this much."""

RETRY = 40
"""Measurements before a direction whose trial was reverted is tried again."""

_DIRECTIONS = {
    "workers": "more workers",
    "threads": "more read threads",
    "buffer": "deeper buffers",
}
"""What the tuner tries, in this order, and how its decisions name each."""

WARM_START = "warm start"
"""The reason of a tuner's first decision when it starts where the last one settled."""

FEWER = "fewer workers"
"""The reason of a trial that gives back workers a consumer does not wait for."""


class Tuner:
    """Decides workers and buffers from the consumer's per-unit measurements.

    Args:
        options: the bounds.
        workers: the workers it starts with.
        buffer_size: the chunks per worker it starts with.
        read_threads: the read threads it starts with.
        clock: seconds, monotonic (a test may pass its own).
        memory: where the plan's last tuner settled, and where this one writes what it
            keeps (None: start from the arguments, remember nothing).

    Example:
        >>> now = [0.0]
        >>> tuner = Tuner(AutotuneOptions(max_workers=4, interval_seconds=1.0), 0, 2, 0,
        ...               clock=lambda: now[0])
        >>> changes = []
        >>> for step in range(4):  # Units of 100 positions, the consumer waiting throughout.
        ...     now[0] += 0.5
        ...     changes.append(tuner.record(100, 0.5, 0))
        >>> changes, tuner.config
        ([None, None, (2, 2, 0), None], (2, 2, 0))
        >>> decision = tuner.decisions[0]
        >>> decision.reason, decision.seconds, decision.input_wait, decision.rate
        ('more workers', 1.0, 1.0, 200.0)
    """

    def __init__(
        self,
        options: AutotuneOptions,
        workers: int,
        buffer_size: int,
        read_threads: int = 0,
        clock: Callable[[], float] = time.monotonic,
        memory: TuningMemory | None = None,
    ) -> None:
        self.options = options
        self.config: Config = (workers, buffer_size, read_threads)
        self._start = self.config  # Never below it.
        self.decisions: list[TuningDecision] = []
        self._clock = clock
        self._began: float | None = None
        self._window: float | None = None  # When the measurement began (None: not yet).
        self._positions, self._waited, self._units = 0, 0.0, 0
        self._skip = 0  # Units still to leave out after a change.
        self._pending = False  # A change was decided, not yet applied.
        self._trial: tuple[Config, float, float, str] | None = None  # Before: rate, share.
        self._refused: dict[str, int] = {}  # Direction -> the measurement it was refused at.
        self.measurements = 0
        """How many measurements it made so far."""
        self._largest = 0  # Bytes of the largest chunk seen.
        # Another iterator's tuner may hold the memory: this one then starts cold.
        self._memory = memory if memory is not None and memory.take(self) else None
        if self._memory is not None and self._memory.settled is not None:
            self._warm_start(self._memory.settled)

    def finish(self) -> None:
        """Its iterator ended: the memory is free for the next tuner to take.

        It no longer writes there: an iterator read again after `close()` (or restored
        after its end) goes on without it, as one that did not get it.
        """
        if self._memory is not None:
            self._memory.let_go(self)
            self._memory = None

    def record(self, positions: int, waited: float, nbytes: int) -> Config | None:
        """One unit of `positions` reached the consumer, after `waited` s; a change or None.

        `nbytes`: what the unit's result held in shared memory (0 in this process).
        """
        now = self._clock()
        if self._began is None:
            self._began = now
        self._largest = max(self._largest, nbytes)
        if self._pending:
            return None  # The change waits for the work in flight to be taken.
        if self._skip or self._window is None:
            self._skip = max(0, self._skip - 1)
            self._window = now  # The next units are measured from here.
            return None
        self._positions += positions
        self._waited += waited
        self._units += 1
        elapsed = now - self._window
        if elapsed < self.options.interval_seconds or self._units < 2:
            return None
        rate, share = self._positions / elapsed, min(1.0, self._waited / elapsed)
        self._window, self._positions, self._waited, self._units = now, 0, 0.0, 0
        self.measurements += 1
        return self._decide(now, rate, share)

    def applied(self, workers: int = 0) -> None:
        """The change last returned runs now, on `workers` workers.

        The next measurement opens once each worker delivered its first unit: those
        arrive together after the start, and would count as units that took no time.
        """
        self._pending, self._window, self._skip = False, None, max(1, workers)

    def _decide(self, now: float, rate: float, share: float) -> Config | None:
        if self._trial is not None:
            before, before_rate, before_share, direction = self._trial
            self._trial = None
            if direction == "fewer":
                worse = rate < before_rate * (1 - GAIN) or share >= WAIT_SHARE
            else:
                worse = rate < before_rate * (1 + GAIN)
            if worse:
                self._refused[direction] = self.measurements
                self._remember(before, before_share, before_rate)
                return self._change(before, "reverted", now, share, rate)
            if direction == "workers":  # Kept: giving them back waits as long.
                self._refused["fewer"] = self.measurements
        self._remember(self.config, share, rate)
        if share < WAIT_SHARE:
            fewer = self._fewer() if self._resting("fewer") is False else None
            if fewer is None:
                return None
            self._trial = (self.config, rate, share, "fewer")
            return self._change(fewer, FEWER, now, share, rate)
        for direction in _DIRECTIONS:
            if self._resting(direction):
                continue
            step = self._step(direction)
            if step is not None:
                self._trial = (self.config, rate, share, direction)
                return self._change(step, _DIRECTIONS[direction], now, share, rate)
        return None

    def _resting(self, direction: str) -> bool:
        refused = self._refused.get(direction)
        return refused is not None and self.measurements - refused < RETRY

    def _fewer(self) -> Config | None:
        """A third fewer workers (at least one), never fewer than it started with."""
        workers, buffer_size, threads = self.config
        least = self._start[0]
        if workers <= least:
            return None
        return (max(least, workers - max(1, workers // 3)), buffer_size, threads)

    def _step(self, direction: str) -> Config | None:
        workers, buffer_size, threads = self.config
        step: Config | None = None
        if direction == "workers":
            limit = self.options.workers_limit()
            more = min(limit, 2 if workers == 0 else max(workers + 1, workers * 3 // 2))
            step = (more, buffer_size, threads) if more > workers else None
        elif direction == "threads":
            more = min(self.options.max_read_threads, max(4, 2 * threads))
            step = (workers, buffer_size, more) if more > threads else None
        else:
            deeper = min(self.options.max_buffer_size, 2 * buffer_size)
            step = (workers, deeper, threads) if workers and deeper > buffer_size else None
        if step is None or step[0] * (step[1] + 1) * self._largest > self._budget():
            return None
        return step

    def _warm_start(self, settled: Settled) -> None:
        """Starts at `settled`'s configuration, if its tuner started here with these bounds.

        Another start or other bounds (a plan copied with other options) tune from the
        arguments, as does a configuration past the memory budget.
        """
        workers, buffer_size, _ = settled.config
        if (settled.start, settled.options) != (self._start, self.options):
            return
        if workers * (buffer_size + 1) * settled.largest > self._budget():
            return
        self._largest = settled.largest
        # A direction still resting there rests as long here: refused that long ago.
        self._refused = {direction: left - RETRY for direction, left in settled.resting}
        if settled.config == self.config:
            return
        self.config = settled.config
        self._skip = workers  # Their first units arrive together: left out, as at a change.
        decision = TuningDecision(0.0, *self.config, WARM_START, settled.input_wait, settled.rate)
        self.decisions.append(decision)

    def _remember(self, config: Config, share: float, rate: float) -> None:
        if self._memory is None:
            return
        resting = tuple(
            (direction, RETRY - (self.measurements - at))
            for direction, at in self._refused.items()
            if self.measurements - at < RETRY
        )
        settled = Settled(config, resting, self._largest, share, rate, self._start, self.options)
        self._memory.remember(settled)

    def _budget(self) -> int:
        return self.options.ram_budget_mb * 2**20

    def _change(self, config: Config, reason: str, now: float, share: float, rate: float) -> Config:
        self.config, self._pending = config, True
        seconds = now - (self._began or now)
        self.decisions.append(TuningDecision(seconds, *config, reason, share, rate))
        return config
