import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_core import DROPPED, InvalidStateError
from chute_samplers import (
    IterNode,
    MixIter,
    SequentialIter,
    ShuffleMap,
    WindowShuffleIter,
)
from chute_sources import RangeSource
from chute_testing import assert_resumes


class FilterIter(IterNode):
    """A filtered stream (the transforms layer owns the real one); state = parent's."""

    def __init__(self, parent, keep):
        self._parent, self._keep = parent, keep

    def __next__(self):
        while True:
            element = next(self._parent)
            if self._keep(element):
                return element

    def get_state(self):
        return self._parent.get_state()

    def set_state(self, state):
        self._parent.set_state(state)


# --- SequentialIter ----------------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [1, 4, 256])
def test_sequential_iter_reads_in_order_and_resumes(chunk_size):
    dataset = ShuffleMap(RangeSource(30), seed=1)
    assert_resumes(
        lambda: SequentialIter(dataset, chunk_size=chunk_size), every=1, expected=list(dataset)
    )


def test_sequential_iter_skips_dropped_positions_and_resumes():
    data = [0, DROPPED, DROPPED, 3, DROPPED, 5, DROPPED]
    for chunk_size in (1, 2, 10):
        assert_resumes(lambda c=chunk_size: SequentialIter(data, c), every=1, expected=[0, 3, 5])


def test_sequential_iter_rejects_bad_arguments_and_states():
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        SequentialIter([1], chunk_size=0)
    with pytest.raises(TypeError, match="dataset must be a random-access dataset"):
        SequentialIter(5)  # type: ignore[arg-type]
    it = SequentialIter([1, 2, 3])
    with pytest.raises(InvalidStateError, match="out of range"):
        it.set_state({"position": 4})
    with pytest.raises(InvalidStateError, match="has no 'position'"):
        it.set_state({"pos": 1})


# --- MixIter -----------------------------------------------------------------------------


def _filtered_mix(weights=(0.7, 0.3)):
    evens = FilterIter(SequentialIter(RangeSource(0, 400)), lambda x: x % 10 == 0)
    odds = FilterIter(SequentialIter(RangeSource(1000, 1100)), lambda x: x % 3 == 0)
    return MixIter([evens, odds], weights=list(weights))


def test_mix_iter_keeps_proportions_of_filtered_components_in_every_prefix():
    elements = list(_filtered_mix())
    counts = [0, 0]
    for p, element in enumerate(elements, start=1):
        counts[element >= 1000] += 1
        assert abs(counts[0] - 0.7 * p) < 1 and abs(counts[1] - 0.3 * p) < 1
    # Ends when the component whose turn it is runs out: the first has 40 elements.
    assert counts[0] == 40


def test_mix_iter_resumes_everywhere_including_after_exhaustion():
    expected = list(_filtered_mix())
    assert_resumes(_filtered_mix, every=1, expected=expected)
    it = _filtered_mix()
    list(it)
    state = it.get_state()
    assert state["exhausted"] is True
    fresh = _filtered_mix()
    fresh.set_state(json.loads(json.dumps(state)))
    assert list(fresh) == []


@settings(max_examples=25, deadline=None)
@given(
    weights=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    cut=st.integers(0, 60),
)
def test_mix_iter_resume_equals_uninterrupted_run(weights, cut):
    def make():
        return MixIter(
            [SequentialIter(RangeSource(100 * j, 100 * j + 30)) for j in range(len(weights))],
            weights,
        )

    full = list(make())
    it = make()
    for _ in range(min(cut, len(full))):
        next(it)
    restored = make()
    restored.set_state(json.loads(json.dumps(it.get_state())))
    assert list(restored) == full[min(cut, len(full)) :]


def test_mix_iter_rejects_bad_arguments_and_states():
    with pytest.raises(ValueError, match="at least one"):
        MixIter([])
    with pytest.raises(TypeError, match="checkpointable iterator"):
        MixIter([iter([1, 2])])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="positive and finite"):
        MixIter([SequentialIter([1]), SequentialIter([2])], [1, -1])
    it = MixIter([SequentialIter([1]), SequentialIter([2])])
    with pytest.raises(InvalidStateError, match="must list 2 states"):
        it.set_state({"position": 0, "exhausted": False, "components": [{"position": 0}]})
    with pytest.raises(InvalidStateError, match="must be a bool"):
        it.set_state({"position": 0, "exhausted": 0, "components": []})


# --- WindowShuffleIter -------------------------------------------------------------------


def _window(size=23, window_size=5, seed=7):
    return WindowShuffleIter(SequentialIter(RangeSource(size)), window_size, seed)


@pytest.mark.parametrize(("size", "window_size"), [(23, 5), (20, 5), (3, 10), (0, 4), (7, 1)])
def test_window_shuffle_permutes_within_windows_and_resumes(size, window_size):
    elements = assert_resumes(lambda: _window(size, window_size), epoch_length=window_size, every=1)
    for start in range(0, size, window_size):
        window = elements[start : start + window_size]
        assert sorted(window) == list(range(start, min(start + window_size, size)))
    if size >= 2 * window_size and window_size > 1:
        assert elements != list(range(size))


def test_window_shuffle_state_holds_no_elements_and_windows_differ():
    it = _window(40, 10)
    for _ in range(13):
        next(it)
    state = it.get_state()
    # The window's positions (10 to 19), for resharding; never its elements.
    assert state == {"window_start": {"position": 10}, "window": 1, "offset": 3, "span": [10, 10]}
    out = list(_window(40, 10))
    offsets = [[x - 10 * w for x in out[10 * w : 10 * w + 10]] for w in range(4)]
    assert len({tuple(o) for o in offsets}) == 4


def test_window_shuffle_over_a_filtered_stream_resumes():
    def make():
        parent = FilterIter(SequentialIter(RangeSource(60)), lambda x: x % 3 != 0)
        return WindowShuffleIter(parent, 6, seed=1)

    elements = assert_resumes(make, every=1)
    assert sorted(elements) == [x for x in range(60) if x % 3 != 0]


def test_window_shuffle_rejects_bad_arguments_and_states():
    with pytest.raises(ValueError, match="window_size must be >= 1"):
        _window(window_size=0)
    with pytest.raises(ValueError, match="seed must be >= 0"):
        _window(seed=-1)
    with pytest.raises(TypeError, match="checkpointable iterator"):
        WindowShuffleIter([1, 2], 2, 0)  # type: ignore[arg-type]
    it = _window()
    with pytest.raises(InvalidStateError, match="window_start"):
        it.set_state({"window_start": 3, "window": 0, "offset": 0})
    with pytest.raises(InvalidStateError, match="out of range"):
        it.set_state({"window_start": {"position": 0}, "window": 0, "offset": 6})
    it.set_state({"window_start": {"position": 20}, "window": 4, "offset": 4})
    with pytest.raises(InvalidStateError, match="past the end of its window"):
        next(it)


class _Breaks:
    """Positions from `bad` on raise (a dataset that fails from there)."""

    def __init__(self, size, bad):
        self.size, self.bad = size, bad

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        if i >= self.bad:
            raise KeyError(f"record {i} is corrupt")
        return i * 10


@pytest.mark.parametrize("chunk_size", [1, 3, 256])
@pytest.mark.parametrize("counts", [[1], [4, 1, 7], [2, 300], [1000]])
def test_next_many_equals_as_many_nexts_with_the_same_states(chunk_size, counts):
    data = [DROPPED if i % 5 == 2 else i for i in range(40)] + list(range(40, 300))
    for dataset in (data, ShuffleMap(RangeSource(5000), seed=4)):
        fast = SequentialIter(dataset, chunk_size)
        slow = SequentialIter(dataset, chunk_size)
        for count in counts * 3:
            got = fast.next_many(count)
            assert got == list(itertools.islice(slow, count))
            assert fast.get_state() == slow.get_state()
            assert fast.origin == slow.origin


def test_next_many_raises_where_next_would_and_keeps_the_elements_before_read():
    fast, slow = SequentialIter(_Breaks(20, 7), 4), SequentialIter(_Breaks(20, 7), 4)
    assert fast.next_many(5) == list(itertools.islice(slow, 5)) == [0, 10, 20, 30, 40]
    with pytest.raises(KeyError, match="record 7 is corrupt") as raised:
        fast.next_many(5)
    assert "chute: raised by reading _Breaks on the element at position 7" in raised.value.__notes__
    assert [next(slow), next(slow)] == [50, 60]
    with pytest.raises(KeyError, match="record 7 is corrupt"):
        next(slow)
    assert fast.get_state() == slow.get_state() == {"position": 7}
    assert fast.next_many(0) == []
    fast.set_state({"position": 2})
    assert fast.next_many(3) == [20, 30, 40]


def test_next_many_stops_short_only_at_the_end():
    it = SequentialIter(RangeSource(10), 4)
    assert it.next_many(8) == list(range(8))
    assert it.next_many(8) == [8, 9]
    assert it.next_many(8) == []
    assert it.get_state() == {"position": 10}


class _Recorded:
    """A dataset that notes `(start, count)` of every batched read."""

    def __init__(self, make, size):
        self.make, self.size, self.reads = make, size, []

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        return self.make(i)

    def __getitems__(self, keys):
        self.reads.append((keys[0], len(keys)))
        return [self.make(k) for k in keys]


def _small_then_large(i):
    return i if i < 6000 else np.full(1024, i, np.float64)  # 8 KiB arrays from 6000 on.


def test_reads_stay_within_their_caps_and_large_elements_keep_to_256():
    data = _Recorded(_small_then_large, 9000)
    out = list(SequentialIter(data))
    assert out[:6000] == list(range(6000))
    assert all(
        np.array_equal(a, np.full(1024, i, np.float64)) for i, a in enumerate(out[6000:], 6000)
    )
    assert max(count for _, count in data.reads) <= 4096
    first_large = next(n for n, (start, count) in enumerate(data.reads) if start + count > 6000)
    assert all(count <= 256 for _, count in data.reads[first_large + 1 :])
    explicit = _Recorded(lambda i: i, 3000)
    assert list(SequentialIter(explicit, chunk_size=300)) == list(range(3000))
    assert max(count for _, count in explicit.reads) <= 300
    opaque = _Recorded(lambda i: {"id": i, "tags": {i}}, 3000)  # A set: not looked into.
    assert [e["id"] for e in SequentialIter(opaque)] == list(range(3000))
    assert max(count for _, count in opaque.reads) <= 256


def test_a_stream_turning_from_small_to_large_elements_resumes_everywhere():
    data = _Recorded(_small_then_large, 6400)
    assert_resumes(lambda: SequentialIter(data), every=397)
