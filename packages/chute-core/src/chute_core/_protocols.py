"""The protocols every chute layer builds on: random access and checkpointable iteration.

A *random-access source* has a length and answers a record key with a record; it may
also answer many keys at once (`__getitems__`), which the layers above prefer because it
moves per-element Python overhead into one call. A *checkpointable iterator* is a
Python iterator whose position can be captured as a small JSON-serialisable dict and
restored later, in this process or another one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, SupportsIndex, TypeAlias, TypeVar, runtime_checkable

__all__ = [
    "CheckpointableIterator",
    "IteratorState",
    "JsonValue",
    "RandomAccessDataSource",
    "SupportsGetItems",
    "read_records",
]

T_co = TypeVar("T_co", covariant=True)
T = TypeVar("T")

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
"""A value that `json.dumps` writes and `json.loads` reads back unchanged."""

IteratorState: TypeAlias = "dict[str, JsonValue]"
"""What `get_state` returns and `set_state` takes: a JSON object."""


@runtime_checkable
class RandomAccessDataSource(Protocol[T_co]):
    """A finite collection of records addressed by integer keys `0 .. len - 1`.

    Sources must be picklable (worker processes receive them pickled) and safe to read
    from several threads at once. Sources that hold file handles reopen them lazily
    after unpickling and close them in `close()` / `__exit__`.

    Example:
        >>> isinstance(range(3), RandomAccessDataSource)
        True
        >>> isinstance(iter([]), RandomAccessDataSource)
        False
    """

    def __len__(self) -> int:
        """Returns the number of records."""
        ...

    def __getitem__(self, record_key: SupportsIndex, /) -> T_co:
        """Returns the record stored under `record_key`."""
        ...


@runtime_checkable
class SupportsGetItems(Protocol[T_co]):
    """A source that reads many records in one call (faster than one call per key).

    Example:
        >>> class Squares:
        ...     def __getitems__(self, keys):
        ...         return [k * k for k in keys]
        >>> isinstance(Squares(), SupportsGetItems), isinstance([1], SupportsGetItems)
        (True, False)
    """

    def __getitems__(self, record_keys: Sequence[int], /) -> Sequence[T_co]:
        """Returns the records for `record_keys`, in the same order."""
        ...


@runtime_checkable
class CheckpointableIterator(Protocol[T_co]):
    """An iterator whose position is a small JSON-serialisable dict.

    Contract: after `it2.set_state(it1.get_state())`, `it2` yields exactly what `it1`
    yields from that point on, whatever `it2` had done before. `get_state` is cheap and
    never waits for background work. chute's own iterators also have `close()` (and are
    context managers): see `chute_samplers.IterNode.close`.

    Example:
        >>> class Count:
        ...     def __init__(self):
        ...         self.n = 0
        ...     def __iter__(self):
        ...         return self
        ...     def __next__(self):
        ...         self.n += 1
        ...         return self.n
        ...     def get_state(self):
        ...         return {"n": self.n}
        ...     def set_state(self, state):
        ...         self.n = state["n"]
        >>> isinstance(Count(), CheckpointableIterator)
        True
        >>> isinstance(iter([]), CheckpointableIterator)
        False
    """

    def __iter__(self) -> CheckpointableIterator[T_co]:
        """Returns the iterator itself."""
        ...

    def __next__(self) -> T_co:
        """Returns the next element or raises `StopIteration`."""
        ...

    def get_state(self) -> IteratorState:
        """Returns the position as a JSON-serialisable dict."""
        ...

    def set_state(self, state: IteratorState, /) -> None:
        """Moves to the position that `state` (from `get_state`) describes."""
        ...


def read_records(source: RandomAccessDataSource[T], record_keys: Sequence[int]) -> list[T]:
    """Reads `record_keys` from `source`, in one batched call when the source has one.

    Args:
        source: any random-access source.
        record_keys: the keys to read, in the order wanted.

    Returns:
        The records, in the order of `record_keys`.

    Example:
        >>> read_records(["a", "b", "c"], [2, 0])
        ['c', 'a']
    """
    getitems = getattr(source, "__getitems__", None)
    if getitems is not None:
        return list(getitems(record_keys))
    return [source[key] for key in record_keys]
