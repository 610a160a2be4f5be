"""`select_keys`: keep only some keys of each dict element, in the order given.

Pipelines often read records with more fields than the model needs (file names,
captions, raw bytes): selecting the keys early makes every later stage, the transport
between processes and batching cheaper. A key that an element lacks is an error that
names the key and the element's keys, never a silently smaller element.

Example:
    >>> SelectKeys(["label", "image"])({"image": 1, "label": 2, "path": "a.png"})
    {'label': 2, 'image': 1}
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from chute_core import (
    ArgumentTypeError,
    CheckpointableIterator,
    InvalidArgumentError,
    RandomAccessDataSource,
    StageTraits,
    declare_op,
)

from ._errors import TransformTypeError
from ._iter_ops import MapIter
from ._map_ops import MapMap

__all__ = ["SELECT_KEYS", "MissingKeyError", "SelectKeys", "SelectKeysIter", "SelectKeysMap"]


class MissingKeyError(TransformTypeError, KeyError):
    """An element without a key that `select_keys` asked for (also a `KeyError`).

    Example:
        >>> try:
        ...     SelectKeys(["label"])({"image": 1})
        ... except KeyError as error:
        ...     print(error.args[0])
        select_keys: the element has no key 'label' (its keys: ['image']).
    """


class SelectKeys:
    """The function `select_keys` applies: a dict of `keys`, taken from each element.

    Args:
        keys: the keys to keep (at least one, each once), in the order of the result.

    Raises:
        ArgumentTypeError: `keys` is a single string or not a sequence, or a key is
            not hashable.
        InvalidArgumentError: `keys` is empty or names a key twice.

    Example:
        >>> SelectKeys(("b",))({"a": 1, "b": 2})
        {'b': 2}
    """

    def __init__(self, keys: Sequence[Hashable]) -> None:
        if isinstance(keys, str | bytes) or not isinstance(keys, Sequence):
            raise ArgumentTypeError(
                f"select_keys: keys must be a list of keys (e.g. ['image', 'label']), got "
                f"{type(keys).__name__} {keys!r:.80}."
            )
        for key in keys:
            if not isinstance(key, Hashable):
                raise ArgumentTypeError(
                    f"select_keys: each key must be hashable, got {type(key).__name__}."
                )
        if not keys:
            raise InvalidArgumentError("select_keys: keys must name at least one key.")
        if len(set(keys)) != len(keys):
            twice = sorted({repr(key) for key in keys if list(keys).count(key) > 1})
            raise InvalidArgumentError(f"select_keys: keys names {', '.join(twice)} twice.")
        self.keys = tuple(keys)
        self.__name__ = repr(list(self.keys))  # How error notes show it: select_keys([...]).

    def __call__(self, element: Any) -> dict[Any, Any]:
        if not isinstance(element, Mapping):
            raise TransformTypeError(
                f"select_keys: an element must be a dict (a mapping), got {type(element).__name__}."
            )
        try:
            return {key: element[key] for key in self.keys}
        except KeyError:
            missing = next(key for key in self.keys if key not in element)
            raise MissingKeyError(
                f"select_keys: the element has no key {missing!r} (its keys: "
                f"{sorted(element, key=repr)})."
            ) from None

    def __repr__(self) -> str:
        return f"SelectKeys({list(self.keys)!r})"


class SelectKeysMap(MapMap[dict[Any, Any]]):
    """`select_keys` over a random-access dataset (see `SelectKeys`).

    Example:
        >>> SelectKeysMap([{"a": 1, "b": 2}], ["b"])[0]
        {'b': 2}
    """

    _op = "select_keys"

    def __init__(self, parent: RandomAccessDataSource[Any], keys: Sequence[Hashable]) -> None:
        super().__init__(parent, SelectKeys(keys))


class SelectKeysIter(MapIter[dict[Any, Any]]):
    """`select_keys` over a stream (see `SelectKeys`).

    Example:
        >>> from chute_samplers import SequentialIter
        >>> list(SelectKeysIter(SequentialIter([{"a": 1, "b": 2}]), ["a"]))
        [{'a': 1}]
    """

    _op = "select_keys"

    def __init__(self, parent: CheckpointableIterator[Any], keys: Sequence[Hashable]) -> None:
        super().__init__(parent, SelectKeys(keys))


SELECT_KEYS = declare_op(
    "select_keys",
    StageTraits(elementwise=True, keeps_positions=True),
    map_node=SelectKeysMap,
    iter_node=SelectKeysIter,
)
"""The op's declaration (see `chute_core.declare_op`): `ds.select_keys(keys)`."""
