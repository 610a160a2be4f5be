"""`ds[indices]` / `ds.slice(indices)`: positions selected by index, as NumPy's `take`.

Grain's newest `MapDataset.slice` accepts a sequence of indices or a `MapDataset` of
integers (fancy indexing); chute's `TakeMap` does it for `MapDataset`, and so for
`chute.grain`. Tests: the elements equal `[ds[i] for i in indices]` for any indices,
the selection is a fixed subset across epochs, it resumes exactly with any number of
workers, and bad indices are refused by name.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
import chute.grain as grain
from chute_testing import assert_resumes


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_elements_are_those_at_the_indices_in_their_order(data):
    length = data.draw(st.integers(1, 40), label="length")
    indices = data.draw(st.lists(st.integers(-length, length - 1), max_size=50), label="indices")
    ds = chute.MapDataset.range(length).map(lambda x: x * 10).shuffle(seed=3)
    expected = [ds[i] for i in indices]
    assert list(ds[indices]) == expected
    assert list(ds.slice(np.array(indices, dtype=np.int32))) == expected
    assert len(ds[indices]) == len(indices)
    assert list(ds[indices].to_iter_dataset()) == expected


def test_a_boolean_mask_and_a_dataset_of_indices_select_too():
    ds = chute.MapDataset.range(10)
    assert list(ds[np.arange(10) % 3 == 0]) == [0, 3, 6, 9]
    picked = chute.MapDataset.range(4).map(lambda i: 9 - 2 * i)
    assert list(ds[picked]) == [9, 7, 5, 3]
    assert list(ds.slice(picked)[1:3]) == [7, 5]


def test_the_selection_is_a_fixed_subset_across_epochs():
    ds = chute.MapDataset.range(20).shuffle(seed=1)
    taken = ds[[0, 5, 5, 19]]
    first = list(taken)
    assert list(taken.repeat(3)) == first * 3
    # Shuffling after the selection reshuffles the same records each epoch.
    epochs = list(taken.shuffle(seed=2).repeat(2))
    assert sorted(epochs[:4]) == sorted(epochs[4:]) == sorted(first)


def test_grains_spelling_selects_the_same():
    ds = grain.MapDataset.range(10).map(lambda x: x + 1)
    assert list(ds.slice([3, 1, -1])) == [4, 2, 10]
    assert list(ds[grain.MapDataset.range(2)]) == [1, 2]


def _rows(x):
    return np.full(4, x, np.int64)


@pytest.mark.parametrize("workers", [0, 2])
def test_it_resumes_exactly_mid_epoch_at_the_boundaries_and_with_other_worker_counts(workers):
    indices = np.random.default_rng(0).integers(-30, 30, size=45)
    base = chute.MapDataset.range(30).shuffle(seed=4)[indices].map(_rows)

    def make(count):
        stream = base.repeat(2).to_iter_dataset()
        stream = stream.mp_prefetch(chute.MultiprocessingOptions(num_workers=count))
        return iter(stream.batch(4))

    expected = [np.stack([np.full(4, base[i % 45][0]) for i in range(s, min(s + 4, 90))])
                for s in range(0, 90, 4)]  # fmt: skip
    assert_resumes(
        lambda: make(workers),
        epoch_length=len(expected) // 2,
        every=5,
        make_restored=[lambda: make(2 - workers)],
        expected=expected,
    )


def test_bad_indices_are_refused_by_name():
    ds = chute.MapDataset.range(10)
    with pytest.raises(chute.RecordIndexError, match=r"index 10 is out of range \[-10, 10\)"):
        ds[[1, 10]]
    with pytest.raises(IndexError, match="index -11"):
        ds[[-11]]
    with pytest.raises(chute.ArgumentTypeError, match=r"1-d sequence of integers.*float64"):
        ds[[1.5]]
    with pytest.raises(chute.ArgumentTypeError, match="shape \\(1, 2\\)"):
        ds[[[1, 2]]]
    with pytest.raises(chute.InvalidArgumentError, match=r"boolean mask must have .* length 10"):
        ds[[True, False]]
    lazy = ds[chute.MapDataset.range(3).map(lambda i: i * 6)]  # 12 is past the end.
    assert lazy[1] == 6
    with pytest.raises(chute.RecordIndexError, match="index \\(read from the dataset\\) 12"):
        lazy[2]
    with pytest.raises(chute.ArgumentTypeError, match="integers expected"):
        list(ds[chute.MapDataset.range(2).map(lambda i: "a")])


def test_the_description_fingerprints_the_selection():
    ds = chute.MapDataset.range(10)
    assert repr(ds[[1, 2]]) == repr(ds[[1, 2]])
    assert repr(ds[[1, 2]]) != repr(ds[[2, 1]])
    assert ".take(indices='2 positions, sha1 " in repr(ds[[1, 2]])
