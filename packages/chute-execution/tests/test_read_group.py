"""ReadGroup: readers built inside `sharing_reads()` share threads and read-ahead."""

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_execution import PrefetchReadIter, ReadGroup, ReadOptions, sharing_reads
from chute_execution._read_group import MIN_SHARE
from chute_samplers import MixIter, MixMap, ShuffleMap
from chute_sources import RangeSource
from chute_testing import assert_resumes


class Recording:
    """A source recording the highest position read and the threads that read it."""

    def __init__(self, n, offset=0):
        self.n, self.offset = n, offset
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
        return [self.offset + key for key in keys]


def _readers(sources, options):
    with sharing_reads():
        return [PrefetchReadIter(source, options) for source in sources]


def _read_threads():
    return [t for t in threading.enumerate() if t.name.startswith("chute-read")]


def test_sixty_four_readers_run_on_one_readers_threads_and_read_ahead():
    sources = [Recording(1000, 1000 * k) for k in range(64)]
    readers = _readers(sources, ReadOptions(num_threads=4, prefetch_buffer_size=500))
    mixture = MixIter(readers)
    first = [next(mixture) for _ in range(64 * 3)]
    assert first == [1000 * k + j for j in range(3) for k in range(64)]
    assert len(_read_threads()) <= 4
    names = set().union(*(source.threads for source in sources))
    assert names and all(name.startswith("chute-read-shared") for name in names)
    for reader in readers:
        reader.close()  # Waits for its reads in flight.
    # Each read ahead its share (8 positions; 4 more while measuring), not 500.
    assert max(source.highest for source in sources) < 3 + MIN_SHARE + 4
    deadline = time.monotonic() + 10
    while _read_threads() and time.monotonic() < deadline:
        time.sleep(0.01)  # The last lane stopped: the group's threads exit.
    assert _read_threads() == []


def test_alone_a_reader_reads_ahead_its_whole_buffer():
    source = Recording(1000)
    reader = PrefetchReadIter(source, ReadOptions(num_threads=4, prefetch_buffer_size=100))
    next(reader)
    deadline = time.monotonic() + 10
    while source.highest < 99 and time.monotonic() < deadline:
        time.sleep(0.01)
    reader.close()
    assert source.highest >= 99


def test_unthreaded_members_read_their_share_per_call():
    sources = [Recording(1000, 1000 * k) for k in range(16)]
    readers = _readers(sources, ReadOptions(num_threads=0))
    assert [next(reader) for reader in readers] == [1000 * k for k in range(16)]
    # Alone, one call reads 256 positions; sharing 16 ways, 256 // 16 = 16.
    assert {source.highest for source in sources} == {15}
    assert _read_threads() == []


def _mixture(count, options, share):
    def make():
        sources = [ShuffleMap(RangeSource(30 + 7 * k), seed=k) for k in range(count)]
        if share:
            return MixIter(_readers(sources, options))
        return MixIter([PrefetchReadIter(source, options) for source in sources])

    return make


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 12), st.sampled_from([0, 1, 3]), st.integers(1, 60))
def test_sharing_changes_no_element_and_no_state(count, threads, buffer):
    options = ReadOptions(num_threads=threads, prefetch_buffer_size=buffer)
    shared, alone = _mixture(count, options, True)(), _mixture(count, options, False)()
    while True:
        expected = next(alone, None)
        assert next(shared, None) == expected
        assert shared.get_state() == alone.get_state()
        if expected is None:
            break
    shared.close()
    alone.close()


@pytest.mark.parametrize("threads", [0, 2])
def test_a_shared_mixture_resumes_exactly_and_its_states_restore_unshared(threads):
    options = ReadOptions(num_threads=threads, prefetch_buffer_size=20)
    unshared = _mixture(5, options, False)
    assert_resumes(_mixture(5, options, True), every=7, make_restored=[unshared])


def test_discarding_a_lane_drops_its_reads_only():
    group = ReadGroup().join(1)
    gate = threading.Event()
    first, second = group.lane(), group.lane()
    blocked = first.submit(gate.wait)  # Holds the one thread.
    dropped = first.submit(lambda: "dropped")
    kept = second.submit(lambda: "kept")
    first.discard()
    gate.set()
    assert blocked.wait() is True  # Already running when discarded: it finishes.
    assert kept.wait() == "kept"
    assert dropped.wait() is None  # Skipped by the thread, never run.
    assert first.shutdown(5) and second.shutdown(5)


def test_a_lane_shutdown_waits_for_its_own_running_read_only():
    group = ReadGroup().join(2)
    gate, started = threading.Event(), threading.Event()

    def slow():
        started.set()
        gate.wait()
        return 1

    busy, other = group.lane(), group.lane()
    slot = busy.submit(slow)
    assert started.wait(5)
    assert other.shutdown(0.05)  # Nothing of its own runs.
    assert not busy.shutdown(0.05)  # Its read still runs: not done within the timeout.
    gate.set()
    assert slot.wait() == 1
    assert busy.shutdown(5)


def test_nested_blocks_share_the_outer_group():
    with sharing_reads() as outer:
        with sharing_reads() as inner:
            assert inner is outer
        PrefetchReadIter(range(4), ReadOptions(num_threads=2))
    assert outer.members == 1 and outer.max_threads == 2


def test_a_reader_of_a_random_access_mixture_reads_four_positions_per_component():
    """Chunks of `MixMap.min_chunk_size`: each component is called for several positions."""
    mixture = MixMap([ShuffleMap(RangeSource(40), seed=k) for k in range(64)])
    reader = PrefetchReadIter(mixture, ReadOptions(num_threads=2, prefetch_buffer_size=100))
    assert reader.chunk_size == 256
    assert list(reader) == list(PrefetchReadIter(mixture, ReadOptions(num_threads=0), 7))
    small = MixMap([RangeSource(40), RangeSource(40)])
    assert PrefetchReadIter(small, ReadOptions(num_threads=0)).chunk_size == 256  # Default.
