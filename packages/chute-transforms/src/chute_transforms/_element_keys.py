"""The key by which a split names an element: its parent's origin, one int or two.

A stage that splits elements (a flat map, an unbatch) names the element it stopped
inside (`at`), and a resharded state the elements whose first outputs another process
delivered (`skip`), by the parent's origin: the position `p` of an element of a shard
read in order (origin `(p,)`) or, over an interleave, the stream's input and the
position in it (origin `(input, p)`). In a state a key is the int, or the two-int list
`[input, p]`.

Example:
    >>> class Parent:
    ...     origin = (3, 7)
    >>> element_key(Parent()), key_json(element_key(Parent())), key_from_json([3, 7])
    ((3, 7), [3, 7], (3, 7))
    >>> skip_entries({(3, 7): 2, (1, 0): 1})
    [[[1, 0], 1], [[3, 7], 2]]
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from chute_core import InvalidStateError

__all__ = ["Key", "element_key", "key_from_json", "key_json", "skip_entries", "state_key"]

Key = int | tuple[int, int]
"""An element's position, or (input, position) over an interleave."""


def element_key(parent: object) -> Key | None:
    """The key of the element `parent` last gave: its origin (None: none, or longer)."""
    origin: tuple[int, ...] | None = getattr(parent, "origin", None)
    if origin is None:
        return None
    if len(origin) == 1:
        return origin[0]
    if len(origin) == 2:
        return (origin[0], origin[1])
    return None


def key_json(key: Key) -> Any:
    """`key` as a state writes it."""
    return list(key) if isinstance(key, tuple) else key


def key_from_json(value: object) -> Key | None:
    """The key a state wrote (None: not an int >= 0, nor two of them)."""
    if type(value) is int and 0 <= value <= sys.maxsize:
        return value
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(type(x) is int and 0 <= x <= sys.maxsize for x in value)
    ):
        return (value[0], value[1])
    return None


def skip_entries(skips: Mapping[Key, int]) -> Any:
    """`[[key, count], ...]` of `skips`, in order (positions first, then pairs)."""
    ordered = sorted(skips.items(), key=lambda item: (isinstance(item[0], tuple), item[0]))
    return [[key_json(key), count] for key, count in ordered]


def state_key(owner: object, state: Mapping[str, Any], name: str) -> Key | None:
    """The key `state[name]` names (None: absent).

    Raises:
        InvalidStateError: neither an int >= 0 nor `[input, position]`.
    """
    if name not in state:
        return None
    key = key_from_json(state[name])
    if key is None:
        raise InvalidStateError(
            f"{owner!r}: state[{name!r}] must be an int >= 0 or [input, position], got "
            f"{state[name]!r:.80}."
        )
    return key
