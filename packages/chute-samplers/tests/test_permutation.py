import pickle
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_core import RecordIndexError
from chute_samplers import Permutation
from chute_samplers._permutation import MAX_SIZE, TABLE_SIZE


def _edge_sizes():
    sizes = {1, 2, 3, 5, 7, 10, 100, 1000, TABLE_SIZE - 1, TABLE_SIZE, TABLE_SIZE + 1}
    for bits in range(1, 18):
        sizes.update({2**bits - 1, 2**bits, 2**bits + 1})
    return sorted(sizes)


@pytest.mark.parametrize("size", _edge_sizes())
def test_permutation_is_a_bijection_around_powers_of_two(size):
    for seed, epoch in [(0, 0), (12345, 7)]:
        values = Permutation(size, seed, epoch).take(np.arange(size))
        assert np.array_equal(np.sort(values), np.arange(size))


def test_65537_records_seed_0_is_a_permutation_where_grain_0_2_18_repeats_a_record():
    perm = Permutation(65537, seed=0)
    values = perm.take(np.arange(65537))
    assert np.unique(values).size == 65537
    assert values.min() == 0 and values.max() == 65536


@pytest.mark.parametrize("size", [2**20 - 1, 2**20 + 1])
def test_large_sizes_around_a_power_of_two_are_bijections(size):
    values = Permutation(size, seed=3, epoch=1).take(np.arange(size))
    assert np.array_equal(np.bincount(values, minlength=size), np.ones(size, dtype=np.int64))


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 20_000),
    seed=st.integers(0, 2**64 - 1),
    epoch=st.integers(0, 2**64 - 1),
)
def test_permutation_is_a_bijection_for_random_sizes_and_keys(size, seed, epoch):
    perm = Permutation(size, seed, epoch)
    values = perm.take(np.arange(size))
    assert np.array_equal(np.sort(values), np.arange(size))
    assert np.array_equal(perm.index_many(values), np.arange(size))


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(1, 2**63),
    seed=st.integers(0, 2**64 - 1),
    data=st.data(),
)
def test_scalar_and_vectorised_paths_agree_and_invert(size, seed, data):
    perm = Permutation(size, seed, epoch=data.draw(st.integers(0, 100)))
    positions = data.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=20))
    scalar = [perm[p] for p in positions]
    assert perm.take(positions).tolist() == scalar
    assert perm.__getitems__(positions) == scalar
    assert all(0 <= v < size for v in scalar)
    assert [perm.index(v) for v in scalar] == positions
    assert perm.index_many(scalar).tolist() == positions


@pytest.mark.parametrize("size", [TABLE_SIZE, TABLE_SIZE + 1, 65537])
def test_scalar_loop_equals_vectorised_over_a_whole_permutation(size):
    perm = Permutation(size, seed=11, epoch=2)
    assert [perm[i] for i in range(size)] == perm.take(np.arange(size)).tolist()


def test_negative_positions_count_from_the_end():
    perm = Permutation(100, seed=1)
    assert perm[-1] == perm[99]
    assert perm.take([-1, -100]).tolist() == [perm[99], perm[0]]
    big = Permutation(MAX_SIZE, seed=1)
    assert big[-1] == big[MAX_SIZE - 1] == int(big.take([-1])[0])


def test_take_keeps_the_shape_and_accepts_empty_input():
    perm = Permutation(50, seed=2)
    grid = perm.take(np.arange(12).reshape(3, 4))
    assert grid.shape == (3, 4) and grid.dtype == np.int64
    assert perm.take([]).shape == (0,)
    assert Permutation(0, seed=0).take([]).shape == (0,)


def test_each_epoch_is_a_different_permutation():
    orders = {tuple(Permutation(1000, seed=5, epoch=e).take(np.arange(1000))) for e in range(20)}
    assert len(orders) == 20
    assert tuple(Permutation(1000, 6).take(np.arange(1000))) not in orders


def test_pinned_values_catch_an_accidental_change_of_the_cipher():
    assert Permutation(10, 0).take(range(10)).tolist() == [8, 2, 3, 1, 4, 7, 0, 6, 5, 9]
    assert Permutation(100000, 1, 2).take([0, 1, 2, 99999]).tolist() == [61487, 5292, 15230, 46939]
    assert Permutation(2**40, 3).take([0, 1]).tolist() == [665473454807, 125922842661]


def test_positions_are_uniform_over_epochs_chi_square():
    # Fixed seed: position of each record of a 10-element shuffle over 3000 epochs.
    # Under uniformity the statistic is chi-square with (10 - 1) ** 2 = 81 degrees of
    # freedom (mean 81, sd ~12.7); tolerance: 81 + 5 sd = 145.
    size, epochs = 10, 3000
    counts = np.zeros((size, size))
    for epoch in range(epochs):
        values = Permutation(size, seed=2024, epoch=epoch).take(np.arange(size))
        counts[values, np.arange(size)] += 1
    expected = epochs / size
    statistic = ((counts - expected) ** 2 / expected).sum()
    assert statistic < 145, statistic


def test_small_permutations_are_all_equally_likely_chi_square():
    # All 120 orders of 5 elements over 12000 epochs: chi-square with 119 degrees of
    # freedom (mean 119, sd ~15.4); tolerance 119 + 5 sd = 196. A Feistel network on the
    # 8-value domain alone scores ~800 here (it reaches an uneven subset of the orders),
    # which is why small sizes use a Fisher-Yates table.
    size, epochs = 5, 12000
    orders = np.array([Permutation(size, 77, e).take(np.arange(size)) for e in range(epochs)])
    codes = orders @ (size ** np.arange(size))
    _, counts = np.unique(codes, return_counts=True)
    assert counts.size == 120
    expected = epochs / 120
    statistic = ((counts - expected) ** 2 / expected).sum()
    assert statistic < 196, statistic


def test_positions_are_uniform_within_a_large_permutation():
    # Where do the records 0..99 of a 65537-record epoch land (in 10 bins), over 300
    # epochs: chi-square with 9 degrees of freedom per record row, summed over 100 rows
    # -> 900 dof (mean 900, sd ~42); tolerance 900 + 5 sd = 1110.
    size, bins = 65537, 10
    counts = np.zeros((100, bins))
    for epoch in range(300):
        positions = Permutation(size, seed=9, epoch=epoch).index_many(np.arange(100))
        counts[np.arange(100), positions * bins // size] += 1
    expected = counts.sum(axis=1, keepdims=True) / bins
    statistic = ((counts - expected) ** 2 / expected).sum()
    assert statistic < 1110, statistic
    values = Permutation(size, seed=9).take(np.arange(size))
    assert abs(np.corrcoef(np.arange(size), values)[0, 1]) < 0.02


def test_permutations_pickle_and_compare_by_parameters():
    perm = Permutation(77, seed=4, epoch=3)
    clone = pickle.loads(pickle.dumps(perm))
    assert clone == perm and hash(clone) == hash(perm)
    assert clone.take(range(77)).tolist() == perm.take(range(77)).tolist()
    assert perm != Permutation(77, seed=4, epoch=4)
    assert repr(perm) == "Permutation(size=77, seed=4, epoch=3)"
    assert (perm.size, perm.seed, perm.epoch, len(perm)) == (77, 4, 3, 77)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"size": -1, "seed": 0}, ValueError, "size must be >= 0"),
        ({"size": 2**63 + 1, "seed": 0}, ValueError, "size must be <="),
        ({"size": 1.5, "seed": 0}, TypeError, "size must be an int"),
        ({"size": 3, "seed": -1}, ValueError, "seed must be >= 0"),
        ({"size": 3, "seed": 2**64}, ValueError, "seed must be <="),
        ({"size": 3, "seed": True}, TypeError, "seed must be an int"),
        ({"size": 3, "seed": 0, "epoch": -2}, ValueError, "epoch must be >= 0"),
    ],
)
def test_bad_arguments_name_what_is_wrong(kwargs, error, match):
    with pytest.raises(error, match=match):
        Permutation(**kwargs)


def test_out_of_range_positions_raise_record_index_error():
    perm = Permutation(5, seed=0)
    big = Permutation(TABLE_SIZE + 10, seed=0)
    for p in (perm, big):
        with pytest.raises(RecordIndexError, match="out of range"):
            p[len(p)]
        with pytest.raises(RecordIndexError, match="out of range"):
            p.take([0, len(p)])
        with pytest.raises(RecordIndexError, match="out of range"):
            p.take([-len(p) - 1])
        with pytest.raises(RecordIndexError, match="out of range"):
            p.index(len(p))
    with pytest.raises(TypeError, match="integers"):
        perm.take([0.5])
    with pytest.raises(TypeError, match="integers"):
        perm["a"]  # type: ignore[index]
    with pytest.raises(RecordIndexError):
        Permutation(0, seed=0)[0]
    assert sys.maxsize < MAX_SIZE


@pytest.mark.parametrize("size", [TABLE_SIZE + 1, 2**16 + 1, 200_000, 2**20 + 1, 2**32, 2**32 + 1])
def test_many_lookups_give_the_same_values_as_few_and_as_the_scalar_path(size):
    # Few lookups compute the cipher round by round; after many, the rounds are looked
    # up in tables (sizes up to 2**32): every value must stay the same.
    rng = np.random.default_rng(size)
    for seed, epoch in [(0, 0), (2**64 - 1, 12345)]:
        perm = Permutation(size, seed, epoch)
        probe = rng.integers(0, size, 40)
        few = perm.take(probe)
        assert few.tolist() == [perm[int(i)] for i in probe]
        many = perm.take(rng.integers(0, size, 70_000))
        assert perm.take(probe).tolist() == few.tolist()
        assert perm.index_many(many).tolist() == [perm.index(int(v)) for v in many[:300]] + (
            perm.index_many(many[300:]).tolist()
        )
        assert np.array_equal(perm.take(perm.index_many(many)), many)


def test_pinned_values_hold_after_many_lookups_too():
    perm = Permutation(100000, 1, 2)
    values = perm.take(np.arange(100000))
    assert np.array_equal(np.sort(values), np.arange(100000))
    assert perm.take([0, 1, 2, 99999]).tolist() == [61487, 5292, 15230, 46939]
    assert values[[0, 1, 2, 99999]].tolist() == [61487, 5292, 15230, 46939]
