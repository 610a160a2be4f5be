import itertools
import pickle
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_core import DROPPED, LengthOverflowError, RecordIndexError
from chute_samplers import (
    ENDLESS,
    MapNode,
    MixMap,
    MixSchedule,
    Permutation,
    RepeatMap,
    SelectFromMap,
    SequentialIter,
    ShardMap,
    ShardOptions,
    ShuffleMap,
    SliceMap,
)
from chute_samplers._schedule import MAX_PERIOD
from chute_sources import RangeSource, SequenceSource, Source


def _flat(lists):
    return list(itertools.chain.from_iterable(lists))


# --- RepeatMap ---------------------------------------------------------------------------


def test_repeat_repeats_and_endless_has_maxsize_length():
    node = RepeatMap(RangeSource(3), num_epochs=2)
    assert list(node) == [0, 1, 2, 0, 1, 2] and len(node) == 6
    endless = RepeatMap(RangeSource(3), None)
    assert len(endless) == ENDLESS == sys.maxsize
    assert endless[10**15] == 10**15 % 3
    assert len(RepeatMap(RangeSource(3), 0)) == 0
    assert len(RepeatMap(RangeSource(0), None)) == 0
    assert len(RepeatMap(endless, 5)) == ENDLESS  # Endless stays endless.
    with pytest.raises(LengthOverflowError, match=r"^RepeatMap \(repeat\): 3 elements x "):
        RepeatMap(RangeSource(3), sys.maxsize // 2)


@pytest.mark.parametrize(
    ("num_epochs", "error", "match"),
    [(-1, ValueError, "num_epochs must be >= 0"), (1.5, TypeError, "num_epochs must be an int")],
)
def test_repeat_rejects_bad_num_epochs(num_epochs, error, match):
    with pytest.raises(error, match=match):
        RepeatMap(RangeSource(3), num_epochs)


# --- ShuffleMap and epochs ----------------------------------------------------------------


def test_shuffle_under_repeat_reshuffles_every_epoch():
    node = RepeatMap(ShuffleMap(RangeSource(20), seed=1), num_epochs=4)
    epochs = [list(node)[20 * e : 20 * (e + 1)] for e in range(4)]
    assert all(sorted(epoch) == list(range(20)) for epoch in epochs)
    assert len({tuple(epoch) for epoch in epochs}) == 4


@pytest.mark.parametrize("num_epochs", [1, 3])
def test_shuffle_over_repeat_equals_repeat_over_shuffle(num_epochs):
    source = RangeSource(13)
    a = ShuffleMap(RepeatMap(source, num_epochs), seed=8)
    b = RepeatMap(ShuffleMap(source, seed=8), num_epochs)
    assert list(a) == list(b)


def test_shuffle_over_endless_repeat_keeps_epochs_apart_and_equals_the_other_order():
    a = ShuffleMap(RepeatMap(RangeSource(9), None), seed=3)
    b = RepeatMap(ShuffleMap(RangeSource(9), seed=3), None)
    assert a.__getitems__(range(90)) == b.__getitems__(range(90))
    for epoch in range(10):
        assert sorted(a.__getitems__(range(9 * epoch, 9 * epoch + 9))) == list(range(9))
    far = 9 * 10**12
    assert sorted(a.__getitems__(range(far, far + 9))) == list(range(9))


def test_nested_repeats_give_every_pass_its_own_permutation():
    inner = ShuffleMap(RangeSource(10), seed=2)
    node = RepeatMap(RepeatMap(inner, 2), 3)
    passes = [tuple(node.__getitems__(range(10 * p, 10 * p + 10))) for p in range(6)]
    assert len(set(passes)) == 6
    flat = ShuffleMap(RepeatMap(RepeatMap(RangeSource(10), 2), 3), seed=2)
    assert list(flat) == list(node)


def test_two_shuffles_with_different_seeds_differ():
    assert list(ShuffleMap(RangeSource(50), 1)) != list(ShuffleMap(RangeSource(50), 2))


def test_shuffle_of_a_plain_sequence_and_empty_dataset():
    assert sorted(ShuffleMap(["a", "b", "c"], seed=0)) == ["a", "b", "c"]
    assert list(ShuffleMap([], seed=0)) == []


@pytest.mark.parametrize(
    ("seed", "error"), [(-1, ValueError), (None, TypeError), (2**64, ValueError)]
)
def test_shuffle_rejects_bad_seeds(seed, error):
    with pytest.raises(error, match="seed"):
        ShuffleMap(RangeSource(3), seed)


# --- SliceMap ----------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    size=st.integers(0, 30),
    start=st.none() | st.integers(-40, 40),
    stop=st.none() | st.integers(-40, 40),
    step=st.none() | st.integers(-7, 7).filter(bool),
    second=st.none() | st.integers(-5, 5).filter(bool),
)
def test_slices_follow_python_semantics_including_negative_steps(size, start, stop, step, second):
    data = list(range(100, 100 + size))
    node = SliceMap(data, slice(start, stop, step))
    assert list(node) == data[start:stop:step]
    assert list(node[::second]) == data[start:stop:step][::second]
    assert isinstance(node[::second], SliceMap) and node[::second].parent is data


def test_slice_step_zero_and_bad_bounds_raise():
    with pytest.raises(ValueError, match="step must not be 0"):
        SliceMap(RangeSource(5), slice(0, 5, 0))
    with pytest.raises(TypeError, match=r"^SliceMap: slice start must be an int, got str"):
        SliceMap(RangeSource(5), slice("a", 3))
    with pytest.raises(TypeError, match="expected a slice"):
        SliceMap(RangeSource(5), 3)  # type: ignore[arg-type]


def test_repeating_a_slice_of_a_shuffle_yields_only_the_slice_grain_issue_1200():
    shuffled = ShuffleMap(RangeSource(100), seed=0)
    train = shuffled[:80]
    held_out = set(shuffled[80:])
    repeated = RepeatMap(train, num_epochs=5)
    for epoch in range(5):
        records = repeated.__getitems__(range(80 * epoch, 80 * (epoch + 1)))
        assert set(records) == set(train) and not set(records) & held_out


def test_shuffling_a_repeated_slice_reshuffles_only_the_slice():
    train = ShuffleMap(RangeSource(100), seed=0)[10:50]
    node = RepeatMap(ShuffleMap(train, seed=1), 3)
    epochs = [node.__getitems__(range(40 * e, 40 * e + 40)) for e in range(3)]
    assert all(sorted(e) == sorted(train) for e in epochs)
    assert epochs[0] != epochs[1]


# --- ShardMap ----------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(size=st.integers(0, 40), count=st.integers(1, 6), drop=st.booleans())
def test_shards_are_strided_disjoint_and_cover(size, count, drop):
    data = list(range(size))
    shards = [list(ShardMap(data, i, count, drop)) for i in range(count)]
    if drop:
        assert all(len(s) == size // count for s in shards)
        assert sorted(_flat(shards)) == data[: size // count * count]
    else:
        assert shards == [data[i::count] for i in range(count)]
        assert sorted(_flat(shards)) == data
    flat = _flat(shards)
    assert len(flat) == len(set(flat))


def test_shards_of_a_repeated_shuffle_are_disjoint_per_epoch_and_change_across_epochs():
    node = RepeatMap(ShuffleMap(RangeSource(40), seed=6), 3)
    shards = [ShardMap(node, i, 4) for i in range(4)]
    for epoch in range(3):
        parts = [s.__getitems__(range(10 * epoch, 10 * epoch + 10)) for s in shards]
        assert sorted(_flat(parts)) == list(range(40))
    assert set(shards[0].__getitems__(range(10))) != set(shards[0].__getitems__(range(10, 20)))
    reshuffled = ShuffleMap(shards[0], seed=1)  # Shard epochs are 40 / 4 = 10 long.
    assert all(
        sorted(reshuffled.__getitems__(range(10 * e, 10 * e + 10)))
        == sorted(shards[0].__getitems__(range(10 * e, 10 * e + 10)))
        for e in range(3)
    )


def test_shard_from_options_and_errors():
    assert list(ShardMap.from_options(RangeSource(5), ShardOptions(1, 2))) == [1, 3]
    with pytest.raises(ValueError, match="shard_index must be < shard_count"):
        ShardMap(RangeSource(5), 2, 2)
    with pytest.raises(ValueError, match="shard_count must be >= 1"):
        ShardMap(RangeSource(5), 0, 0)
    with pytest.raises(TypeError, match="drop_remainder must be a bool"):
        ShardMap(RangeSource(5), 0, 2, "no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ShardOptions"):
        ShardMap.from_options(RangeSource(5), (0, 1))  # type: ignore[arg-type]


# --- MixMap ------------------------------------------------------------------------------


def _assert_prefixes_within_one(components, shares):
    k = len(shares)
    counts = np.cumsum(components[:, None] == np.arange(k), axis=0)
    p = np.arange(1, len(components) + 1)[:, None]
    deviation = np.abs(counts - p * np.asarray(shares, dtype=float)[None, :])
    assert deviation.max() < 1 - 1e-9, deviation.max()


@settings(max_examples=120, deadline=None)
@given(weights=st.lists(st.integers(1, 40), min_size=1, max_size=6))
def test_mix_counts_stay_within_one_element_of_integer_weights_in_every_prefix(weights):
    schedule = MixSchedule(weights)
    total = sum(weights)
    components, _ = schedule.locate(np.arange(2 * schedule.period + 7))
    _assert_prefixes_within_one(components, [Fraction(w, total) for w in weights])


@settings(max_examples=80, deadline=None)
@given(
    weights=st.lists(
        st.floats(0.01, 100, allow_nan=False).map(lambda x: round(x, 2)).filter(lambda x: x > 0),
        min_size=1,
        max_size=5,
    )
)
def test_mix_counts_stay_within_one_element_of_decimal_weights(weights):
    schedule = MixSchedule(weights)
    total = sum(weights)
    positions = np.arange(min(3 * schedule.period, 20_000))
    _assert_prefixes_within_one(schedule.locate(positions)[0], [w / total for w in weights])


def test_mix_with_weights_needing_a_huge_period_rounds_them_and_keeps_the_promise():
    weights = [1, 10**6, 3**13]
    schedule = MixSchedule(weights)
    assert schedule.period <= MAX_PERIOD and min(schedule.counts) >= 1
    components, _ = schedule.locate(np.arange(schedule.period + 100))
    _assert_prefixes_within_one(components, [c / schedule.period for c in schedule.counts])


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 30), min_size=1, max_size=4),
    data=st.data(),
)
def test_mix_reads_each_component_in_order_and_stops_before_exhausting_one(lengths, data):
    weights = data.draw(st.lists(st.integers(1, 5), min_size=len(lengths), max_size=len(lengths)))
    parents = [[(j, i) for i in range(n)] for j, n in enumerate(lengths)]
    node = MixMap(parents, weights)
    elements = list(node)
    for j in range(len(lengths)):
        taken = [e for e in elements if e[0] == j]
        assert taken == parents[j][: len(taken)]
    # The next position would need an element some component does not have.
    components, occurrences = node.schedule.locate(np.array([len(node)]))
    assert occurrences[0] >= lengths[components[0]]


def test_mix_of_endless_components_is_endless_and_mixes_shuffled_epochs():
    a = RepeatMap(ShuffleMap(RangeSource(4), seed=42), None)
    b = RepeatMap(ShuffleMap(RangeSource(100, 110), seed=43), None)
    node = MixMap([a, b], weights=[1, 2])
    assert len(node) == ENDLESS
    first = node.__getitems__(range(30))
    assert sum(x < 100 for x in first) == 10
    assert node[10**15] == node.__getitems__([10**15])[0]


def test_mix_passes_epochs_to_its_components_under_a_repeat():
    mix = MixMap([ShuffleMap(RangeSource(6), 1), ShuffleMap(RangeSource(10, 16), 2)])
    node = RepeatMap(mix, 2)
    first, second = node.__getitems__(range(12)), node.__getitems__(range(12, 24))
    assert sorted(first) == sorted(second) and first != second


@pytest.mark.parametrize(
    ("weights", "error", "match"),
    [
        ([1, 0], ValueError, r"weights\[1\] must be positive and finite"),
        ([1, -2], ValueError, "positive and finite"),
        ([1, float("nan")], ValueError, "positive and finite"),
        ([float("inf"), 1], ValueError, "positive and finite"),
        ([1], ValueError, "got 1 weights for 2 components"),
        ([1, "2"], TypeError, "must be a real number"),
        ([True, 1], TypeError, "must be a real number"),
        ("ab", TypeError, "weights must be a sequence"),
    ],
)
def test_mix_rejects_bad_weights(weights, error, match):
    with pytest.raises(error, match=match):
        MixMap([RangeSource(3), RangeSource(3)], weights)


def test_mix_rejects_bad_parents():
    with pytest.raises(ValueError, match="at least one"):
        MixMap([])
    with pytest.raises(TypeError, match=r"parents\[1\] must be a random-access dataset"):
        MixMap([RangeSource(3), 5])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="parents must be a sequence"):
        MixMap(RangeSource(3))  # type: ignore[arg-type]


# --- SelectFromMap -----------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(selector=st.lists(st.integers(0, 2), max_size=40))
def test_select_from_reads_components_in_order(selector):
    parents = [[(j, i) for i in range(40)] for j in range(3)]
    node = SelectFromMap(parents, selector)
    seen = [0, 0, 0]
    expected = []
    for j in selector:
        expected.append((j, seen[j]))
        seen[j] += 1
    assert list(node) == expected and len(node) == len(selector)


def test_select_from_errors():
    with pytest.raises(ValueError, match="names component 2"):
        SelectFromMap([[1], [2]], [0, 2])
    with pytest.raises(ValueError, match="takes 2 elements from component 0"):
        SelectFromMap([[1], [2]], [0, 0])
    with pytest.raises(TypeError, match="1-d sequence"):
        SelectFromMap([[1], [2]], [[0]])
    with pytest.raises(TypeError, match="1-d sequence"):
        SelectFromMap([[1], [2]], [0.0])
    with pytest.raises(ValueError, match="at least one"):
        SelectFromMap([], [])
    node = SelectFromMap([[1], [2]], np.array([1, 0]))
    assert list(node) == [2, 1] and node.selector.tolist() == [1, 0]
    with pytest.raises(ValueError):
        node.selector[0] = 0


# --- MapNode behaviour shared by all nodes ---------------------------------------------------


def test_positions_are_checked_and_negative_ones_count_from_the_end():
    node = ShuffleMap(SequenceSource(list("abcdef")), seed=3)
    assert node[-1] == list(node)[-1]
    everything = list(node)
    assert node.__getitems__([-1, 0]) == [everything[-1], everything[0]]
    assert node.__getitems__(np.array([], dtype=np.int64)) == []
    with pytest.raises(RecordIndexError, match="out of range"):
        node[6]
    with pytest.raises(RecordIndexError, match="out of range"):
        node.__getitems__([0, -7])
    with pytest.raises(TypeError, match="positions are integers or slices"):
        node["a"]  # type: ignore[call-overload]


def test_nodes_pickle_and_read_the_same_afterwards():
    node = MixMap(
        [ShuffleMap(RepeatMap(RangeSource(5), 2), 1), ShardMap(RangeSource(20), 1, 2)],
        [1, 3],
    )[1:30:2]
    clone = pickle.loads(pickle.dumps(node))
    assert list(clone) == list(node)
    assert isinstance(clone, MapNode)


def test_shuffles_read_in_order_in_small_reads_give_the_permutation():
    # In-order small reads are served from a window computed ahead: the values must be
    # those of the permutation however the reads are cut, interleaved or restarted.
    size = 20_000
    expected = [Permutation(size, 9)[i] for i in range(size)]
    node = ShuffleMap(RangeSource(size), 9)
    assert list(SequentialIter(node, 256)) == expected
    for cut in (1, 3, 100, 257, 4000):
        reads = [node.__getitems__(range(s, min(s + cut, size))) for s in range(0, size, cut)]
        assert _flat(reads) == expected
    one, two = SequentialIter(node, 64), SequentialIter(node, 7)
    two.set_state({"position": 15_000})
    pairs = [(next(one), next(two)) for _ in range(5000)]
    assert [a for a, _ in pairs] == expected[:5000]
    assert [b for _, b in pairs] == expected[15_000:]
    assert [node[i] for i in range(19_990, 20_000)] + [node[3]] == [*expected[19990:], expected[3]]
    clone = pickle.loads(pickle.dumps(node))
    assert list(SequentialIter(clone, 5)) == expected


def test_windows_of_a_shuffle_under_a_repeat_belong_to_their_epoch():
    node = RepeatMap(ShuffleMap(RangeSource(5000), 4), 3)
    epochs = [[Permutation(5000, 4, e)[i] for i in range(5000)] for e in range(3)]
    assert list(SequentialIter(node, 100)) == _flat(epochs)
    over = ShuffleMap(RepeatMap(RangeSource(5000), 3), 4)
    assert list(SequentialIter(over, 100)) == _flat(epochs)


def test_sources_that_define_their_own_getitems_get_a_list_of_ints():
    class Listed(Source):
        def __len__(self):
            return 10

        def _read(self, index):
            return index

        def __getitems__(self, keys):
            assert type(keys) is list and all(type(k) is int for k in keys)
            return [k * 2 for k in keys]

    assert list(SequentialIter(ShuffleMap(Listed(), 1))) == [
        2 * Permutation(10, 1)[i] for i in range(10)
    ]


def test_nodes_reject_non_datasets():
    for make in (
        lambda: ShuffleMap(5, 0),  # type: ignore[arg-type]
        lambda: RepeatMap("abc", 2),  # type: ignore[arg-type]
        lambda: SliceMap(None, slice(1)),  # type: ignore[arg-type]
        lambda: ShardMap({}, 0, 1),  # type: ignore[arg-type]
    ):
        with pytest.raises(TypeError, match="must be a random-access dataset"):
            make()


def test_reprs_name_the_parameters():
    source = RangeSource(3)
    assert repr(ShuffleMap(source, 1)) == f"ShuffleMap({source!r}, seed=1)"
    assert repr(RepeatMap([1], None)) == "RepeatMap([1], num_epochs=None)"
    assert repr(SliceMap([1, 2], slice(None, None, -1))) == "SliceMap([1, 2], range(1, -1, -1))"
    assert "shard_index=0, shard_count=2" in repr(ShardMap([1, 2], 0, 2))


class _Holes(MapNode):
    """A node whose odd positions hold DROPPED, as a filter's do."""

    def __init__(self, size):
        self._size = size

    def __len__(self):
        return self._size

    def get_many(self, positions, epochs):
        return [DROPPED if p % 2 else int(p) for p in positions.tolist()]


def test_dropped_positions_pass_through_nodes_and_iteration_skips_them():
    node = RepeatMap(_Holes(5), 2)
    assert node.__getitems__([0, 1]) == [0, DROPPED]
    assert list(node) == [0, 2, 4, 0, 2, 4]
    assert sorted(ShuffleMap(_Holes(6), 1)) == [0, 2, 4]
