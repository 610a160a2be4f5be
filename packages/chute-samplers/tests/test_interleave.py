"""InterleaveIter: round robin over streams, its checked states, lazy inputs, and the
states a reshard writes (pending streams, a frontier, skips)."""

import collections.abc
import itertools

import pytest

from chute_core import InvalidStateError
from chute_samplers import (
    IndexSampler,
    InterleaveIter,
    SequentialIter,
    ShuffleMap,
    WindowShuffleIter,
)
from chute_samplers._window_states import WINDOW_STATES, reads_pairs
from chute_samplers.internal import Frontier
from chute_sources import RangeSource
from chute_testing import ListIterator, assert_resumes


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
    no_origins = InterleaveIter([lambda: ListIterator([1, 2], origins=False)], 1)
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
