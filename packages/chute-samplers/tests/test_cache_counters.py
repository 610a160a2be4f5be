"""`CacheMap` and `CacheIter` count their hits and misses in `COUNTERS`."""

import numpy as np

from chute_core.internal import CACHE_HITS, CACHE_MISSES, COUNTERS
from chute_samplers import CacheIter, CacheMap, RepeatIter, SequentialIter


def _counts(before, cache):
    grown = COUNTERS.since(before)
    labels = (("cache", cache),)
    return grown.get((CACHE_HITS, labels), 0), grown.get((CACHE_MISSES, labels), 0)


def test_cache_iter_over_two_epochs_misses_the_first_and_hits_the_second():
    before = COUNTERS.snapshot()
    assert list(RepeatIter(CacheIter(SequentialIter(list(range(10)))), 2)) == [*range(10)] * 2
    assert _counts(before, "iter") == (10, 10)


def test_cache_iter_counts_in_bulk_during_a_pass_and_all_at_its_end():
    it = CacheIter(SequentialIter(list(range(3000))))
    before = COUNTERS.snapshot()
    for _ in range(1500):
        next(it)
    assert _counts(before, "iter") == (0, 1024)  # Counted every 1,024 elements.
    assert sum(1 for _ in it) == 1500
    assert _counts(before, "iter") == (0, 3000)
    it.set_state({**it.get_state(), "position": 0})
    for _ in range(10):
        next(it)
    it.set_state({**it.get_state(), "position": 0})  # A restore counts what was served.
    assert _counts(before, "iter") == (10, 3000)


def test_cache_iter_restored_elsewhere_counts_the_elements_it_reads_again():
    source = list(range(10))
    it = CacheIter(SequentialIter(source))
    for _ in range(4):
        next(it)
    mid_pass = it.get_state()
    list(it)
    filled = it.get_state()
    before = COUNTERS.snapshot()
    again = CacheIter(SequentialIter(source))
    again.set_state(mid_pass)  # Reads the 4 elements before the position.
    assert _counts(before, "iter") == (0, 4)
    assert list(again) == source[4:]
    assert _counts(before, "iter") == (0, 10)
    before = COUNTERS.snapshot()
    replay = CacheIter(SequentialIter(source))
    replay.set_state(filled)  # Reads the whole stream, then serves it from memory.
    replay.set_state({**filled, "position": 7})
    assert list(replay) == source[7:]
    assert _counts(before, "iter") == (3, 10)


class Recorded(list):
    """A list that records the positions read from it."""

    reads: list[int]

    def __getitem__(self, position):
        self.reads.append(position)
        return super().__getitem__(position)


def test_cache_map_counts_each_position_asked_for():
    source = Recorded([0, 10, 20, 30])
    source.reads = []
    node = CacheMap(source)
    before = COUNTERS.snapshot()
    assert list(node) == [0, 10, 20, 30]
    assert _counts(before, "map") == (0, 4)
    assert node.get_many(np.array([1, 1, 3]), np.zeros(3, np.uint64)) == [10, 10, 30]
    assert node[2] == 20
    assert _counts(before, "map") == (4, 4)
    source.reads = []
    fresh = CacheMap(source)
    before = COUNTERS.snapshot()
    assert fresh.get_many(np.array([2, 2, 0]), np.zeros(3, np.uint64)) == [20, 20, 0]
    assert _counts(before, "map") == (1, 2)  # Position 2 is read once, then served.
    assert source.reads == [0, 2]
