"""The element ops as dataset nodes (random access) and as stream iterators."""

import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chute_core import DROPPED
from chute_samplers import RepeatMap, SequentialIter, ShuffleMap
from chute_testing import assert_resumes, assert_trees_equal
from chute_transforms import (
    BatchIter,
    BatchMap,
    FilterIter,
    FilterMap,
    FilterRatioError,
    FilterThresholds,
    FilterTransform,
    FilterWarning,
    FlatMapIter,
    FlatMapMap,
    FlatMapTransform,
    MapIter,
    MapMap,
    MapTransform,
    MapWithIndexIter,
    MapWithIndexMap,
    RandomMapIter,
    RandomMapMap,
    TransformTypeError,
)


class Square(MapTransform):
    def map(self, element):
        return element * element


class Even(FilterTransform):
    def filter(self, element):
        return element % 2 == 0


class Repeat(FlatMapTransform):
    max_fan_out = 3

    def flat_map(self, element):
        return [element] * (element % 4)


def noise(element, rng):
    return element + rng.integers(0, 1000)


# --- random access ----------------------------------------------------------------------


def test_map_and_map_with_index_give_exact_sequences():
    assert list(MapMap(range(5), Square())) == [0, 1, 4, 9, 16]
    assert MapMap(range(5), lambda x: -x).__getitems__([4, 0, 4]) == [-4, 0, -4]
    assert list(MapWithIndexMap(["a", "b", "c"], lambda i, x: x * i)) == ["", "b", "cc"]


def test_filter_keeps_positions_and_iteration_skips_dropped():
    ds = FilterMap(range(10), Even())
    assert len(ds) == 10
    assert ds[3] is DROPPED
    assert list(ds) == [0, 2, 4, 6, 8]
    assert list(MapMap(ds, Square())) == [0, 4, 16, 36, 64]  # Maps skip DROPPED.


def test_filter_warns_once_when_it_drops_almost_everything():
    ds = FilterMap(range(5000), lambda x: x == 7)
    with pytest.warns(FilterWarning, match=r"dropped .* \(100% > 90%\)"):
        assert list(ds) == [7]


def _is_even(x):
    return x % 2 == 0


def test_filter_thresholds_shared_by_filters_warn_or_raise_per_window():
    import warnings

    from chute_samplers import SequentialIter

    thresholds = FilterThresholds(warn_ratio=None, window=100)
    half = FilterMap(range(1000), _is_even, thresholds)
    stream = FilterIter(SequentialIter(range(1000)), lambda x: x % 2 == 0, thresholds)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(half)) == 500 and len(list(stream)) == 500
    thresholds.set(warn_ratio=0.9, raise_ratio=0.4)  # Both filters see it.
    with pytest.raises(FilterRatioError, match=r"filter\(<lambda>\) dropped 50 of a window of 100"):
        list(FilterIter(SequentialIter(range(1000)), lambda x: x % 2 == 0, thresholds))
    with pytest.raises(FilterRatioError, match=r"above raise_ratio 0.4 \(Grain's"):
        list(pickle.loads(pickle.dumps(half)))  # Worker processes get the thresholds.
    with pytest.raises(ValueError, match=r"raise_ratio must be a number in \[0, 1\] or None"):
        thresholds.set(0.9, 2)


def test_random_map_is_a_pure_function_of_seed_epoch_and_position():
    ds = RandomMapMap(range(50), noise, seed=5)
    first = list(ds)
    assert first == list(RandomMapMap(range(50), noise, seed=5))
    assert first != list(RandomMapMap(range(50), noise, seed=6))
    assert ds.__getitems__([7, 3]) == [first[7], first[3]]
    assert list(pickle.loads(pickle.dumps(RandomMapMap(range(50), noise, seed=5)))) == first
    # Each pass of a repeat draws new randomness for the same element.
    repeated = list(RepeatMap(ds, num_epochs=2))
    assert repeated[:50] == first
    assert repeated[50:] != first
    assert [x - i for i, x in enumerate(repeated[50:])] != [x - i for i, x in enumerate(first)]


def test_flat_map_positions_and_fan_out():
    ds = FlatMapMap(range(6), Repeat())
    assert len(ds) == 18
    assert list(ds) == [1, 2, 2, 3, 3, 3, 5]
    assert ds[3] == 1 and ds[4] is DROPPED and ds[6] == 2
    with pytest.raises(TypeError, match="needs max_fan_out"):
        FlatMapMap(range(3), lambda x: [x])
    with pytest.raises(ValueError, match=r"became 3 elements, more than max_fan_out=2") as info:
        list(FlatMapMap(range(6), lambda x: [x] * 3, max_fan_out=2))
    assert info.value.__notes__ == [
        "chute: raised by flat_map(<lambda>) on the element at position 0"
    ]


def test_batch_map_exact_batches_remainder_and_padding():
    assert_trees_equal(
        list(BatchMap(range(5), 2)), [np.array([0, 1]), np.array([2, 3]), np.array([4])]
    )
    assert len(BatchMap(range(5), 2, drop_remainder=True)) == 2
    batch, mask = BatchMap(range(5), 2, pad=True)[2]
    assert_trees_equal((batch, mask), (np.array([4, 0]), np.array([True, False])))
    filtered = BatchMap(FilterMap(range(6), lambda x: x != 1), 2)
    assert_trees_equal(filtered.__getitems__([0, 2]), [np.array([0]), np.array([4, 5])])
    assert BatchMap(FilterMap(range(4), lambda x: x > 1), 2)[0] is DROPPED


def test_errors_keep_their_type_and_name_the_op_and_position():
    def parse(x):
        if x == 3:
            raise KeyError("label")
        return x

    ds = MapMap(ShuffleMap(range(8), seed=0), parse)
    position = list(ShuffleMap(range(8), seed=0)).index(3)
    with pytest.raises(KeyError) as info:
        list(ds)
    assert info.value.__notes__ == [
        f"chute: raised by map(parse) on the element at position {position}"
    ]


def test_transforms_of_the_wrong_kind_are_refused_when_building():
    with pytest.raises(TransformTypeError, match="belongs to filter"):
        MapMap(range(3), Even())
    with pytest.raises(TransformTypeError, match="not callable"):
        FilterMap(range(3), 42)


@given(st.integers(0, 40), st.integers(1, 7), st.integers(0, 2**32))
def test_composed_ops_resume_exactly_anywhere(n, size, seed):
    def make():
        ds = FilterMap(RandomMapMap(ShuffleMap(range(n), seed=seed), noise, seed=seed), Even())
        return SequentialIter(BatchMap(MapMap(ds, Square()), size), chunk_size=3)

    assert_resumes(make, every=2)


# --- streams ----------------------------------------------------------------------------


def _stream(n=12):
    return SequentialIter(list(range(n)), chunk_size=5)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: MapIter(_stream(), Square()), [x * x for x in range(12)]),
        (
            lambda: MapWithIndexIter(FilterIter(_stream(), Even()), lambda i, x: (i, x)),
            [(i, 2 * i) for i in range(6)],
        ),
        (lambda: FilterIter(_stream(), lambda x: x % 5 == 0), [0, 5, 10]),
        (
            lambda: FlatMapIter(_stream(), Repeat()),
            [1, 2, 2, 3, 3, 3, 5, 6, 6, 7, 7, 7, 9, 10, 10, 11, 11, 11],
        ),
        (
            lambda: BatchIter(FlatMapIter(_stream(7), lambda x: range(x % 3)), 2),
            [np.array([0, 0]), np.array([1, 0]), np.array([0, 1])],
        ),
    ],
)
def test_stream_ops_give_exact_sequences_and_resume_anywhere(make, expected):
    assert_resumes(make, expected=expected)


def test_random_map_stream_is_deterministic_and_resumes():
    make = lambda: RandomMapIter(FilterIter(_stream(30), Even()), noise, seed=1)  # noqa: E731
    first = assert_resumes(make)
    assert first == list(make())
    assert first != list(RandomMapIter(FilterIter(_stream(30), Even()), noise, seed=2))


def test_stream_errors_name_the_op_and_the_elements_position():
    # The third element after the filter is the source's position 4 (its origin).
    it = MapIter(FilterIter(_stream(), Even()), lambda x: 1 // (x - 4))
    assert [next(it), next(it)] == [-1, -1]
    with pytest.raises(ZeroDivisionError) as info:
        next(it)
    assert info.value.__notes__ == ["chute: raised by map(<lambda>) on the element at position 4"]


def test_flat_map_stream_error_leaves_the_state_at_the_failing_element():
    calls = []

    def explode(x):
        calls.append(x)
        if x == 2 and len(calls) < 5:
            raise RuntimeError("once")
        return [x, x]

    it = FlatMapIter(_stream(4), explode)
    assert [next(it), next(it), next(it), next(it)] == [0, 0, 1, 1]
    with pytest.raises(RuntimeError):
        next(it)
    state = it.get_state()
    calls.extend([None] * 5)  # Let the next call succeed.
    assert list(it) == [2, 2, 3, 3]
    it.set_state(state)
    assert list(it) == [2, 2, 3, 3]
