"""Units of work cut by measured cost: the output and the states never depend on the cut."""

from __future__ import annotations

import pytest

import chute
from chute_testing import assert_resumes
from chute_testing.execution import FailAt


def _keep(x):
    return x % 3 != 1


def _twice(x):
    return [x, x + 1000]


def _pipeline(workers, chunk_size=None):
    ds = (
        chute.MapDataset.range(300).shuffle(seed=2).to_iter_dataset().filter(_keep).flat_map(_twice)
    )
    return ds.mp_prefetch(num_workers=workers, chunk_size=chunk_size)


def test_adaptive_units_give_the_stream_of_the_grid_and_of_no_workers():
    expected = list(_pipeline(0))
    assert list(_pipeline(2)) == expected
    assert list(_pipeline(2, chunk_size=7)) == expected


def test_states_saved_with_one_cut_restore_with_any_other():
    expected = list(_pipeline(0))
    adaptive = lambda: iter(_pipeline(2))  # noqa: E731
    grid = lambda: iter(_pipeline(2, chunk_size=7))  # noqa: E731
    no_workers = lambda: iter(_pipeline(0))  # noqa: E731
    assert_resumes(adaptive, every=37, make_restored=[grid, no_workers], expected=expected)
    assert_resumes(grid, every=37, make_restored=[adaptive], expected=expected)


def test_a_state_inside_an_adaptive_unit_names_its_position():
    it = iter(_pipeline(2))
    for _ in range(5):
        next(it)
    state = it.get_state()
    # The filter made outputs and positions differ, and the 5th output is the first of its
    # element: the state says which element that is and how many of its outputs came.
    assert set(state) == {"position", "offset", "through", "at"}
    assert state["at"] == [state["through"], 1]
    rest = list(it)
    again = iter(_pipeline(2, chunk_size=64))
    again.set_state(state)
    assert list(again) == rest


def test_an_error_in_an_adaptive_unit_names_its_positions():
    ds = chute.MapDataset.range(400).to_iter_dataset().map(FailAt(150, KeyError))
    with pytest.raises(KeyError) as caught:
        list(ds.mp_prefetch(num_workers=2))
    notes = caught.value.__notes__
    assert any("on the element at position 150" in note for note in notes)
    assert any(
        (
            note.startswith("chute: raised in worker ")
            and " while running " in note
            and "150" in note
        )
        or (note.startswith("chute: raised in worker ") and "positions " in note)
        for note in notes
    )


def test_a_state_past_the_outputs_of_a_foreign_stream_is_refused():
    it = iter(_pipeline(2))
    it.set_state({"position": 299, "offset": 50})
    with pytest.raises(
        chute.InvalidStateError, match=r"goes \d+ outputs past the end of the stream"
    ):
        list(it)


def test_a_state_of_older_versions_restores_into_adaptive_units():
    # Older versions cut this pipeline into the planner's grid (19 positions for 300)
    # and saved {"chunk": c, "offset": k}: output k of the stream from position 19 * c.
    reference = iter(_pipeline(2, chunk_size=19))
    reference.set_state({"position": 3 * 19, "offset": 5})
    expected = list(reference)
    legacy = iter(_pipeline(2))
    legacy.set_state({"chunk": 3, "offset": 5})
    assert list(legacy) == expected
    zero = iter(_pipeline(0))
    zero.set_state({"chunk": 3, "offset": 5})
    assert list(zero) == expected
