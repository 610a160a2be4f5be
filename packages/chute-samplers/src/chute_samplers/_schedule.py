"""`MixSchedule`: which component each position of a weighted mixture comes from.

The schedule keeps every prefix within one element of the weights: after `p` elements,
component `j` has contributed `c_j(p)` with `|c_j(p) - p * w_j| < 1` (Tijdeman's chairman
assignment problem). Occurrence `m` (1-based) of `j` must then land at a 1-based slot `t`
with `(m - 1) / w_j < t < m / w_j + 1`; those windows admit a schedule (Hall's condition
holds on every interval, and at least `t` jobs are released by slot `t`), and
earliest-deadline-first finds one: at each slot, among the components with
`c_j < t * w_j`, take the one whose next occurrence has the smallest `(c_j + 1) / w_j`
(ties: the lower index).

With integer weights `a_j` summing to `A`, the counts return to exactly `a_j` at
`t = A` and the schedule repeats with period `A`. One period is computed once (O(A log k))
and stored (a few bytes per slot), so any position is located in O(1).

Weights are made integers exactly where possible (ints; floats through their shortest
decimal form, so 0.7 is 7/10) with a period of at most `MAX_PERIOD`; otherwise they are
rounded to integers summing to `MAX_PERIOD` (each at least 1), and the within-one
promise holds for those rounded weights.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from chute_core.internal import check_weights

__all__ = ["MAX_PERIOD", "MixSchedule"]

MAX_PERIOD = 1 << 16


def _as_fraction(weight: float | Fraction) -> Fraction:
    if isinstance(weight, int):
        return Fraction(weight)
    if isinstance(weight, Fraction):
        return weight
    return Fraction(repr(float(weight)))


def integer_weights(weights: Sequence[float]) -> tuple[int, ...]:
    """Integers proportional to `weights` (exactly, if the period allows)."""
    fractions = [_as_fraction(w) for w in weights]
    total = sum(fractions, Fraction(0))
    shares = [f / total for f in fractions]
    period = math.lcm(*(s.denominator for s in shares))
    if period <= MAX_PERIOD:
        return tuple(int(s * period) for s in shares)
    # Largest remainder over MAX_PERIOD slots, every component at least one.
    quotas = [s * MAX_PERIOD for s in shares]
    counts = [max(1, math.floor(q)) for q in quotas]
    order = sorted(range(len(counts)), key=lambda j: (-(quotas[j] - counts[j]), j))
    excess = sum(counts) - MAX_PERIOD
    for j in order if excess < 0 else ():
        if excess == 0:
            break
        counts[j] += 1
        excess += 1
    for j in reversed(order) if excess > 0 else ():
        if excess == 0:
            break
        if counts[j] > 1:
            counts[j] -= 1
            excess -= 1
    divisor = math.gcd(*counts)
    return tuple(c // divisor for c in counts)


class MixSchedule:
    """The component of every position of a weighted mixture, in O(1) per position.

    Args:
        weights: one positive finite weight per component (None: equal).
        count: the number of components (needed when `weights` is None).

    Example:
        >>> schedule = MixSchedule([0.7, 0.3])
        >>> schedule.period, schedule.counts
        (10, (7, 3))
        >>> components, occurrences = schedule.locate(np.arange(10))
        >>> components.tolist()
        [0, 0, 1, 0, 0, 1, 0, 0, 0, 1]
        >>> occurrences.tolist()
        [0, 1, 0, 2, 3, 1, 4, 5, 6, 2]
    """

    def __init__(self, weights: Sequence[float] | None, count: int | None = None) -> None:
        if count is None:
            if weights is None:
                raise ValueError("MixSchedule: pass weights or a component count.")
            count = len(weights)
        if count < 1:
            raise ValueError("MixSchedule: a mixture needs at least one component.")
        self._weights = check_weights(weights, count, "MixSchedule")
        self._counts = integer_weights(self._weights)
        self._period = sum(self._counts)
        self._components, self._ranks = _edf_period(self._counts)
        order = np.argsort(self._components, kind="stable")
        self._slots = order.astype(np.int64)  # Slots of component 0, then 1, ...
        self._offsets = np.concatenate([[0], np.cumsum(self._counts)]).astype(np.int64)

    @property
    def weights(self) -> tuple[float, ...]:
        """The weights as given."""
        return self._weights

    @property
    def counts(self) -> tuple[int, ...]:
        """Each component's occurrences per period."""
        return self._counts

    @property
    def period(self) -> int:
        """The length after which the schedule repeats."""
        return self._period

    def locate(
        self, positions: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Returns (component, occurrence within that component) of each position."""
        cycles, slots = np.divmod(np.asarray(positions, dtype=np.int64), self._period)
        components = self._components[slots].astype(np.int64)
        counts = np.asarray(self._counts, dtype=np.int64)
        return components, cycles * counts[components] + self._ranks[slots]

    def locate_one(self, position: int) -> int:
        """Returns the component of one position (scalar fast path of `locate`)."""
        return int(self._components[position % self._period])

    def position_of(self, component: int, occurrence: int) -> int:
        """Returns the position of the `occurrence`-th (0-based) element of `component`."""
        cycles, rank = divmod(occurrence, self._counts[component])
        return cycles * self._period + int(self._slots[self._offsets[component] + rank])

    def __repr__(self) -> str:
        return f"MixSchedule(counts={self._counts})"


def _edf_period(counts: tuple[int, ...]) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    """Earliest-deadline-first over one period (see the module docstring)."""
    period = sum(counts)
    components = np.empty(period, dtype=np.int32)
    ranks = np.empty(period, dtype=np.int64)
    taken = [0] * len(counts)
    # Every component is released at slot 1 (c_j = 0 < 1 * w_j).
    ready = [(1 / a, j) for j, a in enumerate(counts)]  # key: (c_j + 1) / a_j
    heapq.heapify(ready)
    waiting: list[tuple[int, int]] = []  # (release slot, component)
    for slot in range(1, period + 1):
        while waiting and waiting[0][0] <= slot:
            _, j = heapq.heappop(waiting)
            heapq.heappush(ready, ((taken[j] + 1) / counts[j], j))
        _, j = heapq.heappop(ready)  # Never empty: see the module docstring.
        components[slot - 1] = j
        ranks[slot - 1] = taken[j]
        taken[j] += 1
        # Released again at the first slot s with taken * A < s * a_j.
        release = taken[j] * period // counts[j] + 1
        if taken[j] < counts[j]:
            heapq.heappush(waiting, (release, j))
    return components, ranks
