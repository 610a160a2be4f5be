"""A progress bar around an iterator that stays checkpointable."""

from __future__ import annotations

from typing import Any

__all__ = ["ProgressIterator"]


class ProgressIterator:
    """Counts elements on a tqdm bar; states, origins and stats pass through.

    Example:
        >>> it = ProgressIterator(iter([1, 2]), disable=True)
        >>> list(it)
        [1, 2]
    """

    def __init__(self, inner: Any, *, disable: bool | None = None) -> None:
        from tqdm.auto import tqdm  # Here: importing tqdm costs every worker's start.

        self._inner = inner
        self._bar = tqdm(unit=" elements", disable=disable, dynamic_ncols=True)

    def __iter__(self) -> ProgressIterator:
        return self

    def __next__(self) -> Any:
        try:
            element = next(self._inner)
        except StopIteration:
            self._bar.close()
            raise
        self._bar.update()
        return element

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
