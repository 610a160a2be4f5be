"""`Counters`: totals that many threads add to exactly, and the differences that isolate."""

import threading

from chute_core.internal import CACHE_HITS, STORAGE_BYTES, STORAGE_REQUESTS, Counters


def test_threads_adding_at_once_lose_no_addition():
    counters = Counters()

    def add() -> None:
        for _ in range(5000):
            counters.add(STORAGE_REQUESTS, op="get")
            counters.add(STORAGE_BYTES, 3)

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counters.snapshot() == {
        (STORAGE_REQUESTS, (("op", "get"),)): 20000.0,
        (STORAGE_BYTES, ()): 60000.0,
    }


def test_labels_name_one_counter_whatever_their_order():
    counters = Counters()
    counters.add(CACHE_HITS, cache="map", stage="a")
    counters.add(CACHE_HITS, 2, stage="a", cache="map")
    counters.add(CACHE_HITS, cache="iter")
    assert counters.snapshot() == {
        (CACHE_HITS, (("cache", "map"), ("stage", "a"))): 3.0,
        (CACHE_HITS, (("cache", "iter"),)): 1.0,
    }


def test_since_holds_only_what_grew_and_merge_adds_another_table():
    counters = Counters()
    counters.add(STORAGE_BYTES, 10)
    counters.add(STORAGE_REQUESTS, op="head")
    before = counters.snapshot()
    counters.add(STORAGE_BYTES, 5)
    counters.add(STORAGE_REQUESTS, op="get")
    grown = counters.since(before)
    assert grown == {(STORAGE_BYTES, ()): 5.0, (STORAGE_REQUESTS, (("op", "get"),)): 1.0}
    other = Counters()
    other.merge(grown)
    other.merge(grown)
    assert other.snapshot() == {k: 2 * v for k, v in grown.items()}


def test_take_gives_each_addition_once():
    counters = Counters()
    counters.add(STORAGE_BYTES, 7)
    counters.mark()  # What was there before (a forked worker's inheritance) is not taken.
    counters.add(STORAGE_BYTES, 4)
    assert counters.take() == {(STORAGE_BYTES, ()): 4.0}
    assert counters.take() == {}
    counters.add(STORAGE_BYTES, 1)
    assert counters.take() == {(STORAGE_BYTES, ()): 1.0}
