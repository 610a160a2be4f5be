"""`IterNode`: the base class of chute's checkpointable iterators (streams)."""

from __future__ import annotations

import abc
from typing import Generic, TypeVar

from chute_core import IteratorState

__all__ = ["IterNode", "upstream_iterators"]

T = TypeVar("T")


class IterNode(abc.ABC, Generic[T]):
    """A Python iterator whose position is a small JSON-serialisable dict.

    Subclasses implement `__next__`, `get_state` and `set_state` (the
    `chute_core.CheckpointableIterator` protocol). The contract: after
    `b.set_state(a.get_state())`, `b` yields exactly what `a` yields from there on,
    whatever `b` did before; `get_state` is cheap. An iterator is used by one thread at a
    time.

    Origins: `origin` names where the element last returned by `__next__` came from, as a
    tuple of non-negative ints that does not depend on how the stream is cut into chunks
    or processes: the base position first (the position in the dataset a
    `SequentialIter` reads, or the global index of an `IndexSamplerIterator`), then
    sub-indices added by ops that make several elements of one (a flat map adds the
    output's number among the element's outputs, an unbatch the row). Ops that combine
    streams put the stream's number in front (`MixIter`: the component,
    `InterleaveIter`: the input); ops that read several elements per output (batch,
    packing) give the origin of the first one. It is None before the first element, when
    unknown (a parent without origins), and may be None after `set_state` until the next
    element. Read it right after `__next__` returned: wrappers read it from their
    parents lazily, so after `__next__` raised (also `StopIteration`) it is unspecified.
    Randomness keyed by it (`chute_transforms.RandomMapIter`) is the same whichever
    worker runs the element, and however many elements a filter dropped before it.
    Subclasses that do not know their elements' origins keep the default (None).

    Lifecycle: `close()` releases what the iterator holds (threads, worker processes,
    buffers) and closes its parents; it is idempotent, keeps the position, and runs at
    the end of a `with` block.

    Example:
        >>> from chute_samplers import SequentialIter
        >>> it = SequentialIter(["a", "b", "c"])
        >>> next(it), it.get_state(), it.origin
        ('a', {'position': 1}, (0,))
        >>> with SequentialIter(["a", "b"]) as it:
        ...     first = next(it)
        >>> first, it.get_state()
        ('a', {'position': 1})
        >>> from chute_sources import DROPPED
        >>> it = SequentialIter(["a", DROPPED, "c"])
        >>> [(element, it.origin) for element in it]
        [('a', (0,)), ('c', (2,))]
    """

    def __iter__(self) -> IterNode[T]:
        return self

    @abc.abstractmethod
    def __next__(self) -> T:
        """Returns the next element, or raises `StopIteration` at the end."""

    @property
    def origin(self) -> tuple[int, ...] | None:
        """The origin of the element last returned by `__next__` (see the class docs).

        A tuple of non-negative ints that identifies the element independently of how
        the stream is split into chunks or processes (the base position first, then
        sub-indices); None before the first element or when unknown. This default
        returns None.
        """
        return None

    @abc.abstractmethod
    def get_state(self) -> IteratorState:
        """Returns the position as a JSON-serialisable dict."""

    @abc.abstractmethod
    def set_state(self, state: IteratorState, /) -> None:
        """Moves to the position `state` (from `get_state`) describes.

        Raises:
            chute_core.InvalidStateError: the state is malformed or out of range.
        """

    def close(self) -> None:
        """Releases the threads, processes and buffers behind this iterator and its parents.

        Part of the contract of every chute iterator: idempotent (closing twice does
        nothing more), forwarded to the parents, and also run by `with` (an iterator is
        a context manager). The position is kept: `get_state()` still answers, and a
        later `next()` starts what it needs again. Iterators are also closed when the
        stream ends, on garbage collection and at interpreter exit; call `close()` (or
        use `with`) to release them at a known point, e.g. before a process forks or
        when a training loop stops early.

        This default closes every iterator this one holds (its parents, found among
        its attributes, also in lists and tuples); iterators that own threads or
        processes stop those first, then close their parents.
        """
        for child in upstream_iterators(self):
            close = getattr(child, "close", None)
            if callable(close):
                close()

    def start_prefetch(self) -> None:
        """Starts the background work behind this iterator now, before the first `next()`.

        Worker processes and prefetch threads otherwise start at the first `next()`;
        calling this first (e.g. right after restoring a checkpoint, before restoring
        the model) hides their start-up. Idempotent; it changes no element or state,
        and does nothing in a chain without prefetching stages. This default forwards
        the call to the parents; iterators that own workers or threads start them.
        """
        for child in upstream_iterators(self):
            start = getattr(child, "start_prefetch", None)
            if callable(start):
                start()

    def __enter__(self) -> IterNode[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def upstream_iterators(iterator: object) -> list[object]:
    """The checkpointable iterators `iterator` reads from: its parents, in order.

    The one rule by which chute finds an iterator's parents (to close them, and to
    describe a user's wrapper as the pipeline it wraps): the attributes of `iterator`
    that are checkpointable iterators (`__next__` and `get_state`), also inside lists
    and tuples, in the order they were set. Sources and other values are not parents.

    Example:
        >>> from chute_samplers import SequentialIter
        >>> class Twice:
        ...     def __init__(self, parent):
        ...         self.parent, self.factor = parent, 2
        >>> inner = SequentialIter([1, 2])
        >>> upstream_iterators(Twice(inner)) == [inner]
        True
    """
    found: list[object] = []
    for value in getattr(iterator, "__dict__", {}).values():
        for child in value if isinstance(value, list | tuple) else (value,):
            if child is not iterator and _is_iterator(child) and all(child is not f for f in found):
                found.append(child)
    return found


def _is_iterator(value: object) -> bool:
    """Whether `value` is a checkpointable iterator (not a source)."""
    return all(callable(getattr(value, name, None)) for name in ("__next__", "get_state"))
