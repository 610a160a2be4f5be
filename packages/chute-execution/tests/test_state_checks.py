"""The workers' state is checked against the plan before any chunk runs."""

from __future__ import annotations

import re
import sys

import pytest

from chute_core import InvalidStateError
from chute_execution import ChunkPlan, MultiprocessingOptions, MultiprocessPrefetchIter
from chute_testing.execution import Remainder, Repeat
from chute_transforms import FilterIter, FlatMapIter, FlatMapTransform, MapIter


class _Count:
    """A map that records the elements it ran on (picklable)."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, element: int) -> int:
        self.calls.append(element)
        return element


class _Twice(FlatMapTransform[int, int]):
    max_fan_out = 2

    def flat_map(self, element: int) -> list[int]:
        return [element, element]


def _iterator(ops, length=100, chunk_size=8):
    plan = ChunkPlan(range(length), ops, chunk_size)
    return MultiprocessPrefetchIter(plan, MultiprocessingOptions(num_workers=0))


def _refuse(it, state, match):
    before = it.get_state()
    with pytest.raises(InvalidStateError, match=match):
        it.set_state(state)
    assert it.get_state() == before


def test_a_plan_bounds_the_outputs_of_one_position_by_its_ops():
    assert ChunkPlan(range(3), []).max_fan_out == 1
    assert ChunkPlan(range(3), [(FilterIter, (Remainder(2, 0),), {})]).max_fan_out == 1
    twice = (FlatMapIter, (_Twice(),), {})
    assert ChunkPlan(range(3), [twice, twice]).max_fan_out == 4
    assert ChunkPlan(range(3), [twice, (FlatMapIter, (Repeat(3),), {})]).max_fan_out is None


@pytest.mark.parametrize(
    ("state", "match"),
    [
        ({"position": 101, "offset": 0}, "state['position'] = 101 is out of range [0, 100]"),
        ({"position": 90, "offset": 11}, "state['offset'] = 11 is out of range [0, 10]"),
        ({"position": 0, "offset": -1}, "state['offset'] = -1 is out of range [0, 100]"),
        ({"position": 0, "offset": True}, "state['offset'] must be an int in [0, 100], got bool"),
        ({"chunk": 14, "offset": 0}, "state['chunk'] = 14 is out of range [0, 13]"),
        ({"chunk": 12, "offset": 5}, "state['offset'] = 5 is out of range [0, 4]"),
        ({"chunk": 2, "offset": 9}, "state['offset'] = 9 is out of range [0, 8]"),
        ({"position": 0, "offset": 0, "chunk": 0}, "unknown ['chunk']"),
    ],
)
def test_a_state_past_the_outputs_of_a_map_plan_is_refused_before_any_chunk_runs(state, match):
    count = _Count()
    it = _iterator([(MapIter, (count,), {})])
    _refuse(it, state, re.escape(match))
    assert count.calls == []
    assert next(it) == 0


def test_a_declared_fan_out_bounds_the_offset():
    it = _iterator([(FlatMapIter, (_Twice(),), {})])
    it.set_state({"position": 90, "offset": 20})
    assert list(it) == []
    match = re.escape("state['offset'] = 21 is out of range [0, 20]")
    _refuse(it, {"position": 90, "offset": 21}, match)


def test_an_undeclared_fan_out_leaves_the_offset_to_the_outputs():
    it = _iterator([(FlatMapIter, (Repeat(3),), {})])
    it.set_state({"position": 99, "offset": 5})
    with pytest.raises(InvalidStateError, match="outputs past the end of the stream"):
        next(it)
    _refuse(
        it,
        {"position": 99, "offset": 2**63},
        re.escape(f"state['offset'] = {2**63} is out of range [0, {sys.maxsize}]"),
    )
