"""Turning what a user passes as a part of a mix or an interleave into an `IterDataset`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._iter_dataset import IterDataset

__all__ = ["as_iter_dataset"]


def as_iter_dataset(dataset: Any) -> IterDataset[Any]:
    """`dataset` as an `IterDataset`: a `MapDataset` is read in order, a callable is a source.

    Example:
        >>> import chute
        >>> as_iter_dataset(chute.MapDataset.range(2))
        IterDataset
          source(RangeSource(start=0, stop=2, step=1))
          .to_iter_dataset()
    """
    from ._iter_dataset import IterDataset
    from ._map_dataset import MapDataset

    if isinstance(dataset, IterDataset):
        return dataset
    if isinstance(dataset, MapDataset):
        return dataset.to_iter_dataset()
    if hasattr(dataset, "__next__"):
        raise TypeError(
            f"got an iterator ({type(dataset).__name__}), which can be read only once; pass "
            "a dataset, or a zero-argument callable that makes the iterator (e.g. "
            "functools.partial(ParquetStream, path)), so every iteration gets its own."
        )
    if callable(dataset):
        return IterDataset.source(dataset)
    raise TypeError(
        "expected an IterDataset, a MapDataset or a zero-argument callable making an "
        f"iterator, got {type(dataset).__name__}."
    )
