"""Grain's interleave order and `get_next_index` / `set_next_index`, against Grain itself.

Grain 0.2.18 documents the interleave as a round robin over `cycle_length` open
iterators refilled in order, and next indices as positions in an iterator's own
elements (batches after a batch). Each test runs the same pipeline through Grain (a
test-only peer) and `chute.grain`, and compares the elements exactly.
"""

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chute
import chute.grain as cgrain

grain = pytest.importorskip("grain")

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_GRAIN_READ = grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)


def _plain(elements):
    return [_leaves(e) for e in elements]


def _leaves(element):
    if isinstance(element, tuple):
        return tuple(_leaves(part) for part in element)
    return element.tolist() if isinstance(element, np.ndarray) else element


def _files(lengths):
    return [list(range(100 * f, 100 * f + n)) for f, n in enumerate(lengths)]


def _interleaved(lib, lengths, cycle_length):
    read = {"read_options": _GRAIN_READ} if lib is grain else {}
    parts = [lib.MapDataset.source(f).to_iter_dataset(**read) for f in _files(lengths)]
    return lib.experimental.InterleaveIterDataset(parts, cycle_length=cycle_length)


@SETTINGS
@given(
    lengths=st.lists(st.integers(1, 5), min_size=1, max_size=6),
    cycle_length=st.integers(1, 4),
    data=st.data(),
)
def test_interleave_order_and_order_after_restore_are_grains(lengths, cycle_length, data):
    ours = _interleaved(cgrain, lengths, cycle_length)
    theirs = _interleaved(grain, lengths, cycle_length)
    expected = list(theirs)
    assert list(ours) == expected
    stop = data.draw(st.integers(0, len(expected)), label="stop")
    first = iter(ours)
    head = [next(first) for _ in range(stop)]
    resumed = iter(ours)
    resumed.set_state(first.get_state())
    assert head + list(resumed) == expected


def test_interleave_refills_a_slot_when_its_turn_comes_back():
    # Slot 1's file ends after one element: slot 0 is read again before file 2 opens.
    files = [["a0", "a1", "a2"], ["b0"], ["c0", "c1"]]
    parts = [chute.MapDataset.source(f).to_iter_dataset() for f in files]
    assert list(chute.IterDataset.interleave(parts, cycle_length=2)) == [
        "a0",
        "b0",
        "a1",
        "a2",
        "c0",
        "c1",
    ]


def _pipelines(lib):
    """Pipelines whose next index Grain defines, by name."""
    read = {"read_options": _GRAIN_READ} if lib is grain else {}
    base = lib.MapDataset.range(10).to_iter_dataset(**read)
    batched = lib.MapDataset.range(10).to_iter_dataset(**read).batch(4)
    return {
        "reader": base,
        "map": base.map(lambda x: x * 2),
        "batch": base.batch(3),
        "batch_drop": base.batch(3, drop_remainder=True),
        "batch_of_batch": base.batch(2).batch(2),
        "map_with_index": base.map_with_index(lambda i, x: (i, x)).map(lambda p: p[0] * 100 + p[1]),
        "map_dataset_batch": lib.MapDataset.range(10).batch(3).to_iter_dataset(**read),
        "interleave_one": lib.experimental.InterleaveIterDataset([base], cycle_length=1),
        "interleave_one_batched": lib.experimental.InterleaveIterDataset(
            [batched], cycle_length=1
        ).batch(2),
    }


@pytest.mark.parametrize("name", list(_pipelines(cgrain)))
def test_next_index_after_each_step_and_every_move_are_grains(name):
    ours, theirs = _pipelines(cgrain)[name], _pipelines(grain)[name]
    total = len(list(theirs))
    # Where reading the last element reaches the end of an interleave's input, Grain
    # forgets the position (0, and an AssertionError on a move): chute refuses the
    # question and moves (test below), so that case is left out here.
    last = total if name != "interleave_one_batched" else total - 1
    for steps, target in itertools.product(range(last + 1), range(total + 1)):
        mine, peer = iter(ours), iter(theirs)
        for _ in range(steps):
            np.testing.assert_array_equal(next(mine), next(peer))
        got = cgrain.experimental.get_next_index(mine)
        assert got == grain.experimental.get_next_index(peer), (steps, target)
        assert _moved_to(cgrain, mine, target) == _moved_to(grain, peer, target), (steps, target)


def _moved_to(lib, iterator, target):
    """The elements after moving to `target`, or "IndexError" where it is past the end."""
    try:
        lib.experimental.set_next_index(iterator, target)
    except IndexError:
        return "IndexError"
    return _plain(iterator)


def test_set_next_index_moves_random_draws_and_workers_with_the_position():
    ds = chute.MapDataset.range(12).to_iter_dataset().seed(3)
    ds = ds.random_map(lambda x, rng: (x, int(rng.integers(1000)))).batch(2)
    whole = _plain(ds)
    for target in range(len(whole) + 1):
        it = iter(ds)
        cgrain.experimental.set_next_index(it, target)
        assert _plain(it) == whole[target:]
    workers = (
        chute.MapDataset.range(12)
        .to_iter_dataset()
        .map(abs)
        .batch(2)
        .mp_prefetch(chute.MultiprocessingOptions(num_workers=2))
    )
    with iter(workers) as it:
        next(it)
        assert cgrain.experimental.get_next_index(it) == 1
        cgrain.experimental.set_next_index(it, 4)
        assert _plain(it) == [[8, 9], [10, 11]]


def test_next_index_refusals_match_grains_error_types():
    base = cgrain.MapDataset.range(10).to_iter_dataset()
    with pytest.raises(NotImplementedError, match="the stage 'filter' does not yield one"):
        cgrain.experimental.get_next_index(iter(base.filter(lambda x: x > 2)))
    two = cgrain.experimental.InterleaveIterDataset([base, base], cycle_length=1)
    with pytest.raises(NotImplementedError, match="an interleave of 2 datasets"):
        cgrain.experimental.set_next_index(iter(two), 1)
    with pytest.raises(IndexError, match="index must be >= 0, got -1"):
        cgrain.experimental.set_next_index(iter(base), -1)
    with pytest.raises(IndexError, match=r"index 11 is out of range: .*out of range \[0, 10\]"):
        cgrain.experimental.set_next_index(iter(base), 11)
    with pytest.raises(TypeError, match="index must be an int, got True"):
        cgrain.experimental.set_next_index(iter(base), True)
    with pytest.raises(NotImplementedError, match="list_iterator is not an iterator of a chute"):
        cgrain.experimental.get_next_index(iter([1, 2]))


def test_an_interleave_whose_input_ended_has_no_index_but_moves_back_into_it():
    parts = [chute.MapDataset.range(10).to_iter_dataset().batch(4)]
    ds = cgrain.experimental.InterleaveIterDataset(parts, cycle_length=1).batch(2)
    it = iter(ds)
    assert [b.shape for b in it] == [(2, 4), (1, 2)]
    with pytest.raises(NotImplementedError, match="the interleave's one input has ended"):
        cgrain.experimental.get_next_index(it)
    cgrain.experimental.set_next_index(it, 1)
    assert _plain(it) == [[[8, 9]]]
    fresh = iter(ds)
    assert cgrain.experimental.get_next_index(fresh) == 0
    cgrain.experimental.set_next_index(fresh, 1)
    assert cgrain.experimental.get_next_index(fresh) == 1
    assert _plain(fresh) == [[[8, 9]]]
