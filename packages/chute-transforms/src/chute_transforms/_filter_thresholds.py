"""`FilterThresholds`: when a filter that drops too much warns, or raises.

A filter counts what it sees in windows of `window` elements (1000): when the share
it dropped in a window is above `warn_ratio` it issues a `FilterWarning` (once), above
`raise_ratio` it raises `FilterRatioError`. Grain's `DatasetOptions` set the same two
ratios, and `chute.grain` sets them through this object, which the filters of a
pipeline share (so options given later reach filters made earlier).
"""

from __future__ import annotations

import warnings
from typing import Any

from chute_core import DROPPED

__all__ = ["FilterCounter", "FilterRatioError", "FilterThresholds", "FilterWarning"]


class FilterWarning(UserWarning):
    """A filter dropped more of a window of elements than its thresholds allow (90%).

    Example:
        >>> issubclass(FilterWarning, UserWarning)
        True
    """


class FilterRatioError(ValueError):
    """A filter dropped more of a window of elements than `raise_ratio` allows.

    Example:
        >>> issubclass(FilterRatioError, ValueError)
        True
    """


def _ratio(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(
            f"FilterThresholds: {name} must be a number in [0, 1] or None, got {value!r}."
        )
    return float(value)


class FilterThresholds:
    """The dropped shares above which filters warn or raise (None: never).

    Args:
        warn_ratio: warn (once per filter) above this share of a window (default 0.9).
        raise_ratio: raise above this share of a window (default None: never).
        window: elements per window.

    Example:
        >>> FilterThresholds(raise_ratio=0.5)
        FilterThresholds(warn_ratio=0.9, raise_ratio=0.5, window=1000)
    """

    def __init__(
        self,
        warn_ratio: float | None = 0.9,
        raise_ratio: float | None = None,
        window: int = 1000,
    ) -> None:
        self.set(warn_ratio, raise_ratio)
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"FilterThresholds: window must be an int >= 1, got {window!r}.")
        self.window = window

    def set(self, warn_ratio: float | None, raise_ratio: float | None) -> None:
        """Changes both ratios (filters sharing this object see them at their next window)."""
        self.warn_ratio = _ratio(warn_ratio, "warn_ratio")
        self.raise_ratio = _ratio(raise_ratio, "raise_ratio")

    def __repr__(self) -> str:
        return (
            f"FilterThresholds(warn_ratio={self.warn_ratio}, raise_ratio={self.raise_ratio}, "
            f"window={self.window})"
        )


DEFAULT_THRESHOLDS = FilterThresholds()


class FilterCounter:
    """One filter's windows: counts elements seen and dropped, warns or raises.

    Example:
        >>> counter = FilterCounter(FilterThresholds(raise_ratio=0.5, window=4), "filter(f)")
        >>> counter.count(4, 1)
        >>> try:
        ...     counter.count(4, 3)
        ... except FilterRatioError as error:
        ...     print(str(error)[:48])
        filter(f) dropped 3 of a window of 4 elements (7
    """

    def __init__(self, thresholds: FilterThresholds | None, shown: str) -> None:
        self.thresholds = DEFAULT_THRESHOLDS if thresholds is None else thresholds
        self.shown = shown
        self.seen = self.dropped = 0
        self.warned = False

    def count(self, seen: int, dropped: int) -> None:
        """Adds `seen` elements, `dropped` of them dropped; checks each full window."""
        self.seen += seen
        self.dropped += dropped
        window = self.thresholds.window
        if self.seen < window:
            return
        share = self.dropped / self.seen
        seen, dropped = self.seen, self.dropped
        self.seen = self.dropped = 0
        limit = self.thresholds.raise_ratio
        if limit is not None and share > limit:
            raise FilterRatioError(
                f"{self.shown} dropped {dropped} of a window of {seen} elements "
                f"({share:.0%}), above raise_ratio {limit} (Grain's "
                "filter_raise_threshold_ratio): check the predicate, or raise the threshold."
            )
        limit = self.thresholds.warn_ratio
        if limit is not None and share > limit and not self.warned:
            self.warned = True
            warnings.warn(
                f"{self.shown} dropped {dropped} of a window of {seen} elements "
                f"({share:.0%} > {limit:.0%}); consider filtering the data once, offline, "
                "or mixing sources by weight instead.",
                FilterWarning,
                stacklevel=4,
            )

    def count_out(self, out: list[Any]) -> None:
        """`count` for a list of outputs where dropped ones are `DROPPED`, window by window."""
        start = 0
        while start < len(out):
            stop = min(len(out), start + self.thresholds.window - self.seen)
            dropped = sum(1 for element in out[start:stop] if element is DROPPED)
            self.count(stop - start, dropped)
            start = stop
