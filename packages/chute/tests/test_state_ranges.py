"""Bad iterator states are refused by `set_state`, before the iterator moves or works.

Issue 28, item 6: each case below was accepted silently (or raised only after most of
the work): the state must be refused with an `InvalidStateError` naming the field, the
value and the allowed range, and the iterator must stay where it was.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_testing import assert_resumes, assert_trees_equal


def _advanced(ds: chute.IterDataset[Any], steps: int) -> Any:
    it = iter(ds)
    for _ in range(steps):
        next(it)
    return it


def _refused(it: Any, state: dict[str, Any], match: str) -> None:
    """`set_state(state)` raises, and `it` goes on from where it was."""
    before = it.get_state()
    with pytest.raises(chute.InvalidStateError, match=match):
        it.set_state(state)
    assert it.get_state() == before


def _edited(it: Any, path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    state = copy.deepcopy(it.get_state())
    inner = state
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = value
    return state


def test_repeat_refuses_an_epoch_past_its_epochs():
    it = _advanced(chute.MapDataset.range(10).to_iter_dataset().repeat(3), 1)
    _refused(
        it,
        _edited(it, ("epoch",), 10**30),
        re.escape("state['epoch'] = 1000000000000000000000000000000 is out of range [0, 3]"),
    )
    _refused(it, _edited(it, ("epoch",), 4), re.escape("state['epoch'] = 4 is out of range [0, 3]"))
    assert next(it) == 1


def test_flat_map_refuses_an_offset_past_the_outputs_of_its_element():
    it = _advanced(chute.MapDataset.range(10).to_iter_dataset().flat_map(lambda x: [x, x]), 1)
    assert it.get_state()["offset"] == 1
    _refused(
        it,
        _edited(it, ("offset",), 10**30),
        re.escape(
            f"state['offset'] = 1000000000000000000000000000000 is out of range [0, {sys.maxsize}]"
        ),
    )
    _refused(
        it,
        _edited(it, ("offset",), 2),
        re.escape("state['offset'] = 2 is out of range [0, 1]: the element there has 2 outputs"),
    )
    assert list(it) == [0, *(x for x in range(1, 10) for _ in range(2))]


class _Twice(chute.FlatMapTransform[int, int]):
    max_fan_out = 2

    def __init__(self, calls: list[int]) -> None:
        self.calls = calls

    def flat_map(self, element: int) -> list[int]:
        self.calls.append(element)
        return [element, element]


def test_flat_map_refuses_an_offset_past_its_declared_fan_out_without_running_it():
    calls: list[int] = []
    it = _advanced(chute.MapDataset.range(10).to_iter_dataset().flat_map(_Twice(calls)), 1)
    del calls[:]
    _refused(
        it,
        _edited(it, ("offset",), 2),
        re.escape("state['offset'] = 2 is out of range [0, 1];"),
    )
    assert calls == []


def test_flat_map_refuses_an_offset_into_an_element_past_the_end():
    it = _advanced(chute.MapDataset.range(2).to_iter_dataset().flat_map(lambda x: [x, x]), 4)
    state = {"parent": {"position": 2}, "index": 2, "offset": 1}
    _refused(it, state, "no element there")
    assert list(it) == []


def test_mix_refuses_a_position_past_the_index_range():
    a = chute.MapDataset.range(0, 100, 2).to_iter_dataset()
    b = chute.MapDataset.range(1, 100, 2).to_iter_dataset()
    it = _advanced(chute.IterDataset.mix([a, b], [3, 1]), 1)
    _refused(
        it,
        _edited(it, ("position",), 10**30),
        re.escape(
            f"state['position'] = 1000000000000000000000000000000 is out of range "
            f"[0, {sys.maxsize}]"
        ),
    )
    assert [next(it) for _ in range(4)] == [2, 4, 1, 6]


def test_mix_moves_no_component_when_a_later_one_refuses_its_state():
    a = chute.MapDataset.range(0, 100, 2).to_iter_dataset()
    b = chute.MapDataset.range(1, 100, 2).to_iter_dataset()
    it = _advanced(chute.IterDataset.mix([a, b], [3, 1]), 5)
    state = _edited(it, ("components",), [{"position": 0}, {"position": 10**6}])
    _refused(it, state, re.escape("state['position'] = 1000000 is out of range [0, 50]"))
    assert [next(it) for _ in range(3)] == [8, 10, 3]


def test_window_shuffle_refuses_a_window_no_stream_reaches():
    it = _advanced(chute.MapDataset.range(10).to_iter_dataset().window_shuffle(4, seed=0), 1)
    limit = sys.maxsize // 4
    _refused(
        it,
        _edited(it, ("window",), 2**63),
        re.escape(f"state['window'] = {2**63} is out of range [0, {limit}]"),
    )
    _refused(
        it, _edited(it, ("offset",), 5), re.escape("state['offset'] = 5 is out of range [0, 4]")
    )
    _refused(it, {**it.get_state(), "extra": 1}, re.escape("unknown ['extra']"))


def _skipping(steps: int) -> Any:
    def bad(x: int) -> int:
        if x % 3 == 0:
            raise ValueError(x)
        return x

    ds = chute.MapDataset.range(10).to_iter_dataset().map(bad).skip_errors(max_failures=5)
    return _advanced(ds, steps)


@pytest.mark.parametrize(
    ("skipped", "match"),
    [
        ([[7, [4], "x", "y"]], re.escape("stage 7 is out of range [0, 1]")),
        ([[1, [10**30], "x", "y"]], re.escape(f"origin [{10**30}]: its ints are in [0, ")),
        ([[1, [-1], "x", "y"]], re.escape("origin [-1]: its ints are in [0, ")),
        ([[1, [], "x", "y"]], re.escape("origin []: its ints are in [0, ")),
        ([[1, [True], "x", "y"]], re.escape("origin [True]")),
        ([[1, [4], "x", "y"], [1, [4], "x", "y"]], "is skipped twice"),
        ([[1, [4], "x", "y"]] * 3, re.escape("lists 3 skipped elements, more than the 2")),
    ],
)
def test_skip_errors_checks_the_skipped_elements(skipped, match):
    it = _skipping(3)
    _refused(it, _edited(it, ("errors", "skipped"), skipped), match)
    assert list(it) == [5, 7, 8]
    assert it.failures == 4


def test_skip_errors_changes_no_count_when_the_pipeline_refuses_its_state():
    it = _skipping(3)
    state = _edited(it, ("errors", "failures"), 4)
    state["parent"]["parent"]["position"] = 11
    _refused(it, state, re.escape("state['position'] = 11 is out of range [0, 10]"))
    assert it.failures == 2


def test_mp_prefetch_refuses_an_offset_past_the_outputs_before_running_any():
    calls: list[int] = []

    def count(x: int) -> int:
        calls.append(x)
        return x

    ds = chute.MapDataset.range(5000).to_iter_dataset().map(count).mp_prefetch(num_workers=0)
    it = iter(ds)
    _refused(
        it,
        {"position": 0, "offset": 10**9},
        re.escape("state['offset'] = 1000000000 is out of range [0, 5000]"),
    )
    _refused(
        it,
        {"position": 4000, "offset": 1001},
        re.escape("state['offset'] = 1001 is out of range [0, 1000]"),
    )
    assert calls == []
    assert next(it) == 0


# --- every int of a real state, out of range -------------------------------------------


def _pipelines() -> dict[str, Any]:
    ds = chute.MapDataset.range(12).to_iter_dataset()
    other = chute.MapDataset.range(100, 108).to_iter_dataset()
    return {
        "repeat": lambda: ds.repeat(2),
        "flat_map": lambda: ds.flat_map(lambda x: [x, -x]),
        "window_shuffle": lambda: ds.window_shuffle(5, seed=1),
        "mix": lambda: chute.IterDataset.mix([ds, other], [2, 1]),
        "batch": lambda: ds.batch(5),
        "filter": lambda: ds.filter(lambda x: x % 3),
        "limit": lambda: ds.limit(7),
        "concatenate": lambda: chute.IterDataset.concatenate([ds, other]),
        "interleave": lambda: chute.IterDataset.interleave([ds, other], cycle_length=2),
        "prefetch": lambda: ds.map(lambda x: x + 1).prefetch(2),
        "mp_prefetch": lambda: ds.map(lambda x: x + 1).mp_prefetch(num_workers=0, chunk_size=4),
        "mp_batch": lambda: ds.mp_prefetch(num_workers=0, chunk_size=4).batch(3),
        "zip": lambda: chute.IterDataset.zip(ds, other),
        "cache": lambda: ds.cache().repeat(2),
        "rebatch": lambda: ds.batch(5).rebatch(3),
        "unbatch": lambda: ds.batch(5).unbatch(),
        "map_with_index": lambda: ds.map_with_index(lambda i, x: i * x),
        "first_fit": lambda: _sequences(ds).pack(6, num_packing_bins=2),
        "concat_split": lambda: _sequences(ds).pack(5, method="concat_split"),
        "skip_errors": lambda: ds.map(_fails_at_multiples_of_4).skip_errors(max_failures=9),
    }


def _sequences(ds: chute.IterDataset[int]) -> chute.IterDataset[dict[str, Any]]:
    return ds.map(lambda x: {"t": np.arange(x % 4 + 1)})


def _fails_at_multiples_of_4(x: int) -> int:
    if x % 4 == 0:
        raise ValueError(x)
    return x


def _int_paths(state: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of the ints (not bools) in a state."""
    if isinstance(state, dict):
        return [p for key, value in state.items() for p in _int_paths(value, (*path, key))]
    if isinstance(state, list):
        return [p for index, value in enumerate(state) for p in _int_paths(value, (*path, index))]
    return [path] if isinstance(state, int) and not isinstance(state, bool) else []


_BAD = st.one_of(
    st.integers(max_value=-1),
    st.integers(min_value=sys.maxsize + 1),
    st.sampled_from([True, False, 1.0, "1", None, [1]]),
)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(_pipelines())), st.integers(0, 20), st.data())
def test_an_out_of_range_int_anywhere_in_a_state_is_refused(name, steps, data):
    make = _pipelines()[name]
    it = iter(make())
    for _ in range(steps):
        if next(it, None) is None:
            break
    paths = _int_paths(it.get_state())
    if not paths:
        return
    path = data.draw(st.sampled_from(paths), label="path")
    bad = data.draw(_BAD, label="value")
    _refused(it, _edited(it, path, bad), r"state\[")
    # The iterator went on as if nothing had happened; an in-range state still resumes.
    rest = list(it)
    restored = iter(make())
    restored.set_state(json.loads(json.dumps(_state_after(make, steps))))
    assert_trees_equal(list(restored), rest)


def _dict_paths(state: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of the dicts in a state (the state itself first)."""
    if isinstance(state, dict):
        children = [p for key, value in state.items() for p in _dict_paths(value, (*path, key))]
        return [path, *children]
    if isinstance(state, list):
        return [p for index, value in enumerate(state) for p in _dict_paths(value, (*path, index))]
    return []


_DERIVED = {"through", "span", "at"}
"""Keys a state may lack: derived from the others (or read only by resharding), and
missing from older versions'."""


def test_a_worker_state_without_its_derived_through_resumes_the_same():
    make = _pipelines()["mp_batch"]
    state = _state_after(make, 3)
    assert "through" in state["parent"]
    rest = list(_advanced_to(make, state))
    del state["parent"]["through"]
    assert_trees_equal(list(_advanced_to(make, state)), rest)


def _advanced_to(make: Any, state: Any) -> Any:
    it = iter(make())
    it.set_state(state)
    return it


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(_pipelines())), st.integers(0, 20), st.data())
def test_a_missing_or_unknown_key_anywhere_in_a_state_is_refused(name, steps, data):
    it = iter(_pipelines()[name]())
    for _ in range(steps):
        if next(it, None) is None:
            break
    state = copy.deepcopy(it.get_state())
    path = data.draw(st.sampled_from(_dict_paths(state)), label="path")
    inner = state
    for key in path:
        inner = inner[key]
    required = sorted(set(inner) - _DERIVED)
    if required and data.draw(st.booleans(), label="drop a key"):
        del inner[data.draw(st.sampled_from(required), label="key")]
    else:
        inner["unknown"] = 0
    _refused(it, state, r"missing|unknown|has no|is \{'failures'|of a filled cache|malformed slot")


def _state_after(make: Any, steps: int) -> Any:
    it = iter(make())
    for _ in range(steps):
        if next(it, None) is None:
            break
    return it.get_state()


@pytest.mark.parametrize("name", sorted(_pipelines()))
def test_the_checked_pipelines_still_resume_exactly(name):
    assert_resumes(lambda: iter(_pipelines()[name]()), every=3)
