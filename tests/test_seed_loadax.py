"""Loadax's conveniences (seed 004) that fit chute: a dataset is a stateless definition.

"It itself is stateless enabling you to define multiple dataloaders for the same
dataset, and even multiple iterators for the same dataloader."
"""

import json
import time

import numpy as np

import chute


def as_lists(batches):
    return [batch.tolist() for batch in batches]


def test_in_memory_dataset_batched():
    dataset = chute.MapDataset.source([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    loader = dataset.batch(2)
    assert as_lists(loader) == [[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]]


def test_two_iterators_over_one_dataset_are_independent():
    dataset = chute.MapDataset.source([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    loader = dataset.batch(2)
    expected = [[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]]

    fast_iterator = iter(loader)
    slow_iterator = iter(loader)

    fast, slow = [], []
    fast.append(next(fast_iterator).tolist())
    slow.append(next(slow_iterator).tolist())
    assert fast == slow == [[1, 2]]
    # Interleave unevenly: the fast one runs ahead, the slow one is not disturbed.
    fast += [next(fast_iterator).tolist() for _ in range(3)]
    slow.append(next(slow_iterator).tolist())
    fast += as_lists(fast_iterator)
    slow += as_lists(slow_iterator)
    assert fast == expected
    assert slow == expected
    # And a third pass after both finished starts again from the beginning.
    assert as_lists(loader) == expected


def test_two_iterators_over_one_iter_dataset_are_independent():
    dataset = (
        chute.MapDataset.range(0, 10)
        .to_iter_dataset()
        .map(lambda x: x * 2)
        .filter(lambda x: x != 6)
        .batch(2)
    )
    expected = [[0, 2], [4, 8], [10, 12], [14, 16], [18]]
    a, b = iter(dataset), iter(dataset)
    got_a, got_b = [], []
    for step in range(len(expected)):
        got_a.append(next(a).tolist())
        if step % 2:
            got_b.append(next(b).tolist())
    got_b += as_lists(b)
    assert got_a == expected
    assert got_b == expected
    # Each iterator has its own state: restoring one leaves the other alone.
    c = iter(dataset)
    next(c)
    state = json.loads(json.dumps(c.get_state()))
    d = iter(dataset)
    d.set_state(state)
    assert as_lists(d) == expected[1:]
    assert as_lists(c) == expected[1:]


def test_shuffled_dataset_iterated_twice_gives_the_same_order():
    dataset = chute.MapDataset.range(20).seed(3).shuffle()
    first, second = iter(dataset), iter(dataset)
    interleaved = [(next(first), next(second)) for _ in range(20)]
    assert [a for a, _ in interleaved] == [b for _, b in interleaved] == list(dataset)
    assert sorted(dataset) == list(range(20))


def test_mapped_range_dataset():
    def slow_fn(x):
        time.sleep(0.001)
        return x * 2

    dataset = chute.MapDataset.range(0, 10).map(slow_fn)
    loader = dataset.batch(2)
    assert as_lists(loader) == [[0, 2], [4, 6], [8, 10], [12, 14], [16, 18]]
    assert all(batch.dtype == np.int64 for batch in loader)
