"""The ops of a stream that keep its element type and change its order: `IterDataset`'s.

`seed` (from which later random stages derive theirs), `window_shuffle`, `repeat`,
`limit`. Each returns a new dataset of the same kind (`Self`).
"""

from __future__ import annotations

from typing import Self, TypeVar

from chute_samplers import LimitIter, RepeatIter, WindowShuffleIter

from ._args import check_int, check_optional_int
from ._factories import MarkFactory
from ._iter_base import IterBase
from ._pipeline import check_pipeline_seed, stage

__all__ = ["OrderOps"]

T = TypeVar("T")


class OrderOps(IterBase[T]):
    """`seed`, `window_shuffle`, `repeat`, `limit` (see `IterDataset`)."""

    __slots__ = ()

    def seed(self, seed: int) -> Self:
        """Sets the seed from which later random stages without a `seed` derive theirs.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(4).to_iter_dataset().seed(1).window_shuffle(4)
            >>> sorted(ds)
            [0, 1, 2, 3]
        """
        checked = check_pipeline_seed(seed)
        return self._construct(MarkFactory(self._factory, stage("seed", seed=checked)), checked)

    def window_shuffle(self, window_size: int, seed: int | None = None) -> Self:
        """Shuffles within consecutive windows of `window_size` elements.

        The state holds no elements: a restore re-reads the current window.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(6).to_iter_dataset().window_shuffle(3, seed=0)
            >>> out = list(ds)
            >>> sorted(out[:3]), sorted(out[3:])
            ([0, 1, 2], [3, 4, 5])
        """
        window_size = check_int(window_size, "window_size", "IterDataset.window_shuffle", minimum=1)
        chosen = self._stage_seed(seed, "window_shuffle")
        item = stage("window_shuffle", window_size=window_size, seed=chosen)
        return self._then(WindowShuffleIter, item, window_size, chosen)

    def repeat(self, num_epochs: int | None = None) -> Self:
        """Reads the stream again from its start, `num_epochs` times (None: endlessly).

        Every epoch yields the same elements as the first (the stages before the
        repeat are not reseeded, as in Grain); a random stage after the repeat draws
        anew each epoch. Each epoch restores the stream's starting state rather than
        building the iterators again, so a `cache()` before the repeat replays from
        memory. The state is the epoch and the stream's state. An empty stream ends at
        once, even when endless.

        Example:
            >>> import chute
            >>> ds = chute.MapDataset.range(3).to_iter_dataset().filter(lambda x: x != 1)
            >>> list(ds.repeat(2)), list(ds.repeat().limit(5))
            ([0, 2, 0, 2], [0, 2, 0, 2, 0])
        """
        num_epochs = check_optional_int(num_epochs, "num_epochs", "IterDataset.repeat")
        return self._then(RepeatIter, stage("repeat", num_epochs=num_epochs), num_epochs)

    def limit(self, count: int) -> Self:
        """The first `count` elements of the stream (all of them if it has fewer).

        Nothing past the `count`-th element is read. The state is the number yielded
        and the stream's state.

        Example:
            >>> import chute
            >>> list(chute.MapDataset.range(10).to_iter_dataset().limit(3))
            [0, 1, 2]
        """
        count = check_int(count, "count", "IterDataset.limit")
        return self._then(LimitIter, stage("limit", count=count), count)
