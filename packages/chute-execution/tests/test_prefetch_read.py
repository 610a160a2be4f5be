"""PrefetchReadIter and ReadOptions: the SequentialIter stream, read on threads."""

import gc
import sys
import threading
import time
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_core import DROPPED, InvalidStateError
from chute_execution import PrefetchReadIter, ReadOptions, _prefetch_read
from chute_samplers import RepeatMap, SequentialIter, ShuffleMap
from chute_sources import RangeSource
from chute_testing import assert_resumes
from chute_transforms import FilterMap, MapMap, RandomMapIter

THREAD_COUNTS = [0, 1, 2, 4, 16]


def triple(x):
    return 3 * x


def keep(x):
    return x % 5 != 1


def pipeline(n=40, epochs=2, seed=0):
    """map -> filter (DROPPED positions) -> repeat -> shuffle (a new order per epoch)."""
    return ShuffleMap(RepeatMap(FilterMap(MapMap(RangeSource(n), triple), keep), epochs), seed)


def draw(x, rng):
    return (x, int(rng.integers(1 << 30)))


def reader(dataset, threads, buffer=500, chunk=None):
    return PrefetchReadIter(dataset, ReadOptions(threads, buffer), chunk_size=chunk)


class Recording:
    """A source recording the highest position and the threads that read it."""

    def __init__(self, n, delay=0.0):
        self.n, self.delay = n, delay
        self.highest = -1
        self.threads = set()
        self.lock = threading.Lock()

    def __len__(self):
        return self.n

    def __getitem__(self, key):
        return self.__getitems__([key])[0]

    def __getitems__(self, keys):
        with self.lock:
            self.highest = max(self.highest, *keys)
            self.threads.add(threading.current_thread().name)
        if self.delay:
            time.sleep(self.delay)
        return list(keys)


class Blocking:
    """A source whose reads at or after `block_from` wait until `release` is set."""

    def __init__(self, n, block_from):
        self.n, self.block_from = n, block_from
        self.release = threading.Event()
        self.entered = threading.Event()

    def __len__(self):
        return self.n

    def __getitem__(self, key):
        if key >= self.block_from:
            self.entered.set()
            assert self.release.wait(30), "test never released the read"
        return key


# --- ReadOptions ---------------------------------------------------------------------------


def test_read_options_defaults_are_grains_and_values_are_checked():
    assert ReadOptions() == ReadOptions(num_threads=16, prefetch_buffer_size=500)
    assert type(ReadOptions(np.int64(2)).num_threads) is int
    with pytest.raises(ValueError, match="num_threads must be >= 0, got -1"):
        ReadOptions(num_threads=-1)
    with pytest.raises(ValueError, match="prefetch_buffer_size must be >= 0"):
        ReadOptions(prefetch_buffer_size=-5)
    with pytest.raises(TypeError, match=r"num_threads must be an int, got float 2\.0"):
        ReadOptions(num_threads=2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be an int, got bool"):
        ReadOptions(prefetch_buffer_size=True)
    with pytest.raises(AttributeError):
        ReadOptions().num_threads = 3  # type: ignore[misc]


def test_bad_arguments_get_clear_errors():
    with pytest.raises(TypeError, match="dataset must be a random-access dataset"):
        PrefetchReadIter(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="read_options must be a ReadOptions, got dict"):
        PrefetchReadIter([1], {"num_threads": 2})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        PrefetchReadIter([1], chunk_size=0)
    it = PrefetchReadIter([1, 2, 3])
    with pytest.raises(InvalidStateError, match="out of range"):
        it.set_state({"position": 4})
    with pytest.raises(InvalidStateError, match="has no 'position'"):
        it.set_state({"index": 1})
    with pytest.raises(InvalidStateError, match="must be an int"):
        it.set_state({"position": "1"})


# --- the stream ----------------------------------------------------------------------------


@pytest.mark.parametrize("threads", THREAD_COUNTS)
@pytest.mark.parametrize(("buffer", "chunk"), [(500, None), (1, None), (7, 3), (64, 1), (10, 50)])
def test_stream_equals_sequential_iter_for_any_threads_buffer_and_chunk(threads, buffer, chunk):
    dataset = pipeline(60, epochs=3)
    expected = list(SequentialIter(dataset))
    assert 100 < len(expected) < 180  # The filter dropped some positions.
    with reader(dataset, threads, buffer, chunk) as it:
        assert list(it) == expected


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 120),
    threads=st.sampled_from(THREAD_COUNTS),
    buffer=st.integers(0, 40),
    chunk=st.one_of(st.none(), st.integers(1, 30)),
    seed=st.integers(0, 2**32),
)
def test_any_configuration_gives_the_single_threaded_stream(n, threads, buffer, chunk, seed):
    dataset = pipeline(n, epochs=2, seed=seed)
    assert list(reader(dataset, threads, buffer, chunk)) == list(SequentialIter(dataset))


def test_dropped_positions_are_skipped_and_counted_in_the_state():
    data = [DROPPED, 1, DROPPED, DROPPED, 4, DROPPED]
    it = reader(data, 2, buffer=2, chunk=1)
    assert next(it) == 1
    assert it.get_state() == {"position": 2}
    assert next(it) == 4
    assert it.get_state() == {"position": 5}
    with pytest.raises(StopIteration):
        next(it)
    assert it.get_state() == {"position": 6}


def test_empty_dataset_starts_no_thread(new_threads):
    it = reader([], 4)
    assert list(it) == []
    assert new_threads() == []


@pytest.mark.parametrize("threads", [0, 2, 16])
def test_origin_is_the_position_of_each_element_and_random_maps_draw_the_same(threads):
    data = [DROPPED if x % 3 == 1 else x for x in range(40)]
    it = reader(data, threads, buffer=8, chunk=3)
    assert it.origin is None
    assert [(element, it.origin) for element in it] == [(x, (x,)) for x in data if x is not DROPPED]
    it.set_state({"position": 5})
    assert it.origin is None

    dataset = pipeline(30)
    expected = list(RandomMapIter(SequentialIter(dataset), draw, seed=3))
    assert list(RandomMapIter(reader(dataset, threads, buffer=8), draw, seed=3)) == expected


# --- resume --------------------------------------------------------------------------------


def test_resumes_at_every_position_with_any_thread_count_and_into_sequential_iter():
    dataset = pipeline(25, epochs=2)
    expected = list(SequentialIter(dataset))
    assert_resumes(
        lambda: reader(dataset, 4, buffer=6, chunk=2),
        every=1,
        expected=expected,
        make_restored=[
            lambda: reader(dataset, 0),
            lambda: reader(dataset, 1, buffer=3),
            lambda: reader(dataset, 16),
            lambda: SequentialIter(dataset, chunk_size=5),
        ],
    )


def test_sequential_iter_states_restore_into_prefetch_read_iter():
    dataset = pipeline(25, epochs=2)
    assert_resumes(
        lambda: SequentialIter(dataset, chunk_size=3),
        every=1,
        make_restored=[lambda: reader(dataset, 2, buffer=4), lambda: reader(dataset, 0)],
    )


def test_set_state_discards_read_ahead_and_restarts_at_the_position():
    dataset = pipeline(50)
    expected = list(SequentialIter(dataset))
    it = reader(dataset, 4, buffer=20, chunk=3)
    assert [next(it) for _ in range(10)] == expected[:10]
    target = SequentialIter(dataset)
    for _ in range(30):
        next(target)
    it.set_state(target.get_state())
    assert list(it) == expected[30:]
    it.set_state({"position": 0})
    assert list(it) == expected


def test_close_keeps_the_position_and_next_starts_threads_again(new_threads):
    expected = list(range(100))
    it = reader(range(100), 3, buffer=9, chunk=2)
    assert [next(it) for _ in range(11)] == expected[:11]
    it.close()
    assert new_threads() == []
    assert it.get_state() == {"position": 11}
    assert list(it) == expected[11:]


# --- endless datasets and bounded read-ahead -------------------------------------------------


def test_endless_dataset_is_read_lazily_and_resumes():
    dataset = RepeatMap(ShuffleMap(RangeSource(7), seed=3), num_epochs=None)
    assert len(dataset) == sys.maxsize
    expected = [dataset[i] for i in range(40)]
    assert_resumes(
        lambda: reader(dataset, 2, buffer=8, chunk=3),
        max_elements=40,
        every=5,
        expected=expected,
        make_restored=[lambda: reader(dataset, 0), lambda: SequentialIter(dataset)],
    )
    it = reader(dataset, 4, buffer=16)
    it.set_state({"position": sys.maxsize - 2})
    assert len(list(it)) == 2


@pytest.mark.parametrize(("threads", "buffer", "chunk"), [(1, 10, 2), (4, 16, 3), (16, 50, None)])
def test_read_ahead_stays_within_the_buffer_plus_one_chunk(threads, buffer, chunk):
    source = Recording(sys.maxsize)
    it = reader(source, threads, buffer, chunk)
    bound = buffer + it.chunk_size
    for count in range(300):
        assert next(it) == count
        if count % 50 == 0:
            time.sleep(0.02)  # Give the threads time to run as far ahead as allowed.
        assert source.highest < it.get_state()["position"] + bound
    it.close()


def test_reads_run_on_pool_threads_or_in_the_caller_when_unthreaded():
    for threads, buffer in ((0, 500), (8, 0)):
        source = Recording(100)
        assert list(reader(source, threads, buffer)) == list(range(100))
        assert source.threads == {threading.current_thread().name}
    source = Recording(100)
    assert list(reader(source, 3, 12)) == list(range(100))
    assert source.threads and all(name.startswith("chute-read") for name in source.threads)
    assert len(source.threads) <= 3


# --- errors --------------------------------------------------------------------------------


def fail_at_37(x):
    if x == 37:
        raise ValueError(f"bad record {x}")
    return x


@pytest.mark.parametrize("threads", THREAD_COUNTS)
@pytest.mark.parametrize("chunk", [None, 1, 5, 64])
def test_error_is_raised_at_its_element_with_its_type_and_a_note(threads, chunk, new_threads):
    dataset = FilterMap(MapMap(RangeSource(60), fail_at_37), lambda x: x % 4 != 1)
    expected = [x for x in range(37) if x % 4 != 1]
    it = reader(dataset, threads, buffer=20, chunk=chunk)
    assert [next(it) for _ in expected] == expected
    with pytest.raises(ValueError, match="bad record 37") as info:
        next(it)
    note = "chute: raised by map(fail_at_37) on the element at position 37"
    assert note in info.value.__notes__
    assert it.get_state() == {"position": 37}
    assert new_threads() == []  # The pool stops at the error.
    with pytest.raises(ValueError, match="bad record 37"):
        next(it)  # Reading the same position again fails again.
    it.set_state({"position": 38})
    assert list(it) == [x for x in range(38, 60) if x % 4 != 1]


def test_error_from_a_plain_source_gets_a_note_naming_the_position():
    class Missing:
        def __len__(self):
            return 10

        def __getitem__(self, key):
            if key == 6:
                raise KeyError(key)
            return key

    it = reader(Missing(), 2, buffer=4, chunk=4)
    assert [next(it) for _ in range(6)] == list(range(6))
    with pytest.raises(KeyError) as info:
        next(it)
    assert info.value.__notes__ == ["chute: raised by reading Missing on the element at position 6"]


def test_a_failed_batch_that_reads_fine_one_by_one_raises_at_the_chunk_start():
    class Flaky(Recording):
        def __getitems__(self, keys):
            if 8 in keys:
                raise OSError("transient")
            return super().__getitems__(keys)

    it = reader(Flaky(20), 2, buffer=8, chunk=4)
    assert [next(it) for _ in range(8)] == list(range(8))
    with pytest.raises(OSError, match="transient") as info:
        next(it)
    assert "on the element at position 8" in info.value.__notes__[0]
    assert it.get_state() == {"position": 8}


# --- threads never leak --------------------------------------------------------------------


@pytest.mark.parametrize("threads", [1, 4, 16])
def test_threads_stop_at_exhaustion_close_and_exception(threads, new_threads):
    it = reader(range(1000), threads, buffer=40)
    assert list(it) == list(range(1000))
    assert new_threads() == []

    it = reader(range(1000), threads, buffer=40)
    next(it)
    assert new_threads()
    it.close()
    assert new_threads() == []
    it.close()  # Idempotent.

    it = reader(MapMap(range(100), fail_at_37), threads, buffer=40)
    with pytest.raises(ValueError, match="bad record 37"):
        list(it)
    assert new_threads() == []


def test_a_collected_iterator_stops_its_threads(new_threads, eventually):
    it = reader(range(10_000), 8, buffer=100)
    next(it)
    ref = weakref.ref(it)
    del it
    assert ref() is None  # No reference cycle keeps it alive: refcounting frees it.
    gc.collect()
    assert eventually(lambda: new_threads() == [])


def test_close_waits_for_reads_in_flight_without_hanging(new_threads):
    it = reader(MapMap(range(400), lambda x: time.sleep(0.002) or x), 8, buffer=64)
    assert next(it) == 0
    with it:
        pass  # __exit__ closes while reads are in flight.
    assert new_threads() == []


def test_close_gives_up_on_a_stuck_read_and_the_thread_exits_when_it_returns(
    monkeypatch, new_threads, eventually
):
    monkeypatch.setattr(_prefetch_read, "JOIN_TIMEOUT", 0.05)
    source = Blocking(100, block_from=10)
    it = reader(source, 2, buffer=20, chunk=5)
    assert [next(it) for _ in range(5)] == list(range(5))
    assert source.entered.wait(10)
    it.close()  # Returns although a read is stuck.
    assert it.get_state() == {"position": 5}
    source.release.set()
    assert eventually(lambda: new_threads() == [])
    assert list(it) == list(range(5, 100))


class _Recording:
    """`n` elements of `nbytes` bytes each; records the furthest position read."""

    def __init__(self, n, nbytes):
        self.n, self.nbytes, self.furthest = n, nbytes, -1
        self._lock = threading.Lock()

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return self.__getitems__([index])[0]

    def __getitems__(self, indices):
        with self._lock:
            self.furthest = max(self.furthest, *indices)
        return [np.full(self.nbytes, i % 256, np.uint8) for i in indices]


def test_read_ahead_is_bounded_in_bytes_and_warns_what_it_counts():
    mib = 2**20
    source = _Recording(200, mib)
    options = ReadOptions(num_threads=2, prefetch_buffer_size=100, prefetch_buffer_bytes=8 * mib)
    it = PrefetchReadIter(source, options)
    with pytest.warns(_prefetch_read.ReadAheadWarning) as caught:
        first = next(it)
    assert first[0] == 0
    assert [str(w.message) for w in caught] == [
        "ReadOptions: prefetch_buffer_size=100 counts elements of the dataset read (batches "
        "after MapDataset.batch), measured at ~1.0 MiB each, so the read-ahead would hold "
        "~100.0 MiB, more than prefetch_buffer_bytes=8.0 MiB: reading 8 elements ahead "
        "instead. Pass ReadOptions(prefetch_buffer_size=8) to choose it, or a larger "
        "prefetch_buffer_bytes (None: no bound in bytes)."
    ]
    assert it.chunk_size == 4  # 8 elements ahead on 2 threads.
    for consumed in range(1, 200):
        assert next(it)[0] == consumed % 256
        # The current chunk (4) and 8 more ahead of it: never 100 elements ahead.
        assert source.furthest <= consumed + 4 + 8
    it.close()


def test_small_elements_keep_the_element_count_and_warn_nothing():
    source = _Recording(300, 16)
    it = PrefetchReadIter(source, ReadOptions(num_threads=2, prefetch_buffer_size=100))
    assert [int(x[0]) for x in it] == [i % 256 for i in range(300)]
    assert it.chunk_size == 38  # Not shrunk for bytes: 300 // (2 threads x SPLIT) + 1.


def test_the_byte_bound_is_validated_and_shown_when_not_the_default():
    assert repr(ReadOptions(prefetch_buffer_bytes=None)) == (
        "ReadOptions(num_threads=16, prefetch_buffer_size=500, prefetch_buffer_bytes=None)"
    )
    with pytest.raises(ValueError, match=r"^ReadOptions: prefetch_buffer_bytes must be >= 1"):
        ReadOptions(prefetch_buffer_bytes=0)


def _after_four(element):
    return element[0] >= 4


def test_elements_are_measured_past_dropped_positions():
    source = _Recording(64, 2**20)
    options = ReadOptions(num_threads=2, prefetch_buffer_size=32, prefetch_buffer_bytes=2**22)
    it = PrefetchReadIter(FilterMap(source, _after_four), options)
    with pytest.warns(_prefetch_read.ReadAheadWarning, match=r"reading 4 elements ahead"):
        assert next(it)[0] == 4
    assert [int(x[0]) for x in it] == list(range(5, 64))


class _Slow:
    """A dataset whose reads take `seconds` per position; records each read's size."""

    def __init__(self, length, seconds):
        self.length, self.seconds, self.reads = length, seconds, []

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        return self.__getitems__([index])[0]

    def __getitems__(self, indices):
        self.reads.append((int(indices[0]), len(indices)))
        time.sleep(self.seconds * len(indices))
        return [int(i) for i in indices]


def test_automatic_chunks_split_a_small_slow_dataset_between_the_threads(monkeypatch):
    monkeypatch.setattr(_prefetch_read, "TARGET_SECONDS", 0.0)  # Every read counts as slow.
    slow = _Slow(10, 0.001)
    it = PrefetchReadIter(slow, ReadOptions(num_threads=2))
    assert list(it) == list(range(10))
    assert it.chunk_size == 2  # 10 positions, 2 threads: chunks of at most 10 // 8 + 1.
    # The two first reads, one per thread, before any read's time is known; then one
    # position a read, as each took longer than TARGET_SECONDS.
    assert [size for _, size in sorted(slow.reads)] == [1, 2] + [1] * 7


def test_automatic_chunks_of_cheap_elements_grow_to_the_default_size(monkeypatch):
    monkeypatch.setattr(_prefetch_read, "TARGET_SECONDS", 3600.0)  # Every read is quick.
    cheap = _Slow(5000, 0.0)
    it = PrefetchReadIter(cheap, ReadOptions(num_threads=2, prefetch_buffer_size=512))
    assert list(it) == list(range(5000))
    sizes = [size for _, size in sorted(cheap.reads)]
    assert sizes[:9] == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # Doubling while cheap.
    assert max(sizes) == it.chunk_size == 256
    assert sum(sizes) == 5000


def test_a_given_chunk_size_is_kept_whatever_the_cost(monkeypatch):
    monkeypatch.setattr(_prefetch_read, "TARGET_SECONDS", 0.0)
    slow = _Slow(12, 0.001)
    it = PrefetchReadIter(slow, ReadOptions(num_threads=2), chunk_size=4)
    assert list(it) == list(range(12))
    assert sorted(slow.reads) == [(0, 4), (4, 4), (8, 4)]
