"""Grain's `DatasetOptions`, `ExecutionTrackingMode` and `WithOptionsIterDataset`.

Options reach every stage of a pipeline, before and after the `WithOptionsIterDataset`
that sets them; set again, they merge (the later one wins for the fields it sets):

- `filter_warn_threshold_ratio` / `filter_raise_threshold_ratio`: each filter of a
  `chute.grain` pipeline shares a `chute_transforms.FilterThresholds` with its pipeline,
  counted in windows of 1000 elements (worker processes get them with the pipeline).
- `execution_tracking_mode=STAGE_TIMING`: iterators time every stage, as
  `ds.iter(stats=True)` does (`iterator.stats()`).
- `min_shm_size`: accepted; chute's workers choose what goes through shared memory.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
from collections.abc import Iterator
from typing import Any

from chute_transforms import FilterThresholds

from .._subclassing import made

__all__ = [
    "DatasetOptions",
    "ExecutionTrackingMode",
    "WithOptionsIterDataset",
    "filter_thresholds",
    "options_of",
]


@enum.unique
class ExecutionTrackingMode(enum.Enum):
    """Whether iterators time their stages (Grain's enum).

    Example:
        >>> ExecutionTrackingMode.STAGE_TIMING.name
        'STAGE_TIMING'
    """

    DISABLED = enum.auto()
    STAGE_TIMING = enum.auto()


_UNSET: Any = object()
_DEFAULTS = {
    "filter_warn_threshold_ratio": 0.9,
    "filter_raise_threshold_ratio": None,
    "execution_tracking_mode": ExecutionTrackingMode.DISABLED,
    "min_shm_size": 0,
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class DatasetOptions:
    """Options of a pipeline's stages; fields left out keep their defaults (Grain's).

    Example:
        >>> a = DatasetOptions(filter_warn_threshold_ratio=0.6, filter_raise_threshold_ratio=0.8)
        >>> b = DatasetOptions(filter_warn_threshold_ratio=0.7)
        >>> merged = b.merge(a)
        >>> merged.filter_warn_threshold_ratio, merged.filter_raise_threshold_ratio
        (0.7, 0.8)
    """

    filter_warn_threshold_ratio: float | None = _UNSET
    filter_raise_threshold_ratio: float | None = _UNSET
    execution_tracking_mode: ExecutionTrackingMode = _UNSET
    min_shm_size: int = _UNSET
    _user_set_fields: frozenset[str] = dataclasses.field(default=frozenset(), init=False)

    def __post_init__(self) -> None:
        given = set()
        for name, default in _DEFAULTS.items():
            value = getattr(self, name)
            if value is _UNSET:
                object.__setattr__(self, name, default)
            else:
                given.add(name)
        for name in ("filter_warn_threshold_ratio", "filter_raise_threshold_ratio"):
            FilterThresholds(
                **{"warn_ratio" if "warn" in name else "raise_ratio": getattr(self, name)}
            )
        if not isinstance(self.execution_tracking_mode, ExecutionTrackingMode):
            raise TypeError(
                "DatasetOptions: execution_tracking_mode must be an ExecutionTrackingMode, got "
                f"{self.execution_tracking_mode!r}."
            )
        if isinstance(self.min_shm_size, bool) or not isinstance(self.min_shm_size, int):
            raise TypeError(
                f"DatasetOptions: min_shm_size must be an int, got {self.min_shm_size!r}."
            )
        object.__setattr__(self, "_user_set_fields", frozenset(given))

    def merge(self, other: DatasetOptions | None) -> DatasetOptions:
        """These options over `other`: fields set here win, then fields set there."""
        if other is None:
            return self
        fields = {name: getattr(other, name) for name in other._user_set_fields}
        fields.update({name: getattr(self, name) for name in self._user_set_fields})
        return DatasetOptions(**fields)


def _lineage(ds: Any) -> Iterator[Any]:
    """`ds` and the datasets it was built from, nearest first."""
    todo, seen = [ds], set()
    while todo:
        item = todo.pop(0)
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        todo.extend(getattr(item, "parents", ()) or ())


def options_of(ds: Any) -> DatasetOptions | None:
    """The options set on `ds` or the datasets it was built from, merged."""
    merged: DatasetOptions | None = None
    for item in reversed(list(_lineage(ds))):
        found = getattr(item, "_grain_options", None)
        if found is not None:
            merged = found.merge(merged)
    return merged


def _apply(thresholds: FilterThresholds, options: DatasetOptions | None) -> None:
    if options is not None:
        thresholds.set(options.filter_warn_threshold_ratio, options.filter_raise_threshold_ratio)


def filter_thresholds(ds: Any) -> FilterThresholds:
    """Thresholds for a new filter continuing `ds` (kept on the filter's dataset)."""
    thresholds = FilterThresholds()
    _apply(thresholds, options_of(ds))
    return thresholds


def WithOptionsIterDataset(parent: Any, options: DatasetOptions) -> Any:
    """`parent` with `options` for its stages, before and after this point (Grain's).

    Example:
        >>> import chute.grain as grain
        >>> ds = grain.MapDataset.range(10).filter(lambda x: x > 7).to_iter_dataset()
        >>> strict = WithOptionsIterDataset(ds, DatasetOptions(filter_raise_threshold_ratio=0.1))
        >>> list(strict)  # Windows of 1000 elements: 10 are not enough to judge.
        [8, 9]
    """
    if not isinstance(options, DatasetOptions):
        raise TypeError(
            f"WithOptionsIterDataset: options must be a DatasetOptions, got {options!r}."
        )
    result = made(copy.copy(parent), parent)
    result._grain_options = options
    merged = options_of(result)
    for item in _lineage(result):
        thresholds = getattr(item, "_grain_thresholds", None)
        if thresholds is not None:
            _apply(thresholds, merged)
    return result
