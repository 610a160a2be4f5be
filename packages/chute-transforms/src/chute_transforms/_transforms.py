"""The transform base classes: what a user writes to say what happens to each element.

Each is an abstract class with one method to implement. The rule for all of them:
**a transform must be picklable and thread-safe.** chute sends it to worker processes
(pickled) and may call it from several threads at once, so it must not keep per-call
state on `self` (counters, caches without locks, open files created in `__init__`).
Randomness comes only from the `rng` argument of `RandomMapTransform.random_map`,
which chute derives from (seed, position): never from a generator stored on `self`.

Plain callables are accepted wherever a transform is (see `as_map_fn` and friends).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from chute_core.internal import check_bool, check_int

from ._batch import BatchFn

__all__ = [
    "BatchTransform",
    "FilterTransform",
    "FlatMapTransform",
    "MapTransform",
    "MapWithIndexTransform",
    "RandomMapTransform",
]

T = TypeVar("T")
U = TypeVar("U")


class MapTransform(abc.ABC, Generic[T, U]):
    """Maps each element to one new element.

    Implement `map`. It must be a pure function of the element: picklable, thread-safe
    (it runs in worker processes and threads), and without randomness (use
    `RandomMapTransform` for that).

    Example:
        >>> class Double(MapTransform[int, int]):
        ...     def map(self, element: int) -> int:
        ...         return 2 * element
        >>> Double().map(21)
        42
    """

    @abc.abstractmethod
    def map(self, element: T) -> U:
        """Returns the transformed element."""

    def map_many(self, elements: Sequence[T]) -> list[U]:
        """Returns `[self.map(e) for e in elements]`: override it with a batched version.

        chute calls it where it holds several elements at once (a worker's chunk, a
        random-access read of several positions) if a subclass overrides it, e.g. to
        encode many texts in one call that releases the GIL. It must return exactly
        what `map` returns for each element, in order. If it raises, chute maps the
        elements one by one with `map` instead, so an error names its element.
        """
        return [self.map(element) for element in elements]


class MapWithIndexTransform(abc.ABC, Generic[T, U]):
    """Maps each element and its position in the dataset to one new element.

    Implement `map_with_index`. Same rules as `MapTransform`: picklable, thread-safe,
    and a pure function of (index, element).

    Example:
        >>> class Tag(MapWithIndexTransform[str, str]):
        ...     def map_with_index(self, index: int, element: str) -> str:
        ...         return f"{index}:{element}"
        >>> Tag().map_with_index(3, "x")
        '3:x'
    """

    @abc.abstractmethod
    def map_with_index(self, index: int, element: T) -> U:
        """Returns the transformed element; `index` is its position in the dataset."""


class RandomMapTransform(abc.ABC, Generic[T, U]):
    """Maps each element to one new element, with randomness from `rng`.

    Implement `random_map`. chute passes a fresh `np.random.Generator` seeded from
    (seed, position), so the same element gets the same randomness on every run, with
    any worker count and after a resume. Use only that generator (never `np.random.*`
    module functions or a generator kept on `self`). Picklable and thread-safe.

    Example:
        >>> import numpy as np
        >>> class AddNoise(RandomMapTransform[float, float]):
        ...     def random_map(self, element: float, rng: np.random.Generator) -> float:
        ...         return element + float(rng.uniform())
        >>> t = AddNoise()
        >>> t.random_map(1.0, np.random.default_rng(0)) == t.random_map(
        ...     1.0, np.random.default_rng(0))
        True
    """

    @abc.abstractmethod
    def random_map(self, element: T, rng: np.random.Generator) -> U:
        """Returns the transformed element, drawing randomness only from `rng`."""


class FilterTransform(abc.ABC, Generic[T]):
    """Keeps the elements for which `filter` returns True.

    Implement `filter`. It must be a pure function of the element: picklable and
    thread-safe.

    Example:
        >>> class Even(FilterTransform[int]):
        ...     def filter(self, element: int) -> bool:
        ...         return element % 2 == 0
        >>> [x for x in range(5) if Even().filter(x)]
        [0, 2, 4]
    """

    @abc.abstractmethod
    def filter(self, element: T) -> bool:
        """Returns True to keep the element, False to drop it."""


class FlatMapTransform(abc.ABC, Generic[T, U]):
    """Maps each element to zero or more new elements (at most `max_fan_out`).

    Implement `flat_map`, and set `max_fan_out` as a class attribute or pass it to
    `__init__`: it bounds how many elements one input may produce, so random-access
    datasets can give each output a fixed position. Picklable and thread-safe.

    Args:
        max_fan_out: overrides the class attribute for this instance.

    Example:
        >>> class Repeat(FlatMapTransform[str, str]):
        ...     max_fan_out = 3
        ...     def flat_map(self, element: str) -> list[str]:
        ...         return [element] * 3
        >>> Repeat().flat_map("a"), Repeat(max_fan_out=4).max_fan_out
        (['a', 'a', 'a'], 4)
    """

    max_fan_out: int

    def __init__(self, max_fan_out: int | None = None) -> None:
        if max_fan_out is not None:
            self.max_fan_out = check_int(max_fan_out, "max_fan_out", type(self).__name__, minimum=1)

    @abc.abstractmethod
    def flat_map(self, element: T) -> Iterable[U]:
        """Returns the elements that replace `element` (at most `max_fan_out`)."""


@dataclasses.dataclass(frozen=True)
class BatchTransform:
    """Groups consecutive elements into batches of `batch_size` (a configuration).

    Batching stacks the elements' pytrees leaf-wise (see `batch_elements`). Applied
    after sharding, `batch_size` is the batch size per host.

    Attributes:
        batch_size: elements per batch, >= 1.
        drop_remainder: drop a last batch smaller than `batch_size`.
        pad: pad a last short batch to `batch_size` with zeros; every batch is then a
            `(batch, mask)` pair whose boolean `mask` marks the real rows.
        batch_fn: builds a batch from a list of elements instead of `batch_elements`.

    Example:
        >>> BatchTransform(128, drop_remainder=True)
        BatchTransform(batch_size=128, drop_remainder=True, pad=False, batch_fn=None)
    """

    batch_size: int
    drop_remainder: bool = False
    pad: bool = False
    batch_fn: BatchFn | None = None

    def __post_init__(self) -> None:
        size = check_batch_options(
            "BatchTransform", self.batch_size, self.drop_remainder, self.pad, self.batch_fn
        )
        object.__setattr__(self, "batch_size", size)


def check_batch_options(
    owner: str, batch_size: object, drop_remainder: object, pad: object, batch_fn: Any
) -> int:
    """Returns `batch_size` as an int, or raises a clear TypeError / ValueError."""
    size = check_int(batch_size, "batch_size", owner, minimum=1)
    check_bool(drop_remainder, "drop_remainder", owner)
    check_bool(pad, "pad", owner)
    if drop_remainder and pad:
        raise ValueError(
            f"{owner}: drop_remainder=True and pad=True contradict each other: choose "
            "one way to handle the last short batch."
        )
    if batch_fn is not None and not callable(batch_fn):
        raise TypeError(f"{owner}: batch_fn must be callable or None, got {batch_fn!r}.")
    return size
