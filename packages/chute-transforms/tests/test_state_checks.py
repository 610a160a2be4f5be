"""Stream ops check their states against the stream, and a refused state moves nothing."""

from __future__ import annotations

import re
import sys

import pytest

from chute_core import ErrorBudget, InvalidStateError
from chute_samplers import SequentialIter
from chute_transforms import (
    FilterIter,
    FlatMapIter,
    FlatMapTransform,
    MapIter,
    RandomMapIter,
    SkipErrorsIter,
)


def _refuse(it, state, match):
    before = it.get_state()
    with pytest.raises(InvalidStateError, match=match):
        it.set_state(state)
    assert it.get_state() == before


class _Pairs(FlatMapTransform[int, int]):
    max_fan_out = 3

    def __init__(self, calls):
        self.calls = calls

    def flat_map(self, element):
        self.calls.append(element)
        return [element] * (element % 3 + 1)


def test_ops_say_how_many_outputs_one_element_gives_at_most():
    parent = SequentialIter([1])
    assert MapIter(parent, abs).max_fan_out == 1
    assert FilterIter(parent, bool).max_fan_out == 1
    assert RandomMapIter(parent, lambda x, rng: x, seed=0).max_fan_out == 1
    assert FlatMapIter(parent, lambda x: [x]).max_fan_out is None
    assert FlatMapIter(parent, _Pairs([])).max_fan_out == 3


def test_flat_map_refuses_an_offset_past_its_declared_fan_out_before_any_work():
    calls = []
    it = FlatMapIter(SequentialIter(range(6)), _Pairs(calls))
    next(it)
    del calls[:]
    _refuse(
        it,
        {"parent": {"position": 2}, "index": 2, "offset": 3},
        re.escape("state['offset'] = 3 is out of range [0, 2]"),
    )
    assert calls == []


def test_flat_map_refuses_an_offset_past_the_outputs_of_its_element():
    it = FlatMapIter(SequentialIter(range(6)), _Pairs([]))
    next(it)
    _refuse(
        it,
        {"parent": {"position": 0}, "index": 0, "offset": 1},
        re.escape("state['offset'] = 1 is out of range [0, 0]: the element there has 1 outputs"),
    )
    assert list(it) == [1, 1, 2, 2, 2, 3, 4, 4, 5, 5, 5]


def test_flat_map_refuses_an_offset_into_the_end_of_its_parent():
    it = FlatMapIter(SequentialIter(range(3)), lambda x: [x, x])
    next(it)
    _refuse(
        it,
        {"parent": {"position": 3}, "index": 3, "offset": 1},
        re.escape("state['offset'] = 1 is inside an element, but the parent has no element"),
    )
    assert list(it) == [0, 1, 1, 2, 2]


def test_flat_map_restores_inside_an_element():
    it = FlatMapIter(SequentialIter(range(3)), lambda x: [x, -x])
    it.set_state({"parent": {"position": 1}, "index": 1, "offset": 1})  # Saved before `at`.
    assert it.get_state() == {"parent": {"position": 1}, "index": 1, "offset": 1, "at": 1}
    assert list(it) == [-1, 2, -2]


@pytest.mark.parametrize(
    ("index", "match"),
    [
        (2**63, f"state['index'] = {2**63} is out of range [0, {sys.maxsize}]"),
        (-1, "state['index'] = -1 is out of range"),
        (False, "state['index'] must be an int in [0, "),
    ],
)
def test_an_op_refuses_an_index_out_of_range(index, match):
    it = MapIter(SequentialIter(range(3)), abs)
    next(it)
    _refuse(it, {"parent": {"position": 0}, "index": index}, re.escape(match))


def _fails_at_even(x):
    if x % 2 == 0:
        raise ValueError(x)
    return x


def test_skip_errors_keeps_its_count_when_the_pipeline_refuses_the_state():
    it = SkipErrorsIter(
        lambda: MapIter(SequentialIter(range(6)), _fails_at_even), ErrorBudget(max_failures=5)
    )
    assert [next(it), next(it)] == [1, 3]
    state = it.get_state()
    state["errors"]["failures"] = 4
    state["parent"]["parent"]["position"] = 7
    _refuse(it, state, re.escape("state['position'] = 7 is out of range [0, 6]"))
    assert it.failures == 2
    assert list(it) == [5]
    assert it.failures == 3


def test_skip_errors_refuses_a_stage_the_pipeline_does_not_have():
    it = SkipErrorsIter(
        lambda: MapIter(SequentialIter(range(6)), _fails_at_even), ErrorBudget(max_failures=5)
    )
    next(it)
    state = it.get_state()
    state["errors"]["skipped"][0][0] = 2
    _refuse(it, state, re.escape("its stage 2 is out of range [0, 1]"))


def test_flat_map_drops_the_outputs_a_skip_entry_names_and_states_keep_the_rest():
    it = FlatMapIter(SequentialIter(range(4)), lambda x: [x, 10 + x, 20 + x])
    it.set_state({"parent": {"position": 1}, "index": 1, "offset": 0, "skip": [[1, 2], [3, 1]]})
    assert next(it) == 21  # Outputs 0 and 1 of position 1 were delivered elsewhere.
    assert it.get_state() == {"parent": {"position": 2}, "index": 2, "offset": 0, "skip": [[3, 1]]}
    assert [next(it), next(it)] == [2, 12]
    state = it.get_state()
    assert state["at"] == 2 and state["skip"] == [[3, 1]]
    assert list(it) == [22, 13, 23]
    it.set_state(state)  # Inside position 2: the entry for 3 is still ahead.
    assert list(it) == [22, 13, 23]
    it.set_state({"parent": {"position": 3}, "index": 3, "offset": 1, "at": 3, "skip": [[3, 1]]})
    assert list(it) == [23]  # Of 13 and 23 (after the one skipped), 13 was yielded.


@pytest.mark.parametrize(
    ("skip", "match"),
    [
        ("x", r"state\['skip'\] must list at most"),
        ([[1]], r"state\['skip'\] must list at most"),
        ([[1, 0]], r"state\['skip'\] must list at most"),
        ([[-1, 1]], r"state\['skip'\] must list at most"),
        ([[1, 1], [1, 2]], r"position an int >= 0 or \[input, position\], each once"),
        ([[1, True]], r"state\['skip'\] must list at most"),
        ([[[0, 1, 2], 1]], r"state\['skip'\] must list at most"),
        ([[[0, 1], 1], [[0, 1], 2]], r"each once"),
    ],
)
def test_flat_map_refuses_a_damaged_skip_list(skip, match):
    it = FlatMapIter(SequentialIter(range(3)), lambda x: [x, x])
    next(it)
    _refuse(it, {"parent": {"position": 1}, "index": 1, "offset": 0, "skip": skip}, match)


def test_flat_map_refuses_to_skip_more_outputs_than_the_element_has():
    it = FlatMapIter(SequentialIter(range(3)), lambda x: [x, x])
    it.set_state({"parent": {"position": 0}, "index": 0, "offset": 0, "skip": [[1, 3]]})
    assert next(it) == 0 and next(it) == 0
    with pytest.raises(InvalidStateError, match="3 outputs of position 1 were delivered"):
        next(it)
