"""Large arrays reach the user as views into worker slabs, leased while they are held.

A batch handed to the user must stay valid and unchanged for as long as it is held,
however many the user keeps and whatever the workers write meanwhile; once the batches
are gone, the slabs go back to the workers, and nothing is left in `/dev/shm`.
"""

from __future__ import annotations

import gc
import mmap

import numpy as np
import pytest

import chute
from chute_execution import MultiprocessingOptions
from chute_execution.internal import LEASE_MIN_BYTES
from chute_testing.execution import FullArray, LengthByBatch, no_leaked_slabs

ROW = LEASE_MIN_BYTES // 8  # int64 values per element: one element is leased on its own.


no_leaked_slabs = pytest.fixture(autouse=True)(no_leaked_slabs)


def _dataset(n: int, workers: int, batch: int = 2) -> chute.IterDataset:
    options = MultiprocessingOptions(num_workers=workers, per_worker_buffer_size=1)
    return (
        chute.MapDataset.range(n)
        .to_iter_dataset()
        .map(FullArray(ROW))
        .mp_prefetch(options, chunk_size=batch)
        .batch(batch)
    )


def _in_shared_memory(array: np.ndarray) -> bool:
    """Whether `array` is a view into a mapped slab (its base's base is the mapping)."""
    base = array.base
    return isinstance(base, np.ndarray) and isinstance(base.base, (mmap.mmap, memoryview))


def _assert_batch(batch: np.ndarray, index: int, size: int = 2) -> None:
    assert batch.shape == (size, ROW)
    for row in range(size):
        value = index * size + row
        assert batch[row, 0] == value and batch[row, -1] == value
        assert (batch[row] == value).all()


def test_held_batches_stay_valid_and_unchanged_while_workers_go_on():
    batches = list(_dataset(200, workers=2))  # 100 batches, all held at once.
    assert len(batches) == 100
    for index, batch in enumerate(batches):
        _assert_batch(batch, index)


def test_held_elements_without_batching_stay_valid_too():
    options = MultiprocessingOptions(num_workers=2, per_worker_buffer_size=1)
    ds = chute.MapDataset.range(100).to_iter_dataset().map(FullArray(ROW)).mp_prefetch(options)
    elements = list(ds)
    assert _in_shared_memory(elements[0])
    for index, element in enumerate(elements):
        assert element.shape == (ROW,) and (element == index).all()


@pytest.mark.parametrize("slabs", [0, 3])
def test_past_the_lease_budget_batches_are_copied_and_all_stay_valid(monkeypatch, slabs):
    budget = slabs * 4 * 2**20  # Slabs of the default 4 MiB hold these 2 MiB chunks.
    monkeypatch.setattr("chute_execution._mp_prefetch.default_budget", lambda: budget)
    batches = list(_dataset(200, workers=2))
    assert sum(not _in_shared_memory(batch) for batch in batches) >= 100 - slabs
    for index, batch in enumerate(batches):
        _assert_batch(batch, index)


def test_held_batches_are_views_into_shared_memory_not_copies():
    it = iter(_dataset(8, workers=1))
    first = next(it)
    assert _in_shared_memory(first)
    assert first.flags.writeable
    rest = list(it)
    for index, batch in enumerate([first, *rest]):
        _assert_batch(batch, index)


def test_writing_into_a_held_batch_changes_only_that_batch():
    batches = []
    for batch in _dataset(40, workers=2):
        batch += 1000  # The user's own memory: writable, and nobody else's.
        batches.append(batch)
        gc.collect()
    for index, batch in enumerate(batches):
        _assert_batch(batch - 1000, index)


def test_batches_dropped_at_once_free_their_slabs_for_reuse():
    total = 0
    for batch in _dataset(60, workers=1):
        total += int(batch[:, 0].sum())
        del batch
    assert total == sum(range(60))


def test_elements_of_different_shapes_in_one_chunk_are_batched_as_in_the_consumer():
    ds = chute.MapDataset.range(12).to_iter_dataset().map(LengthByBatch(3))
    options = MultiprocessingOptions(num_workers=2)
    got = list(ds.mp_prefetch(options, chunk_size=6).batch(3))
    assert [b.shape for b in got] == [(3, 1), (3, 2), (3, 3), (3, 4)]
    assert [b[:, 0].tolist() for b in got] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
