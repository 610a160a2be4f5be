"""`assert_reshards`: the check that a pipeline continues exactly on other process counts.

Processes are simulated by iterators of the pipeline each would build, stopped at
random, uneven points (as preempted hosts are), saved, resharded and restored on the
next count; the last processes run to the end. Across all of them every record of the
epoch must come exactly once.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ._format import apply_document, make_document
from ._reshard import reshard_for

__all__ = ["ReshardRun", "assert_reshards", "rows"]

_SHOWN = 10  # Records listed in a failure message, at most.


@dataclasses.dataclass(frozen=True)
class ReshardRun:
    """What one `assert_reshards` run did.

    Attributes:
        counts: the process counts, in order.
        stops: per count but the last, the elements each process took before its stop.
        records: the records delivered, in all.
        largest_state: the size in bytes of the largest iterator state saved (its JSON,
            without the pipeline's description).

    Example:
        >>> import chute
        >>> def pipeline(i, n):
        ...     return chute.MapDataset.range(10).shard(i, n).to_iter_dataset()
        >>> run = assert_reshards(pipeline, 2, 3, seed=4)
        >>> run.counts, run.records, len(run.stops[0])
        ((2, 3), 10, 2)
    """

    counts: tuple[int, ...]
    stops: tuple[tuple[int, ...], ...]
    records: int
    largest_state: int


def rows(element: Any) -> list[Any]:
    """The records of a batch: its rows (a dict or tuple of columns: one per row).

    Pass it as `records=` when the pipeline batches, since a batch's rows change with
    the process count while the records do not.

    Example:
        >>> import numpy as np
        >>> rows(np.array([[1, 2], [3, 4]]))
        [[1, 2], [3, 4]]
        >>> rows({"x": np.array([1, 2]), "y": np.array([3, 4])})
        [{'x': 1, 'y': 3}, {'x': 2, 'y': 4}]
        >>> rows((np.array([1, 2]), np.array([3, 4])))  # A batch of (x, y) pairs.
        [(1, 3), (2, 4)]
    """
    if isinstance(element, dict | tuple):
        named = element if isinstance(element, dict) else dict(enumerate(element))
        columns = {key: rows(value) for key, value in named.items()}
        lengths = {len(column) for column in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"rows: the columns of a batch differ in length: {sorted(lengths)}.")
        found = [tuple(row) for row in zip(*columns.values(), strict=True)]
        if isinstance(element, tuple):
            return found
        return [dict(zip(columns, row, strict=True)) for row in found]
    if isinstance(element, np.ndarray):
        return list(element.tolist())
    return list(element)


def _key(record: Any) -> Any:
    """A hashable stand-in for a record, equal for equal records."""
    if isinstance(record, np.ndarray):
        return ("ndarray", record.dtype.str, record.shape, record.tobytes())
    if isinstance(record, np.generic):
        return record.item()
    if isinstance(record, dict):
        return ("dict", tuple((key, _key(value)) for key, value in record.items()))
    if isinstance(record, list | tuple):
        return (type(record).__name__, tuple(_key(item) for item in record))
    return record


def _records(element: Any, records: Callable[[Any], Iterable[Any]] | None) -> list[Any]:
    return [_key(record) for record in (records(element) if records else [element])]


def _close(iterators: Sequence[Iterator[Any]]) -> None:
    for it in iterators:
        close = getattr(it, "close", None)
        if callable(close):
            close()


def assert_reshards(
    make_pipeline: Callable[[int, int], Iterable[Any]],
    from_processes: int,
    to_processes: int | Sequence[int],
    *,
    seed: int = 0,
    records: Callable[[Any], Iterable[Any]] | None = None,
    complete: bool = True,
) -> ReshardRun:
    """Checks that `make_pipeline`'s stream continues exactly on other process counts.

    `from_processes` iterators (`iter(make_pipeline(i, from_processes))`, as process
    `i` would build its pipeline) each stop after a random number of elements (drawn
    with `seed`, different per process), save their states, and `reshard_for` gives the
    states of the next count in `to_processes` (one count, or several in turn), whose
    processes stop at random points again; the last ones run to the end. The states go
    through JSON, as in a checkpoint. Across the run, every record of an uninterrupted
    run of `from_processes` processes must come exactly once.

    Args:
        make_pipeline: `(process_index, process_count) -> ` the pipeline that process
            builds (an `IterDataset`, or anything whose iterators have `get_state`).
        from_processes: the count that starts.
        to_processes: the count, or counts in turn, that continue.
        seed: draws the stop points.
        records: the records of an element; default: the element is one record. Pass
            `rows` when the pipeline batches (batches differ after a reshard, records
            do not).
        complete: check that every record comes (default). False checks only that no
            record comes twice, for pipelines whose end depends on where the processes
            stand: a mixture stops when the component whose turn it is runs out.

    Returns:
        A `ReshardRun`: the counts, stop points, records and largest state.

    Raises:
        AssertionError: a record was lost or repeated (named, with the stop points).
        ReshardError: the pipeline cannot be resharded (the message says why).

    Example:
        >>> import chute
        >>> def pipeline(i, n):
        ...     ds = chute.MapDataset.range(40).seed(1).shuffle().shard(i, n)
        ...     return ds.to_iter_dataset().filter(lambda x: x % 3).batch(2)
        >>> run = assert_reshards(pipeline, 4, [3, 6], records=rows)
        >>> run.counts, run.records
        ((4, 3, 6), 26)
    """
    counts = (from_processes, *([to_processes] if isinstance(to_processes, int) else to_processes))
    for count in counts:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"assert_reshards: process counts are ints >= 1, got {count!r}.")
    expected: collections.Counter[Any] = collections.Counter()
    lengths = []
    for index in range(from_processes):
        elements = list(iter(make_pipeline(index, from_processes)))
        lengths.append(len(elements))
        for element in elements:
            expected.update(_records(element, records))
    rng = random.Random(seed)
    delivered: collections.Counter[Any] = collections.Counter()
    stops: list[tuple[int, ...]] = []
    largest = 0
    documents: list[dict[str, Any]] | None = None
    total = sum(lengths)
    for number, count in enumerate(counts):
        iterators: list[Any] = [iter(make_pipeline(index, count)) for index in range(count)]
        try:
            if documents is not None:
                for index, it in enumerate(iterators):  # As `restore` does it.
                    document = reshard_for(documents, it, process_index=index, process_count=count)
                    apply_document(it, document)
            if number == len(counts) - 1:
                for it in iterators:
                    for element in it:
                        delivered.update(_records(element, records))
                break
            taken = []
            for it in iterators:
                stop = rng.randint(0, total // count + 2)
                took = 0
                for element in it:
                    delivered.update(_records(element, records))
                    took += 1
                    if took == stop:
                        break
                taken.append(took)
            stops.append(tuple(taken))
            texts = [json.dumps(make_document(it, i, count)) for i, it in enumerate(iterators)]
            documents = [json.loads(text) for text in texts]
            largest = max(largest, *(len(json.dumps(d["state"])) for d in documents))
        finally:
            _close(iterators)
    lost = (expected - delivered) if complete else collections.Counter()
    repeated = collections.Counter(  # Beyond what the uninterrupted run gives (once or more).
        {
            key: n - max(expected[key], 1)
            for key, n in delivered.items()
            if n > max(expected[key], 1)
        }
    )
    foreign = [key for key in delivered if key not in expected] if complete else []
    if lost or repeated or foreign:
        raise AssertionError(
            f"resharding {' -> '.join(map(str, counts))} processes (stopped after {stops} "
            f"elements each, seed {seed}) lost {sum(lost.values())} records "
            f"{list(lost)[:_SHOWN]}, repeated {sum(repeated.values())} "
            f"{list(repeated)[:_SHOWN]} and gave {len(foreign)} that an uninterrupted run "
            f"does not {foreign[:_SHOWN]}."
        )
    return ReshardRun(counts, tuple(stops), sum(delivered.values()), largest)
