"""`Frontier`: which positions of a resharded shard were already consumed elsewhere.

When `n` processes stop at different local positions and `m` processes continue, what
is left of the epoch is no stride of the data: shard `k` of `n` had read the global
positions `k, k + n, ..., k + n * (j_k - 1)` and stops at its own `j_k`. A global
position `g` is still to be read exactly when `g >= k + n * j_k` for `k = g % n`: a
**level** of `n` thresholds, one per residue. Process `k'` of `m` then reads the
positions `k' + m * j` of its own shard in order, skipping those some level says were
consumed, and the remainder of every later reshard adds one level.

A level stays only while one of its thresholds lies ahead of the positions the new
processes start from (the smallest threshold of the newest level, below which every
position was consumed), and a reader forgets a level once its own next position passes
the level's largest threshold. So a state holds a few integers per process of the
reshards whose stop points still overlap, never a number that grows with the data.

A stage that holds elements (a window shuffle) stops with some of those it read
delivered and others not: its process's threshold is the first element it holds, and
the ones it delivered past it are listed one by one (`taken`, global positions). There
are at most as many as the stage holds (its window) per process, and a reader forgets
each once it passes it.

An `IndexSampler` (a `chute.DataLoader`'s) shards each epoch rather than the whole
stream: shard `k` of `n` reads the records `k, k + n, ...` of every epoch of `N`. Its
frontier says `epoch=N`: global position `g` is then record `g % N` of epoch `g // N`,
and belongs to shard `(g % N) % n` of a level of `n` (`shard_globals`).

Example:
    >>> f = Frontier(0, 1, ((2, (6, 3)),))  # 2 shards had stopped at global 6 and 3.
    >>> [g for g in range(10) if f.keeps(g)]
    [3, 5, 6, 7, 8, 9]
"""

from __future__ import annotations

import bisect
import dataclasses
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from chute_core import DROPPED, InvalidStateError, RandomAccessDataSource
from chute_core.internal import state_position

from ._node import EpochArray, MapNode, PositionArray, fetch
from ._shard_globals import (
    first_position,
    has_records,
    residue,
    shard_global,
    shard_globals,
    shard_locals,
)
from ._window_states import positions_span, span_positions

__all__ = [
    "FRONTIER",
    "MAX_LEVEL_COUNT",
    "MAX_PROCESSES_PER_LEVEL",
    "MAX_TAKEN",
    "Frontier",
    "SkipConsumed",
    "is_watermark",
    "level_of",
    "read_reader_state",
    "reader_state",
    "watermark",
]

T = TypeVar("T")

FRONTIER = "frontier"
"""The key of a reader's state that holds its `Frontier` as JSON, when it has one."""

MAX_LEVEL_COUNT = 1024
"""The most levels a frontier read from a state may hold (a bound on untrusted input)."""

MAX_PROCESSES_PER_LEVEL = 1_000_000
"""The most thresholds one level may hold (as many as processes, bounded like them)."""

MAX_TAKEN = 1 << 22
"""The most `taken` positions a frontier read from a state may hold (a bound on untrusted
input: elements a holding stage delivered ahead of its threshold, a window per process)."""

Level = tuple[int, tuple[int, ...]]
"""`(n, thresholds)`: global `g` is still to be read when `g >= thresholds[residue(g, n)]`."""


@dataclasses.dataclass(frozen=True)
class Frontier:
    """The consumed positions a reader skips: its shard and the levels of earlier stops.

    Position `j` of the reader is global position `index + count * j` (its shard's;
    with `epoch`, of each epoch: `shard_globals`), and is read only if every level
    keeps it and `taken` does not list it (see the module docs).

    Args:
        index: the reader's shard index.
        count: the reader's shard count.
        levels: `(n, thresholds)` pairs, oldest first, each with `n` thresholds.
        taken: global positions of the shard consumed one by one, ascending.
        epoch: records per epoch when shards take a stride of each epoch (an
            `IndexSampler`'s); 0: a stride of the whole stream.

    Example:
        >>> f = Frontier(1, 2, ((3, (9, 4, 5)),))
        >>> f.kept(np.arange(6)).tolist()  # Global 1, 3, 5, 7, 9, 11.
        [False, False, True, True, True, True]
        >>> f.after(2) is None  # Global 5 and on: past every threshold but 9.
        False
        >>> f.after(4) is None
        True
    """

    index: int
    count: int
    levels: tuple[Level, ...]
    taken: tuple[int, ...] = ()
    epoch: int = 0
    _taken: np.ndarray = dataclasses.field(init=False, repr=False, compare=False)
    _runs: list[Any] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_taken", np.asarray(self.taken, dtype=np.int64))
        object.__setattr__(self, "_runs", [])  # `taken` as JSON, once asked for.

    def global_position(self, position: int) -> int:
        """The global position of the reader's `position`."""
        return shard_global(position, self.index, self.count, self.epoch)

    def keeps(self, global_position: int) -> bool:
        """Whether `global_position` is still to be read."""
        if self.taken:
            at = bisect.bisect_left(self.taken, global_position)
            if at < len(self.taken) and self.taken[at] == global_position:
                return False
        epoch = self.epoch
        return all(global_position >= t[residue(global_position, n, epoch)] for n, t in self.levels)

    def kept(self, positions: PositionArray) -> np.ndarray:
        """A boolean mask: which of the reader's `positions` are still to be read."""
        g = shard_globals(positions, self.index, self.count, self.epoch)
        mask = np.ones(g.shape, dtype=bool)
        for n, thresholds in self.levels:
            mask &= g >= np.asarray(thresholds, dtype=np.int64)[residue(g, n, self.epoch)]
        if self.taken:
            mask &= ~np.isin(g, self._taken)
        return mask

    def skip_kept(self, position: int, count: int) -> int:
        """The position just after the first `count` kept positions from `position` on.

        Example:
            >>> Frontier(0, 1, ((2, (4, 1)),)).skip_kept(0, 2)  # Kept: 1, 3, 4, ...
            4
        """
        block = max(1024, 2 * count)
        while count:
            positions = np.arange(position, position + block, dtype=np.int64)
            kept = np.flatnonzero(self.kept(positions))
            if len(kept) >= count:
                return int(positions[kept[count - 1]]) + 1
            count -= len(kept)
            position += block
        return position

    def after(self, position: int) -> Frontier | None:
        """The frontier a reader at `position` still needs: levels ahead of it (None: none)."""
        g = self.global_position(position)
        levels = tuple(level for level in self.levels if max(level[1]) > g)
        taken = self.taken
        if taken and taken[0] < g:
            taken = tuple(self._taken[np.searchsorted(self._taken, g) :].tolist())
        if not levels and not taken:
            return None
        if levels == self.levels and taken is self.taken:
            return self
        return Frontier(self.index, self.count, levels, taken, self.epoch)

    def to_json(self) -> dict[str, Any]:
        """The frontier as JSON, as a state holds it (`taken` only when it lists any)."""
        value: dict[str, Any] = {
            "shard": [self.index, self.count],
            "levels": [[n, list(thresholds)] for n, thresholds in self.levels],
        }
        if self.epoch:
            value["epoch"] = self.epoch
        if self.taken:  # As runs of the shard's positions (see `_taken_runs`).
            runs = self._runs
            if not runs:  # A reader's states ask often: written once (set whole: threads).
                local = shard_locals(self._taken, self.index, self.count, self.epoch)
                runs = _taken_runs(local)
                object.__setattr__(self, "_runs", runs)
            value["taken"] = [list(run) for run in runs]
        return value

    @classmethod
    def from_json(cls, value: object, owner: str) -> Frontier:
        """Reads what `to_json` wrote, or raises `InvalidStateError` naming what is wrong.

        Example:
            >>> Frontier.from_json(  # Taken: positions 3 and 5 of shard 0 of 2.
            ...     {"shard": [0, 2], "levels": [[1, [4]]], "taken": [[3, 2, "BQ=="]]}, "reader")
            Frontier(index=0, count=2, levels=((1, (4,)),), taken=(6, 10), epoch=0)
            >>> try:
            ...     Frontier.from_json({"shard": [0, 2], "levels": [[2, [4]]]}, "reader")
            ... except InvalidStateError as error:
            ...     print(error)
            reader: the frontier's level 0 has 1 thresholds, not the 2 it names.
        """
        if not isinstance(value, Mapping) or not {"shard", "levels"} <= set(value) <= _KEYS:
            raise InvalidStateError(
                f"{owner}: a frontier is a dict with the keys 'shard' and 'levels' (and "
                f"optionally 'taken' and 'epoch'), got {value!r:.200}."
            )
        epoch = value.get("epoch", 0)
        if type(epoch) is not int or not 0 <= epoch <= sys.maxsize:
            raise InvalidStateError(
                f"{owner}: the frontier's epoch is a record count in [0, {sys.maxsize}], got "
                f"{epoch!r:.100}."
            )
        shard, levels = value["shard"], value["levels"]
        if not _ints(shard, 2) or not 0 <= shard[0] < shard[1]:
            raise InvalidStateError(
                f"{owner}: the frontier's shard is [index, count] with 0 <= index < count, got "
                f"{shard!r:.200}."
            )
        if not isinstance(levels, list) or len(levels) > MAX_LEVEL_COUNT:
            raise InvalidStateError(
                f"{owner}: the frontier's levels are a list of at most {MAX_LEVEL_COUNT}, got "
                f"{levels!r:.200}."
            )
        read: list[Level] = []
        for number, level in enumerate(levels):
            read.append(_level(level, number, owner))
        taken = _taken(value.get("taken"), shard[0], shard[1], epoch, owner)
        return cls(int(shard[0]), int(shard[1]), tuple(read), taken, epoch)


_KEYS = {"shard", "levels", "taken", "epoch"}


_RUN_GAP = 256
"""A gap of more positions than this between two taken ones starts another run."""


def _taken_runs(local: np.ndarray) -> list[Any]:
    """Ascending positions of a shard as spans (`positions_span`), one per run.

    A run ends where the next position is more than `_RUN_GAP` away, so a bitmask never
    spans the distance between hosts that stopped far apart.

    Example:
        >>> _taken_runs(np.array([3, 5, 6, 9000]))
        [[3, 3, 'DQ=='], [9000, 1]]
    """
    cuts = np.flatnonzero(np.diff(local) > _RUN_GAP) + 1
    return [positions_span(run.tolist()) for run in np.split(local, cuts)]


def _taken(value: object, index: int, count: int, epoch: int, owner: str) -> tuple[int, ...]:
    """A frontier's `taken` (runs of the shard's positions) as global positions."""
    if value is None:
        return ()
    runs: list[np.ndarray] = []
    if isinstance(value, list) and len(value) <= MAX_TAKEN:
        left = MAX_TAKEN  # Positions the runs may still name, checked before any is made.
        try:
            for run in value:
                runs.append(span_positions(run, owner, left))
                left -= len(runs[-1])
        except InvalidStateError:
            runs = []
    local = np.concatenate(runs) if runs else np.zeros(0, np.int64)
    if (
        not runs
        or len(local) > MAX_TAKEN
        or np.any(np.diff(local) <= 0)
        or local[-1] > (sys.maxsize - index) // count
    ):
        raise InvalidStateError(
            f"{owner}: the frontier's taken positions are runs of at most {MAX_TAKEN:,} "
            f"ascending positions of its shard, each [first, count] or [first, count, mask], "
            f"got {value!r:.200}."
        )
    return tuple(shard_globals(local, index, count, epoch).tolist())


def _ints(value: object, length: int | None = None) -> bool:
    return (
        isinstance(value, list)
        and (length is None or len(value) == length)
        and all(type(item) is int and 0 <= item <= sys.maxsize for item in value)
    )


def _level(level: object, number: int, owner: str) -> Level:
    if not (isinstance(level, list) and len(level) == 2 and type(level[0]) is int):
        raise InvalidStateError(
            f"{owner}: the frontier's level {number} is [n, thresholds], got {level!r:.200}."
        )
    n, thresholds = level
    if not 1 <= n <= MAX_PROCESSES_PER_LEVEL:
        raise InvalidStateError(
            f"{owner}: the frontier's level {number} names {n} processes; a level has 1 to "
            f"{MAX_PROCESSES_PER_LEVEL:,}."
        )
    if not isinstance(thresholds, list) or len(thresholds) != n:
        shown = len(thresholds) if isinstance(thresholds, list) else repr(thresholds)[:80]
        raise InvalidStateError(
            f"{owner}: the frontier's level {number} has {shown} thresholds, not the {n} it names."
        )
    if not _ints(thresholds):
        raise InvalidStateError(
            f"{owner}: the frontier's level {number} holds a threshold that is no non-negative "
            f"int: {thresholds!r:.200}."
        )
    return n, tuple(thresholds)


def level_of(positions: Sequence[int], epoch: int = 0) -> Level:
    """The level of shards `0..n-1` stopped at local `positions`: thresholds `k + n * j_k`.

    With `epoch`, each threshold is the global position of `j_k` in shard `k`'s stride of
    each epoch (`shard_globals`).

    Example:
        >>> level_of([3, 2]), level_of([3, 2], epoch=5)  # Both stopped at epoch 1's start.
        ((2, (6, 5)), (2, (5, 6)))
    """
    n = len(positions)
    thresholds = [shard_global(int(j), k, n, epoch) for k, j in enumerate(positions)]
    if epoch and n > epoch:  # Shards with no record: no global position is theirs.
        highest = max(thresholds[:epoch])
        thresholds[epoch:] = [highest] * (n - epoch)  # Never the watermark.
    return n, tuple(thresholds)


def watermark(level: Level) -> int:
    """The smallest threshold: every global position below it was consumed."""
    return min(level[1])


def is_watermark(level: Level, epoch: int = 0) -> bool:
    """Whether the level keeps exactly the positions from its smallest threshold on.

    Example:
        >>> is_watermark((2, (6, 7))), is_watermark((2, (6, 5))), is_watermark((2, (8, 5)))
        (True, True, False)
        >>> is_watermark((2, (5, 6)), epoch=5), is_watermark((2, (5, 7)), epoch=5)
        (True, False)
    """
    n, thresholds = level
    low = min(thresholds)
    if not epoch:
        return all(t == low + (r - low) % n for r, t in enumerate(thresholds))
    return all(
        t == shard_global(first_position(low, r, n, epoch), r, n, epoch)
        for r, t in enumerate(thresholds)
        if has_records(r, n, epoch)
    )


class SkipConsumed(MapNode[T]):
    """`dataset` with the positions a frontier says were consumed read as `DROPPED`.

    Readers skip `DROPPED`, so a reader over this node reads only what is left; the
    consumed positions are never read from `dataset`.

    Example:
        >>> node = SkipConsumed(range(6), Frontier(0, 1, ((2, (4, 1)),)))
        >>> list(node)
        [1, 3, 4, 5]
    """

    def __init__(self, dataset: RandomAccessDataSource[T], frontier: Frontier) -> None:
        self._dataset = dataset
        self._frontier = frontier

    @property
    def dataset(self) -> RandomAccessDataSource[T]:
        """The dataset read."""
        return self._dataset

    def __len__(self) -> int:
        return len(self._dataset)

    def parent_positions(
        self, positions: PositionArray, epochs: EpochArray
    ) -> tuple[RandomAccessDataSource[T], PositionArray, EpochArray]:
        """Position `p` is the dataset's `p` (when kept).

        So a random map keyed by record sees the same records through a resharded reader.
        """
        return self._dataset, positions, epochs

    def get_many(self, positions: PositionArray, epochs: EpochArray) -> list[T]:
        mask = self._frontier.kept(positions)
        if mask.all():
            return fetch(self._dataset, positions, epochs)
        out: list[Any] = [DROPPED] * len(positions)
        where = np.flatnonzero(mask)
        if len(where):
            for at, element in zip(
                where.tolist(), fetch(self._dataset, positions[where], epochs[where]), strict=True
            ):
                out[at] = element
        return out

    def __repr__(self) -> str:
        return repr(self._dataset)


def read_reader_state(state: object, owner: str, maximum: int) -> tuple[int, Frontier | None]:
    """A reader's `{"position": p}` state, with its frontier when it has one.

    A state with a frontier was written by resharding, which cannot know the length of
    each new shard: its position is clamped to `maximum` (a shard that dropped another
    remainder than the old ones ends before the first position left).

    Raises:
        InvalidStateError: the state is no reader's (the message names `owner`).

    Example:
        >>> read_reader_state({"position": 3}, "reader", 10)
        (3, None)
    """
    if isinstance(state, dict) and FRONTIER in state:
        position = state_position({"position": state.get("position")}, owner, sys.maxsize)
        position = min(position, maximum)
        unknown = sorted(str(key) for key in state if key not in ("position", FRONTIER))
        if unknown:
            raise InvalidStateError(
                f"{owner}: a state has the keys ['position', 'frontier']; unknown {unknown}."
            )
        return position, Frontier.from_json(state[FRONTIER], owner)
    return state_position(state, owner, maximum), None  # type: ignore[arg-type]


def reader_state(position: int, frontier: Frontier | None) -> dict[str, Any]:
    """The state of a reader at `position`, with what of `frontier` it still needs.

    Example:
        >>> reader_state(4, Frontier(0, 1, ((1, (3,)),)))
        {'position': 4}
    """
    left = None if frontier is None else frontier.after(position)
    if left is None:
        return {"position": position}
    return {"position": position, FRONTIER: left.to_json()}
