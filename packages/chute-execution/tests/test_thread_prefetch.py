"""ThreadPrefetchIter: the parent's stream and states, advanced on a background thread."""

import gc
import threading
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_core import InvalidStateError
from chute_execution import PrefetchReadIter, ReadOptions, ThreadPrefetchIter, _thread_prefetch
from chute_samplers import IterNode, RepeatMap, SequentialIter, ShuffleMap
from chute_sources import RangeSource
from chute_testing import ListIterator, assert_resumes, assert_trees_equal
from chute_transforms import BatchIter, FilterIter, FilterMap, MapIter, RandomMapIter

BUFFER_SIZES = [0, 1, 2, 16]


def nodes(n=40):
    return ShuffleMap(RepeatMap(FilterMap(RangeSource(n), lambda x: x % 5 != 1), 2), seed=0)


PARENTS = {
    "sequential": lambda: SequentialIter(nodes(), chunk_size=4),
    "stream ops": lambda: BatchIter(
        MapIter(FilterIter(SequentialIter(nodes()), lambda x: x % 3), lambda x: x * 2), 3
    ),
    "list": lambda: ListIterator([{"a": np.arange(i)} for i in range(30)]),
    "threaded reads": lambda: PrefetchReadIter(nodes(), ReadOptions(2, 8), chunk_size=3),
}


class Counting(IterNode):
    """Counts the elements asked of it; optionally blocks before `block_at`."""

    def __init__(self, n, block_at=None):
        self.n, self.position, self.calls = n, 0, 0
        self.block_at = block_at
        self.release = threading.Event()
        self.entered = threading.Event()
        self.closed = False

    def __next__(self):
        if self.position == self.block_at:
            self.entered.set()
            assert self.release.wait(30), "test never released the parent"
        if self.position >= self.n:
            raise StopIteration
        self.calls += 1
        self.position += 1
        return self.position - 1

    def get_state(self):
        return {"position": self.position}

    def set_state(self, state):
        self.position = state["position"]

    def close(self):
        self.closed = True


def run(iterator, calls):
    """What `calls` calls of next() give: elements, errors (by type and text) and states."""
    outcomes = []
    for _ in range(calls):
        try:
            outcomes.append(("element", next(iterator)))
        except StopIteration:
            outcomes.append(("end",))
        except Exception as error:
            outcomes.append(("error", type(error), str(error)))
        outcomes.append(("state", iterator.get_state()))
    return outcomes


# --- the stream and its states ---------------------------------------------------------------


@pytest.mark.parametrize("parent", PARENTS)
@pytest.mark.parametrize("buffer_size", BUFFER_SIZES)
def test_stream_equals_the_parents(parent, buffer_size):
    expected = list(PARENTS[parent]())
    with ThreadPrefetchIter(PARENTS[parent](), buffer_size) as it:
        assert_trees_equal(list(it), expected)


@pytest.mark.parametrize("parent", PARENTS)
def test_resumes_anywhere_and_states_move_between_buffer_sizes_and_the_bare_parent(parent):
    make = PARENTS[parent]
    assert_resumes(
        lambda: ThreadPrefetchIter(make(), 3),
        every=2,
        expected=list(make()),
        make_restored=[
            lambda: ThreadPrefetchIter(make(), 0),
            lambda: ThreadPrefetchIter(make(), 1),
            lambda: ThreadPrefetchIter(make(), 64),
            make,
        ],
    )


def test_parent_states_restore_into_the_prefetcher():
    make = PARENTS["sequential"]
    assert_resumes(make, every=1, make_restored=[lambda: ThreadPrefetchIter(make(), 4)])


@settings(max_examples=30, deadline=None)
@given(
    buffer_size=st.integers(0, 8),
    steps=st.lists(st.one_of(st.just("next"), st.integers(0, 40)), max_size=60),
)
def test_any_mix_of_next_and_set_state_behaves_like_the_bare_parent(buffer_size, steps):
    reference = SequentialIter(nodes(20))
    it = ThreadPrefetchIter(SequentialIter(nodes(20)), buffer_size)
    total = len(list(SequentialIter(nodes(20))))
    for step in steps:
        if step == "next":
            assert next(it, "end") == next(reference, "end")
        else:
            target = SequentialIter(nodes(20))
            for _ in range(min(step, total)):
                next(target)
            it.set_state(target.get_state())
            reference.set_state(target.get_state())
        assert it.get_state() == reference.get_state()
    it.close()


@pytest.mark.parametrize("buffer_size", BUFFER_SIZES)
def test_origins_are_the_parents_and_random_maps_above_draw_the_same(buffer_size):
    def parent():
        return PrefetchReadIter(nodes(), ReadOptions(2, 8))

    direct = parent()
    expected = [(element, direct.origin) for element in direct]
    it = ThreadPrefetchIter(parent(), buffer_size)
    assert it.origin is None
    assert [(element, it.origin) for element in it] == expected

    def stream():
        return FilterIter(SequentialIter(RangeSource(50)), lambda x: x % 4 != 2)

    def draw(x, rng):
        return (x, int(rng.integers(1 << 30)))

    expected = list(RandomMapIter(stream(), draw, seed=5))
    assert list(RandomMapIter(ThreadPrefetchIter(stream(), buffer_size), draw, seed=5)) == expected


def test_get_state_does_not_wait_for_the_parent():
    parent = Counting(10, block_at=3)
    it = ThreadPrefetchIter(parent, 8)
    assert [next(it), next(it)] == [0, 1]
    assert parent.entered.wait(10)  # The thread is now stuck inside next(parent).
    assert it.get_state() == {"position": 2}
    parent.release.set()
    assert list(it) == list(range(2, 10))
    assert it.get_state() == {"position": 10}


def test_set_state_waits_for_the_parent_then_moves_it():
    parent = Counting(10, block_at=5)
    it = ThreadPrefetchIter(parent, 8)
    assert next(it) == 0
    assert parent.entered.wait(10)  # The thread is now stuck inside next(parent).
    threading.Timer(0.05, parent.release.set).start()
    it.set_state({"position": 7})  # Returns once the blocked next(parent) has.
    assert parent.get_state() == {"position": 7}
    assert list(it) == [7, 8, 9]
    with pytest.raises(InvalidStateError):
        ThreadPrefetchIter(SequentialIter([1, 2]), 2).set_state({"position": 9})


def test_buffer_is_bounded():
    for buffer_size in (1, 4, 32):
        parent = Counting(10_000)
        it = ThreadPrefetchIter(parent, buffer_size)
        for consumed in range(1, 200):
            next(it)
            if consumed % 40 == 0:
                threading.Event().wait(0.01)  # Let the thread fill the buffer.
            # The buffer, plus one element produced and waiting for room.
            assert parent.calls <= consumed + buffer_size + 1
        it.close()


def test_bad_arguments_get_clear_errors():
    with pytest.raises(TypeError, match="parent must be a checkpointable iterator"):
        ThreadPrefetchIter([1, 2, 3], 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="buffer_size must be >= 0"):
        ThreadPrefetchIter(SequentialIter([1]), -1)


# --- errors --------------------------------------------------------------------------------


def every_seventh_fails(x):
    if x % 7 == 3:
        raise ValueError(f"bad {x}")
    return x


@pytest.mark.parametrize("buffer_size", BUFFER_SIZES)
def test_errors_arrive_in_order_and_the_iterator_goes_on_as_the_parent_would(buffer_size):
    def make():
        return MapIter(SequentialIter(RangeSource(30)), every_seventh_fails)

    it = ThreadPrefetchIter(make(), buffer_size)
    outcomes = run(it, 40)
    assert outcomes == run(make(), 40)
    assert ("error", ValueError, "bad 3") in outcomes
    assert outcomes[-2] == ("end",)


def test_errors_keep_their_notes_and_traceback():
    it = ThreadPrefetchIter(MapIter(SequentialIter(RangeSource(10)), every_seventh_fails), 4)
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="bad 3") as info:
        next(it)
    assert any("chute: raised by map(every_seventh_fails)" in n for n in info.value.__notes__)
    assert "every_seventh_fails" in {entry.name for entry in info.traceback}


def test_end_is_sticky_like_the_parents():
    it = ThreadPrefetchIter(SequentialIter([1, 2]), 4)
    assert list(it) == [1, 2]
    assert next(it, "end") == "end"
    assert next(it, "end") == "end"


# --- threads never leak --------------------------------------------------------------------


def test_thread_stops_at_exhaustion_close_and_exception(new_threads):
    it = ThreadPrefetchIter(SequentialIter(range(500)), 16)
    assert list(it) == list(range(500))
    assert new_threads() == []

    it = ThreadPrefetchIter(SequentialIter(range(500)), 16)
    next(it)
    assert [t.name for t in new_threads()] == ["chute-prefetch"]
    it.close()
    assert new_threads() == []
    it.close()  # Idempotent.
    assert next(it) == 1  # And the iterator goes on where it was.
    it.close()

    it = ThreadPrefetchIter(MapIter(SequentialIter(range(20)), every_seventh_fails), 16)
    with pytest.raises(ValueError, match="bad 3"):
        list(it)
    assert new_threads() == []


@pytest.mark.parametrize("threaded_parent", [False, True])
def test_a_collected_iterator_stops_its_thread_and_its_parents(
    threaded_parent, new_threads, eventually
):
    if threaded_parent:
        parent = PrefetchReadIter(RangeSource(100_000), ReadOptions(4, 64))
    else:
        parent = SequentialIter(range(100_000))
    it = ThreadPrefetchIter(parent, 8)
    del parent
    next(it)
    ref = weakref.ref(it)
    del it
    assert ref() is None  # No reference cycle keeps it alive.
    gc.collect()
    assert eventually(lambda: new_threads() == [])


def test_close_closes_the_parent_and_its_threads(new_threads):
    parent = PrefetchReadIter(RangeSource(1000), ReadOptions(4, 40))
    with ThreadPrefetchIter(parent, 8) as it:
        assert next(it) == 0
        assert len(new_threads()) > 1
    assert new_threads() == []
    counting = Counting(5)
    ThreadPrefetchIter(counting, 2).close()
    assert counting.closed


def test_close_gives_up_on_a_stuck_parent_and_next_waits_for_it(monkeypatch, eventually):
    monkeypatch.setattr(_thread_prefetch, "JOIN_TIMEOUT", 0.05)
    parent = Counting(8, block_at=3)
    it = ThreadPrefetchIter(parent, 4)
    assert next(it) == 0
    assert parent.entered.wait(10)
    it.close()  # Returns although next(parent) is stuck; the parent is in use, so not closed.
    assert not parent.closed
    assert it.get_state() == {"position": 1}
    threading.Timer(0.05, parent.release.set).start()
    assert list(it) == list(range(1, 8))  # Waited for the stuck call, then restored.


def test_a_parent_whose_get_state_fails_raises_and_is_restored_afterwards():
    class BadState(Counting):
        def get_state(self):
            if self.position == 2 and not self.release.is_set():
                self.release.set()
                raise RuntimeError("no state")
            return super().get_state()

    it = ThreadPrefetchIter(BadState(5), 4)
    assert next(it) == 0
    with pytest.raises(RuntimeError, match="no state"):
        next(it)
    assert it.get_state() == {"position": 1}
    assert list(it) == [1, 2, 3, 4]  # The parent was moved back to the last good state.
