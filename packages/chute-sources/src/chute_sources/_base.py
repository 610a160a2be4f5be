"""What every chute source shares: closing, the context manager, and a parameter repr."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, Generic, Self, SupportsIndex, TypeVar

import numpy as np
import numpy.typing as npt

from chute_core import SourceClosedError, StageTraits, declare_op

from ._keys import normalize_key, normalize_keys

__all__ = ["SOURCE", "Source"]

T = TypeVar("T")


class Source(abc.ABC, Generic[T]):
    """Base class of chute's random-access sources.

    Subclasses implement `__len__`, `_read(index)` for one in-range key and, when a
    batched read is cheaper, `_read_many(indices)`. This class checks keys, raises after
    `close()`, and provides the context manager.

    Example:
        >>> class Squares(Source[int]):
        ...     def __len__(self) -> int:
        ...         return 4
        ...     def _read(self, index: int) -> int:
        ...         return index * index
        >>> Squares()[-1], Squares().__getitems__([1, 2])
        (9, [1, 4])
    """

    _closed: bool = False

    @abc.abstractmethod
    def __len__(self) -> int:
        """The number of records."""

    @abc.abstractmethod
    def _read(self, index: int) -> T:
        """The record at an in-range, non-negative `index`."""

    def _read_many(self, indices: Sequence[int]) -> list[T]:
        return [self._read(index) for index in indices]

    def _read_array(self, indices: npt.NDArray[np.int64]) -> list[T]:
        """Records at checked indices given as an array; by default `_read_many` of a list.

        `indices` may be the caller's own array: read it, never modify it.
        """
        return self._read_many(indices.tolist())

    def _params(self) -> dict[str, Any]:
        """The parameters shown by `repr`."""
        return {}

    def _check_open(self) -> None:
        if self._closed:
            raise SourceClosedError(
                f"{self!r} was closed; create a new source (or pickle it before closing)."
            )

    def __getitem__(self, record_key: SupportsIndex) -> T:
        self._check_open()
        return self._read(normalize_key(record_key, len(self), self))

    def __getitems__(
        self, record_keys: Sequence[SupportsIndex] | npt.NDArray[np.integer[Any]]
    ) -> list[T]:
        self._check_open()
        return self._read_array(normalize_keys(record_keys, len(self), self))

    def close(self) -> None:
        """Releases file handles and memory; reads afterwards raise `SourceClosedError`."""
        self._closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        params = ", ".join(f"{key}={value!r}" for key, value in self._params().items())
        return f"{type(self).__name__}({params})"


SOURCE = declare_op("source", StageTraits())
"""The op's declaration (see `chute_core.declare_op`)."""
