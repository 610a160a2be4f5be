"""`apply`: Grain-style transform objects applied in order, each as the matching op."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chute_core import ArgumentTypeError
from chute_transforms import (
    BatchTransform,
    FilterTransform,
    FlatMapTransform,
    MapTransform,
    MapWithIndexTransform,
    RandomMapTransform,
)

__all__ = ["apply_transforms"]

_KINDS = (
    "MapTransform, RandomMapTransform, FilterTransform, FlatMapTransform, "
    "MapWithIndexTransform or BatchTransform"
)


def apply_transforms(dataset: Any, transformations: Any, owner: str) -> Any:
    """`dataset` with each transform applied in order by its op (`map`, `filter`, ...).

    Raises:
        ArgumentTypeError: an object is not one of chute's transform classes.

    Example:
        >>> import chute
        >>> class Double(chute.MapTransform):
        ...     def map(self, x): return 2 * x
        >>> ds = apply_transforms(chute.MapDataset.range(3), [Double()], "MapDataset.apply")
        >>> list(ds)
        [0, 2, 4]
    """
    listed = isinstance(transformations, list | tuple)
    items: Sequence[Any] = transformations if listed else (transformations,)
    for number, transform in enumerate(items):
        dataset = _apply_one(dataset, transform, owner, number)
    return dataset


def _apply_one(dataset: Any, transform: Any, owner: str, number: int) -> Any:
    if isinstance(transform, MapTransform):
        return dataset.map(transform)
    if isinstance(transform, RandomMapTransform):
        return dataset.random_map(transform)
    if isinstance(transform, FilterTransform):
        return dataset.filter(transform)
    if isinstance(transform, FlatMapTransform):
        if hasattr(dataset, "to_iter_dataset"):  # A MapDataset: the fan-out bounds positions.
            return dataset.flat_map(transform, max_fan_out=transform.max_fan_out)
        return dataset.flat_map(transform)
    if isinstance(transform, MapWithIndexTransform):
        return dataset.map_with_index(transform)
    if isinstance(transform, BatchTransform):
        return dataset.batch(
            transform.batch_size,
            drop_remainder=transform.drop_remainder,
            pad=transform.pad,
            batch_fn=transform.batch_fn,
        )
    raise ArgumentTypeError(
        f"{owner}: transformations[{number}] must be a {_KINDS} (from chute), got "
        f"{type(transform).__name__}; for a plain function use map, filter, ... directly."
    )
