"""`set_state` checks every field against the iterator, and a refused state moves nothing."""

from __future__ import annotations

import re
import sys

import pytest

from chute_core import InvalidStateError
from chute_samplers import (
    ConcatenateIter,
    IndexSampler,
    InterleaveIter,
    MixIter,
    RepeatIter,
    SequentialIter,
    WindowShuffleIter,
    ZipIter,
)


def _refuse(it, state, match):
    before = it.get_state()
    with pytest.raises(InvalidStateError, match=match):
        it.set_state(state)
    assert it.get_state() == before


@pytest.mark.parametrize(
    ("epochs", "epoch", "match"),
    [
        (3, 4, "state['epoch'] = 4 is out of range [0, 3]"),
        (3, -1, "state['epoch'] = -1 is out of range [0, 3]"),
        (None, 2**63, f"state['epoch'] = {2**63} is out of range [0, {sys.maxsize}]"),
        (3, True, "state['epoch'] must be an int in [0, 3], got bool True"),
    ],
)
def test_repeat_checks_the_epoch_against_its_epochs(epochs, epoch, match):
    it = RepeatIter(SequentialIter([1, 2]), num_epochs=epochs)
    next(it)
    _refuse(it, {"epoch": epoch, "parent": {"position": 0}}, re.escape(match))
    assert next(it) == 2


def test_repeat_restores_the_end_of_its_last_epoch():
    it = RepeatIter(SequentialIter([1, 2]), num_epochs=2)
    it.set_state({"epoch": 2, "parent": {"position": 2}})
    assert list(it) == []


def test_a_reader_refuses_keys_it_never_writes():
    it = SequentialIter([1, 2, 3])
    _refuse(it, {"position": 1, "epoch": 0}, re.escape("unknown ['epoch']"))
    sampler = iter(IndexSampler(4, num_epochs=1))
    _refuse(sampler, {"position": 1, "seed": 3}, re.escape("unknown ['seed']"))


def test_an_endless_sampler_refuses_a_position_past_the_index_range():
    it = iter(IndexSampler(4, num_epochs=None))
    _refuse(
        it,
        {"position": 2**63},
        re.escape(f"state['position'] = {2**63} is out of range [0, {sys.maxsize}]"),
    )


def _mix():
    return MixIter([SequentialIter(range(0, 20, 2)), SequentialIter(range(1, 20, 2))], [3, 1])


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        ({"position": 2**63}, f"state['position'] = {2**63} is out of range [0, {sys.maxsize}]"),
        ({"position": -1}, "state['position'] = -1 is out of range"),
        ({"position": 1.0}, "state['position'] must be an int in [0, "),
        ({"exhausted": 0}, "state['exhausted'] must be a bool, got int 0"),
        ({"components": [{"position": 1}]}, "must list 2 states (dicts), one per component"),
        ({"weights": [3, 1]}, "unknown ['weights']"),
    ],
)
def test_mix_checks_each_field(edit, match):
    it = _mix()
    next(it)
    _refuse(it, {**it.get_state(), **edit}, re.escape(match))
    assert [next(it) for _ in range(3)] == [2, 4, 1]


def test_mix_sets_back_the_components_before_one_that_refuses():
    it = _mix()
    [next(it) for _ in range(5)]
    state = {"position": 1, "exhausted": False, "components": [{"position": 1}, {"position": 11}]}
    _refuse(it, state, re.escape("state['position'] = 11 is out of range [0, 10]"))
    assert [next(it) for _ in range(3)] == [8, 10, 3]


@pytest.mark.parametrize("make", [ZipIter, ConcatenateIter])
def test_zip_and_concatenate_set_back_the_parents_before_one_that_refuses(make):
    it = make([SequentialIter([1, 2, 3]), SequentialIter([4, 5, 6])])
    next(it)
    state = it.get_state()
    state["parents"] = [{"position": 0}, {"position": 9}]
    _refuse(it, state, re.escape("state['position'] = 9 is out of range [0, 3]"))


def test_concatenate_checks_the_current_parent():
    it = ConcatenateIter([SequentialIter([1]), SequentialIter([2])])
    state = {"current": 2, "parents": [{"position": 0}, {"position": 0}]}
    _refuse(it, state, re.escape("state['current'] = 2 is out of range [0, 1]"))


def test_interleave_refuses_an_input_open_in_two_slots():
    inputs = [SequentialIter([1, 2]), SequentialIter([3, 4])]
    it = InterleaveIter(inputs, cycle_length=2)
    next(it)
    slot = {"input": 0, "state": {"position": 0}}
    state = {"cursor": 0, "next_input": 2, "slots": [slot, slot]}
    _refuse(it, state, re.escape("open input(s) [0] more than once"))


def test_interleave_sets_back_the_iterator_inputs_before_one_that_refuses():
    inputs = [SequentialIter([1, 2, 3]), SequentialIter([4, 5, 6])]
    it = InterleaveIter(inputs, cycle_length=2)
    assert [next(it) for _ in range(3)] == [1, 4, 2]
    state = {
        "cursor": 0,
        "next_input": 2,
        "slots": [
            {"input": 0, "state": {"position": 0}},
            {"input": 1, "state": {"position": 7}},
        ],
    }
    _refuse(it, state, re.escape("state['position'] = 7 is out of range [0, 3]"))
    assert inputs[0].get_state() == {"position": 2}
    assert list(it) == [5, 3, 6]


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        ({"window": 2**62}, f"state['window'] = {2**62} is out of range [0, {sys.maxsize // 4}]"),
        ({"offset": 5}, "state['offset'] = 5 is out of range [0, 4]"),
        ({"window_start": None}, "state['window_start'] must be the parent's state"),
        ({"seed": 0}, "unknown ['seed']"),
    ],
)
def test_window_shuffle_checks_each_field(edit, match):
    it = WindowShuffleIter(SequentialIter(range(10)), window_size=4, seed=0)
    first = next(it)
    _refuse(it, {**it.get_state(), **edit}, re.escape(match))
    restored = WindowShuffleIter(SequentialIter(range(10)), window_size=4, seed=0)
    assert [first, *it] == list(restored)


def test_interleave_refuses_a_stream_it_would_also_open_anew():
    inputs = [SequentialIter([1, 2]), SequentialIter([3, 4])]
    it = InterleaveIter(inputs, cycle_length=2)
    next(it)
    pending = [[1, {"position": 0}]]  # Input 1 is not below next_input, nor skipped.
    state = {"cursor": 0, "next_input": 0, "slots": [None, None], "pending": pending}
    _refuse(it, state, re.escape("has input(s) [1] open, which it would also open anew"))


def test_interleave_refuses_a_damaged_pending_stream_before_moving():
    inputs = [lambda: SequentialIter([1, 2]), lambda: SequentialIter([3, 4])]
    it = InterleaveIter(inputs, cycle_length=2)
    next(it)
    state = {"cursor": 0, "next_input": 2, "slots": [None, None], "pending": [[1, {"p": "x"}]]}
    _refuse(it, state, "position")


def test_interleave_refuses_skips_of_an_input_read_to_the_end():
    inputs = [lambda: SequentialIter([1, 2]), lambda: SequentialIter([3, 4])]
    it = InterleaveIter(inputs, cycle_length=2)
    next(it)
    state = {"cursor": 0, "next_input": 2, "slots": [None, None], "skips": [[0, [0, 1]]]}
    _refuse(it, state, re.escape("names input(s) [0], which were read to the end"))
