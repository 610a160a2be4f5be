import collections.abc
import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_core import DROPPED, InvalidStateError
from chute_samplers import (
    IndexSampler,
    InterleaveIter,
    IterNode,
    MixIter,
    SequentialIter,
    ShuffleMap,
    WindowShuffleIter,
)
from chute_samplers._window_states import WINDOW_STATES, reads_pairs
from chute_samplers.internal import Frontier
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


# --- InterleaveIter ----------------------------------------------------------------------


def _files():
    return [list(range(100 * f, 100 * f + n)) for f, n in enumerate([3, 1, 0, 4, 2, 5])]


def _interleave(cycle_length, use_factories=True):
    files = _files()
    if use_factories:
        inputs = [lambda f=f: SequentialIter(f) for f in files]
    else:
        inputs = [SequentialIter(f) for f in files]
    return InterleaveIter(inputs, cycle_length)


@pytest.mark.parametrize("cycle_length", [1, 2, 3, 10])
@pytest.mark.parametrize("use_factories", [True, False])
def test_interleave_resumes_everywhere(cycle_length, use_factories):
    elements = assert_resumes(lambda: _interleave(cycle_length, use_factories), every=1)
    everything = list(itertools.chain.from_iterable(_files()))
    assert sorted(elements) == sorted(everything)
    if cycle_length == 1:
        assert elements == everything


def test_interleave_round_robin_order():
    # Grain's order: a slot whose file ends is refilled when its turn comes back. Slot 0
    # reads file 0; slot 1 reads file 1, then at its next turns opens file 2 (empty) and
    # file 3; slot 0, once file 0 ended, opens file 4, and after it file 5.
    expected = [0, 100, 1, 2, 300, 400, 301, 401, 302, 303, 500, 501, 502, 503, 504]
    assert list(_interleave(2)) == expected


def test_interleave_of_index_samplers_through_factories():
    def make():
        return InterleaveIter(
            [lambda s=s: SequentialIter(ShuffleMap(RangeSource(s, s + 5), s)) for s in (0, 10, 20)],
            cycle_length=2,
        )

    assert sorted(assert_resumes(make, every=1)) == [*range(5), *range(10, 15), *range(20, 25)]
    sampler = IndexSampler(4, 1)
    assert [m.record_key for m in InterleaveIter([lambda: iter(sampler)], 1)] == [0, 1, 2, 3]


def test_interleave_rejects_bad_arguments_and_states():
    with pytest.raises(ValueError, match="cycle_length must be >= 1"):
        InterleaveIter([], 0)
    with pytest.raises(TypeError, match="zero-argument callable"):
        InterleaveIter([5], 1)  # type: ignore[list-item]
    assert list(InterleaveIter([], 3)) == []
    it = _interleave(2)
    with pytest.raises(InvalidStateError, match="must list 2 slots"):
        it.set_state({"cursor": 0, "next_input": 0, "slots": [None]})
    with pytest.raises(InvalidStateError, match="out of range"):
        it.set_state({"cursor": 2, "next_input": 0, "slots": [None, None]})
    with pytest.raises(InvalidStateError, match="malformed slot"):
        it.set_state({"cursor": 0, "next_input": 1, "slots": [{"input": 0}, None]})


def test_interleave_skips_inputs_without_a_stream_and_keeps_their_numbers():
    files = _files()
    inputs = [None if f in (1, 3) else (lambda f=f: SequentialIter(files[f])) for f in range(6)]
    it = InterleaveIter(inputs, 2)
    kept = list(InterleaveIter([lambda f=f: SequentialIter(files[f]) for f in (0, 2, 4, 5)], 2))
    assert list(it) == kept  # As if they were not there.
    assert it.get_state()["next_input"] == 6
    assert assert_resumes(lambda: InterleaveIter(inputs, 2), every=1) == kept
    slot = {"input": 1, "state": {"position": 0}}
    with pytest.raises(InvalidStateError, match=r"opens input\(s\) \[1\], which have no stream"):
        it.set_state({"cursor": 0, "next_input": 2, "slots": [slot, None]})
    with pytest.raises(ValueError, match="input 3 has no stream"):
        it.input_start_state(3)


class _NoOrigin:
    """A checkpointable iterator whose elements have no origin."""

    def __init__(self, items):
        self._items, self._at = list(items), 0

    def __iter__(self):
        return self

    def __next__(self):
        if self._at == len(self._items):
            raise StopIteration
        self._at += 1
        return self._items[self._at - 1]

    def get_state(self):
        return {"at": self._at}

    def set_state(self, state):
        self._at = state["at"]


def test_an_interleave_leaves_out_the_elements_its_state_says_to_skip():
    it = _interleave(2)
    # Input 3 (file 3: 300..303) without its positions 0 and 2, input 5 without 4.
    skips = [[3, [0, 2, "BQ=="]], [5, [4, 1]]]
    it.set_state({"cursor": 0, "next_input": 0, "slots": [None, None], "skips": skips})
    assert it.get_state()["skips"] == skips
    everything = list(_interleave(2))
    out = list(it)  # A skipped element's turn goes to the stream's next one.
    assert sorted(out) == sorted(x for x in everything if x not in (300, 302, 504))
    assert "skips" not in it.get_state()  # Passed, then forgotten.

    def make():
        fresh = _interleave(2)
        fresh.set_state({"cursor": 0, "next_input": 0, "slots": [None, None], "skips": skips})
        return fresh

    assert assert_resumes(make, every=1) == out


def test_an_interleave_refuses_skips_it_cannot_apply():
    it = _interleave(2)
    base = {"cursor": 0, "next_input": 0, "slots": [None, None]}
    with pytest.raises(InvalidStateError, match="positions by input"):
        it.set_state({**base, "skips": [[3, [0, 1]], [3, [2, 1]]]})  # Input 3 twice.
    with pytest.raises(InvalidStateError, match="past the last of the 6 inputs"):
        it.set_state({**base, "skips": [[6, [0, 1]]]})
    no_origins = InterleaveIter([lambda: _NoOrigin([1, 2])], 1)
    no_origins.set_state({"cursor": 0, "next_input": 0, "slots": [None], "skips": [[0, [0, 1]]]})
    with pytest.raises(InvalidStateError, match="have no one-int origin"):
        next(no_origins)


def test_a_window_over_an_interleave_names_its_elements_once_per_window():
    it = WindowShuffleIter(_interleave(2), window_size=4, seed=1)
    first = next(it)
    reads = it.get_state()["reads"]
    head = [first, next(it)]
    state = it.get_state()
    assert state["reads"] == reads  # Written once per window, whatever the offset.
    assert "span" not in state
    window = list(itertools.islice(_interleave(2), 4))
    assert reads_pairs(reads, "state") == [(x // 100, x % 100) for x in window]
    yielded = WINDOW_STATES.yielded(state, {"window_size": 4, "seed": 1})
    assert {(k, p) for k, ps in yielded.items() for p in ps} == {(x // 100, x % 100) for x in head}
    again = WindowShuffleIter(_interleave(2), window_size=4, seed=1)
    again.set_state(state)
    assert again.get_state() == state  # Before the window is read again.
    assert head + list(again) == list(WindowShuffleIter(_interleave(2), window_size=4, seed=1))
    backwards = [lambda f=f: SequentialIter(f) for f in reversed(_files())]
    other = WindowShuffleIter(InterleaveIter(backwards, 2), window_size=4, seed=1)
    other.set_state(state)
    with pytest.raises(InvalidStateError, match="reading it again gave"):
        next(other)
    fresh = WindowShuffleIter(_interleave(2), window_size=4, seed=1)
    before = fresh.get_state()
    with pytest.raises(InvalidStateError, match=r"state\['reads'\] is"):
        fresh.set_state({**state, "reads": [reads[0], "AAAA"]})  # Fewer orders than elements.
    assert fresh.get_state() == before


class _Lazy(collections.abc.Sequence):
    """A sequence of factories made when asked for (as a MapDataset of many files)."""

    def __init__(self, files):
        self.files, self.asked = files, []

    def __len__(self):
        return len(self.files)

    def __getitem__(self, number):
        self.asked.append(number)
        if self.files[number] == "not a factory":
            return self.files[number]
        return lambda: SequentialIter(self.files[number])


def test_interleave_reads_a_lazy_sequence_only_where_it_opens():
    files = _files()
    lazy = _Lazy(files)
    it = InterleaveIter(lazy, 2)
    assert lazy.asked == []
    assert list(itertools.islice(it, 3)) == list(itertools.islice(_interleave(2), 3))
    assert lazy.asked == [0, 1]
    assert sorted([*it, 0, 100, 1]) == sorted(itertools.chain.from_iterable(files))
    broken = InterleaveIter(_Lazy([[1], "not a factory"]), 2)
    assert next(broken) == 1
    with pytest.raises(TypeError, match=r"inputs\[1\] of a lazy sequence must be a zero-argument"):
        next(broken)


def _resharded():
    """The files as shard 1 of 2 (input k is global position 1 + 2k), as a reshard writes
    it: inputs 0 to 3 (global 1 to 7) were opened by other processes (a level of 2 whose
    threshold for odd positions is 9), and input 3 was left open after 2 elements."""
    it = _interleave(2)
    frontier = Frontier(1, 2, ((2, (0, 9)),))
    it.set_state(
        {
            "cursor": 0,
            "next_input": 0,
            "slots": [None, None],
            "pending": [[3, {"position": 2}]],
            "frontier": frontier.to_json(),
        }
    )
    return it


def test_a_resharded_interleave_continues_pending_streams_and_skips_opened_inputs():
    it = _resharded()
    assert it.get_state()["next_input"] == 4  # Inputs 0 to 3 are skipped.
    # Input 3 goes on from its element 2 in the first slot, inputs 4 and 5 follow.
    assert list(it) == [302, 400, 303, 401, 500, 501, 502, 503, 504]


def test_a_resharded_interleave_resumes_everywhere_and_forgets_what_it_passed():
    elements = assert_resumes(_resharded, every=1)
    assert elements == [302, 400, 303, 401, 500, 501, 502, 503, 504]
    it = _resharded()
    next(it), next(it)
    state = it.get_state()
    assert "pending" not in state  # Opened: its slot holds it now.
    assert "frontier" not in state  # Its next input is past every threshold.


def test_a_resharded_interleave_refuses_damaged_pending_streams():
    it = _interleave(2)
    base = {"cursor": 0, "next_input": 0, "slots": [None, None]}
    with pytest.raises(InvalidStateError, match=r"a pending stream is \[input, state\]"):
        it.set_state({**base, "pending": [[1]]})
    with pytest.raises(InvalidStateError, match="out of range"):
        it.set_state({**base, "pending": [[6, {"position": 0}]]})
    with pytest.raises(InvalidStateError, match=r"open input\(s\) \[1\] more than once"):
        it.set_state({**base, "pending": [[1, {"position": 0}], [1, {"position": 1}]]})
    with pytest.raises(InvalidStateError, match="frontier"):
        it.set_state({**base, "frontier": {"shard": [0, 2]}})


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
