"""What a user may pass where a stream is expected, as the factory that builds it.

`IterDataset.source` takes a zero-argument callable that makes an iterator; a mix, an
interleave, a zip or a concatenation takes datasets of either kind (a `MapDataset` is
read in order) or such callables. These helpers turn each into the factory chain that
builds its iterators (`_factories`), whose stages describe it: so the ops that combine
streams need no dataset class to read their inputs.

Example:
    >>> import chute
    >>> factory_of(chute.MapDataset.range(2)).stages[-1].op
    'to_iter_dataset'
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, overload

from chute_core import DROPPED, CheckpointableIterator, StageTraits, stage_traits

from ._args import check_int
from ._factories import Factory, InterleaveFactory, JoinFactory, SourceFactory
from ._pipeline import Stage, has_stage, stage

__all__ = ["factory_of", "interleave_factory", "join_factory", "listed", "source_factory"]


def source_factory(make_iterator: Callable[[], CheckpointableIterator[Any]]) -> Factory:
    """The factory of `IterDataset.source(make_iterator)`; a clear error for anything else."""
    if not callable(make_iterator) or hasattr(make_iterator, "__next__"):
        raise TypeError(
            "IterDataset.source needs a zero-argument callable that returns a new "
            f"checkpointable iterator (e.g. functools.partial(ParquetStream, path)), got "
            f"{type(make_iterator).__name__}: an iterator can be iterated only once."
        )
    return SourceFactory(make_iterator, stage("source", make=make_iterator))


def factory_of(dataset: Any) -> Factory:
    """The factory of `dataset`: a stream's own, a `MapDataset` read in order, a source."""
    factory = getattr(dataset, "_factory", None)
    if factory is not None:  # An IterDataset.
        return factory  # type: ignore[no-any-return]
    if hasattr(dataset, "to_iter_dataset"):  # A MapDataset: read in order.
        return dataset.to_iter_dataset()._factory  # type: ignore[no-any-return]
    if hasattr(dataset, "__next__"):
        raise TypeError(
            f"got an iterator ({type(dataset).__name__}), which can be read only once; pass "
            "a dataset, or a zero-argument callable that makes the iterator (e.g. "
            "functools.partial(ParquetStream, path)), so every iteration gets its own."
        )
    if callable(dataset):
        return source_factory(dataset)
    raise TypeError(
        "expected an IterDataset, a MapDataset or a zero-argument callable making an "
        f"iterator, got {type(dataset).__name__}."
    )


def listed(datasets: Any, owner: str) -> Sequence[Any]:
    """`datasets` if it is a list or tuple, else a clear error."""
    if not isinstance(datasets, list | tuple):
        raise TypeError(
            f"{owner} takes a list of datasets, got {type(datasets).__name__}; e.g. "
            f"{owner}([a, b])."
        )
    return datasets


def join_factory(
    datasets: Sequence[Any],
    op: Any,
    name: str,
    owner: str,
    params: tuple[tuple[str, str], ...] = (),
) -> Factory:
    """Reads every stream of `datasets` with `op` (a zip, a concatenation)."""
    if not datasets:
        raise ValueError(f"{owner} needs at least one dataset.")
    factories = [factory_of(d) for d in datasets]
    item = Stage(name, params, tuple(f.stages for f in factories))
    return JoinFactory(factories, op, item)


def interleave_factory(datasets: Any, cycle_length: int) -> tuple[InterleaveFactory, list[Any]]:
    """The factory of `IterDataset.interleave(datasets, cycle_length)`, and its parents.

    A `MapDataset` of streams that takes a shard of them (`files.shard(i, n).map(open)`)
    is described by its stages, the same on every process but for the shard index, so
    the pipeline reshards; it is read lazily, by position (a position a filter dropped
    has no stream), so many files cost nothing until opened. Other lists are read at
    once and described by their streams, one by one.

    Example:
        >>> import chute
        >>> files = chute.MapDataset.range(4).shard(0, 2).map(lambda f: chute.MapDataset.range(f))
        >>> [s.op for s in interleave_factory(files, 2)[0].stages]
        ['source', 'shard', 'map', 'interleave']
    """
    cycle_length = check_int(cycle_length, "cycle_length", "IterDataset.interleave", minimum=1)
    listing: tuple[Stage, ...] = ()
    if hasattr(datasets, "to_iter_dataset"):
        listing = tuple(getattr(datasets, "_stages", ()))
    if has_stage(listing, _shards):
        streams = _StreamsByPosition(datasets)
        first = streams[0] if len(streams) else None  # The streams are of one kind.
        if first is None or not has_stage(first.stages, _shards):
            item = Stage("interleave", (("cycle_length", repr(cycle_length)),), ())
            # Whether a window shuffle after it can name its elements, found when asked.
            positions = functools.partial(_streams_by_position, streams)
            factory = InterleaveFactory(streams, cycle_length, item, listing, positions)
            return factory, [datasets]
    parts = list(datasets)  # Read once: a MapDataset of streams makes them anew.
    factories = [factory_of(p) for p in parts]
    inputs = tuple(f.stages for f in factories)
    item = Stage("interleave", (("cycle_length", repr(cycle_length)),), inputs)
    return InterleaveFactory(factories, cycle_length, item), parts


class _StreamsByPosition(Sequence[Factory | None]):
    """The factories of a `MapDataset` of streams, made when asked for, by position.

    None at a position a filter dropped.
    """

    def __init__(self, datasets: Any) -> None:
        self._datasets, self._length = datasets, len(datasets)

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Factory | None: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Factory | None]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(self._length))]
        item = self._datasets[index]
        return None if item is DROPPED else factory_of(item)


def _by_position(stages: Sequence[Stage]) -> bool:
    """Whether a stream's elements have its reader's position as their origin.

    A `MapDataset` read in order (`to_iter_dataset`), or a source whose iterators say
    so (`origins_are_positions`, as `ParquetStream`'s), with only stages after it that
    keep positions one for one (maps, filters, prefetching).
    """
    begins = [n for n, item in enumerate(stages) if stage_traits(item.op).begins_stream]
    if not begins and stages and stages[0].op == "source":
        begins = [0] if _positional(dict(stages[0].raw).get("make")) else []
    if len(begins) != 1 or stage_traits(stages[begins[0]].op).opens:
        return False
    return all(_keeps_origin(stage_traits(item.op)) for item in stages[begins[0] + 1 :])


def _streams_by_position(streams: Sequence[Factory | None]) -> bool | None:
    """`_by_position` of the first stream (None: no stream at all).

    A filter of the list may have dropped the first positions, so they are read until
    one has a stream (each costs the list's stages, not the stream's).
    """
    for stream in streams:
        if stream is not None:
            return _by_position(stream.stages)
    return None


def _positional(make: object) -> bool:
    """Whether `make` (an `IterDataset.source`'s) makes iterators whose origins are positions.

    It is, or is a `functools.partial` of, a class that says so (`origins_are_positions`).

    Example:
        >>> import functools
        >>> from chute_sources import ParquetStream
        >>> _positional(functools.partial(ParquetStream, "data.parquet")), _positional(iter)
        (True, False)
    """
    while isinstance(make, functools.partial):
        make = make.func
    return isinstance(make, type) and getattr(make, "origins_are_positions", False) is True


def _keeps_origin(traits: StageTraits) -> bool:
    return (
        traits.keeps_positions
        and traits.groups is None
        and traits.chunk is None
        and not (traits.splits or traits.holds or traits.merges or traits.repeats or traits.chooses)
    )


def _shards(traits: StageTraits) -> bool:
    """Whether a stage takes a shard of its input (`StageTraits.shard`)."""
    return traits.shard is not None
