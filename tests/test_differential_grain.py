"""Differential tests: chute's fluent datasets against Grain (a test-only peer).

Only ops whose semantics are defined without randomness are compared (map, filter,
batch with and without remainder, slicing, repeat, and the same ops on streams): the
same pipeline over the same data must give the same elements, compared exactly
(NumPy batches by dtype, shape and values).
"""

import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chute

grain = pytest.importorskip("grain")

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Grain's `to_iter_dataset` prefetches on threads by default; the order is the same
# either way, and without threads each example starts faster.
_GRAIN_READ = grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)


def assert_tree_equal(actual, expected, path="element"):
    """Exact equality of pytrees; NumPy leaves compared by dtype, shape and values."""
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), f"{path}: {type(actual).__name__} != ndarray"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        np.testing.assert_array_equal(actual, expected, err_msg=path)
    elif isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: {type(actual).__name__} != dict"
        assert sorted(actual) == sorted(expected), f"{path}: keys differ"
        for key in expected:
            assert_tree_equal(actual[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, list | tuple):
        assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for number, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_tree_equal(a, e, f"{path}[{number}]")
    else:
        assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def assert_same_elements(chute_elements, grain_elements):
    chute_list, grain_list = list(chute_elements), list(grain_elements)
    assert len(chute_list) == len(grain_list), (len(chute_list), len(grain_list))
    for number, (a, e) in enumerate(zip(chute_list, grain_list, strict=True)):
        assert_tree_equal(a, e, f"element {number}")


def both(data):
    """The same source in both libraries."""
    return chute.MapDataset.source(data), grain.MapDataset.source(data)


def records(n):
    """Dict records like the guides' (an image, a label, a float feature)."""
    return [
        {
            "image": np.full((3, 2), i % 256, dtype=np.uint8),
            "label": i % 10,
            "weight": np.float32(i) / 4,
        }
        for i in range(n)
    ]


slices = st.builds(
    slice,
    st.none() | st.integers(-40, 40),
    st.none() | st.integers(-40, 40),
    st.none() | st.integers(-5, 5).filter(bool),
)

# --- map ----------------------------------------------------------------------------


@SETTINGS
@given(size=st.integers(0, 40))
def test_map_same_elements_and_random_access(size):
    c, g = both(list(range(size)))
    c, g = c.map(lambda x: x * 3 + 1), g.map(lambda x: x * 3 + 1)
    assert len(c) == len(g) == size
    assert_same_elements(c, g)
    assert [c[i] for i in range(-size, size)] == [g[i] for i in range(-size, size)]


def test_map_chain_over_dict_records():
    c, g = both(records(12))

    def scale(features):
        return {**features, "image": features["image"].astype(np.float32) / 255}

    def drop_weight(features):
        return {"image": features["image"], "label": features["label"]}

    assert_same_elements(c.map(scale).map(drop_weight), g.map(scale).map(drop_weight))


def test_map_range_source():
    assert_same_elements(
        chute.MapDataset.range(3, 30, 4).map(str), grain.MapDataset.range(3, 30, 4).map(str)
    )


# --- filter -------------------------------------------------------------------------


@SETTINGS
@given(size=st.integers(0, 60), modulus=st.integers(1, 5), residue=st.integers(0, 4))
def test_filter_iteration_and_random_access(size, modulus, residue):
    c, g = both(list(range(size)))

    def keep(x):
        return x % modulus != residue % modulus

    c, g = c.filter(keep), g.filter(keep)
    # Positions stay in both: same length, same kept elements in the same places.
    assert len(c) == len(g) == size
    assert_same_elements(c, g)
    assert list(c) == [x for x in range(size) if keep(x)]
    # Grain reads a dropped position as None, chute as `DROPPED`; kept ones are equal.
    for i in range(size):
        expected = g[i]
        actual = c[i]
        if expected is None:
            assert not actual and repr(actual) == "DROPPED", (i, actual)
        else:
            assert actual == expected, (i, actual, expected)


def test_dropped_marker_is_chute_dropped():
    """`MapDataset.filter`'s docstring: a dropped position reads as `chute.DROPPED`."""
    ds = chute.MapDataset.range(4).filter(lambda x: x % 2)
    assert ds[0] is chute.DROPPED
    assert ds[1] == 1


def test_filter_then_map_skips_dropped_elements():
    c, g = both(records(30))
    c = c.filter(lambda f: f["label"] > 4).map(lambda f: int(f["image"][0, 0]))
    g = g.filter(lambda f: f["label"] > 4).map(lambda f: int(f["image"][0, 0]))
    assert_same_elements(c, g)
    assert list(c) == [i for i in range(30) if i % 10 > 4]


# --- batch --------------------------------------------------------------------------


@SETTINGS
@given(size=st.integers(0, 40), batch_size=st.integers(1, 9), drop_remainder=st.booleans())
def test_batch_of_ints(size, batch_size, drop_remainder):
    c, g = both(list(range(size)))
    c = c.batch(batch_size, drop_remainder=drop_remainder)
    g = g.batch(batch_size, drop_remainder=drop_remainder)
    assert len(c) == len(g)
    assert_same_elements(c, g)
    assert_same_elements([c[i] for i in range(len(c))], [g[i] for i in range(len(g))])


@pytest.mark.parametrize("drop_remainder", [False, True])
@pytest.mark.parametrize("batch_size", [1, 4, 5, 7])
def test_batch_of_dict_records(batch_size, drop_remainder):
    c, g = both(records(17))
    assert_same_elements(
        c.batch(batch_size, drop_remainder=drop_remainder),
        g.batch(batch_size, drop_remainder=drop_remainder),
    )


def test_batch_of_nested_tuples_and_floats():
    data = [(np.arange(i, i + 3, dtype=np.int32), (float(i), np.float64(i) / 3)) for i in range(7)]
    c, g = both(data)
    assert_same_elements(c.batch(3), g.batch(3))
    assert_same_elements(c.batch(3, drop_remainder=True), g.batch(3, drop_remainder=True))


def test_map_then_batch_then_map():
    c, g = both(list(range(23)))

    def square(x):
        return x * x

    def total(batch):
        return int(batch.sum())

    assert_same_elements(c.map(square).batch(4).map(total), g.map(square).batch(4).map(total))


# --- slicing ------------------------------------------------------------------------


@SETTINGS
@given(size=st.integers(0, 40), first=slices, second=slices)
def test_slices_and_slices_of_slices(size, first, second):
    c, g = both(list(range(size)))
    assert len(c[first]) == len(g[first]) == len(range(size)[first])
    assert list(c[first]) == list(g[first]) == list(range(size)[first])
    nested = range(size)[first][second]
    assert len(c[first][second]) == len(g[first][second]) == len(nested)
    assert list(c[first][second]) == list(g[first][second]) == list(nested)


@pytest.mark.parametrize(
    "selection",
    [
        slice(None, None, -1),
        slice(8, 2, -3),
        slice(-1, -12, -2),
        slice(None, None, -7),
        slice(-3, None),
        slice(2, -2, 2),
        slice(100, None, -1),
        slice(None, -100, -1),
    ],
)
def test_negative_step_slices(selection):
    c, g = both([f"r{i}" for i in range(11)])
    assert list(c[selection]) == list(g[selection]) == [f"r{i}" for i in range(11)][selection]
    sliced = c[selection]
    assert [sliced[i] for i in range(len(sliced))] == list(g[selection])


def test_slice_of_map_and_map_of_slice():
    c, g = both(list(range(20)))
    assert_same_elements(c.map(lambda x: -x)[3:17:4], g.map(lambda x: -x)[3:17:4])
    assert_same_elements(c[::-3].map(lambda x: -x), g[::-3].map(lambda x: -x))


# --- repeat -------------------------------------------------------------------------


@SETTINGS
@given(size=st.integers(1, 12), num_epochs=st.integers(1, 4))
def test_repeat_length_and_contents(size, num_epochs):
    c, g = both(list(range(size)))
    c, g = c.repeat(num_epochs), g.repeat(num_epochs)
    assert len(c) == len(g) == size * num_epochs
    assert list(c) == list(g) == list(range(size)) * num_epochs
    assert [c[i] for i in range(-len(c), len(c))] == [g[i] for i in range(-len(g), len(g))]


@pytest.mark.parametrize("size", [1, 3, 10])
def test_endless_repeat_length_and_prefix(size):
    c, g = both(list(range(size)))
    c, g = c.repeat(), g.repeat()
    assert len(c) == len(g) == sys.maxsize
    assert [c[i] for i in range(5 * size)] == [g[i] for i in range(5 * size)]
    assert [c[i] for i in range(5 * size)] == list(range(size)) * 5


@SETTINGS
@given(size=st.integers(1, 10), num_epochs=st.integers(1, 3), selection=slices)
def test_slice_of_repeat(size, num_epochs, selection):
    c, g = both(list(range(size)))
    c, g = c.repeat(num_epochs)[selection], g.repeat(num_epochs)[selection]
    assert len(c) == len(g)
    assert list(c) == list(g) == (list(range(size)) * num_epochs)[selection]


def test_repeat_of_map_and_batch():
    c, g = both(list(range(7)))
    assert_same_elements(
        c.map(lambda x: x + 100).batch(3).repeat(2), g.map(lambda x: x + 100).batch(3).repeat(2)
    )


# --- streams (IterDataset) ----------------------------------------------------------


@SETTINGS
@given(
    size=st.integers(0, 50),
    modulus=st.integers(2, 5),
    batch_size=st.integers(1, 8),
    drop_remainder=st.booleans(),
)
def test_to_iter_dataset_filter_batch(size, modulus, batch_size, drop_remainder):
    c, g = both(list(range(size)))

    def keep(x):
        return x % modulus != 0

    c = c.to_iter_dataset().filter(keep).batch(batch_size, drop_remainder=drop_remainder)
    g = (
        g.to_iter_dataset(read_options=_GRAIN_READ)
        .filter(keep)
        .batch(batch_size, drop_remainder=drop_remainder)
    )
    assert_same_elements(c, g)


@SETTINGS
@given(size=st.integers(0, 40), batch_size=st.integers(1, 6), drop_remainder=st.booleans())
def test_iter_dataset_map_filter_batch_over_records(size, batch_size, drop_remainder):
    c, g = both(records(size))

    def relabel(features):
        return {"image": features["image"], "label": np.int64(features["label"] * 2)}

    def keep(features):
        return int(features["label"]) % 3 != 1

    c = (
        c.to_iter_dataset()
        .map(relabel)
        .filter(keep)
        .batch(batch_size, drop_remainder=drop_remainder)
    )
    g = (
        g.to_iter_dataset(read_options=_GRAIN_READ)
        .map(relabel)
        .filter(keep)
        .batch(batch_size, drop_remainder=drop_remainder)
    )
    assert_same_elements(c, g)


def test_map_dataset_filter_then_iter_batch():
    c, g = both(list(range(40)))

    def keep(x):
        return x % 3 == 0

    c = c.map(lambda x: x * x).filter(keep).to_iter_dataset().batch(4)
    g = g.map(lambda x: x * x).filter(keep).to_iter_dataset(read_options=_GRAIN_READ).batch(4)
    assert_same_elements(c, g)


def test_iter_dataset_of_slice_and_repeat():
    c, g = both(list(range(9)))
    c = c[::-2].repeat(3).to_iter_dataset().map(lambda x: x - 1).batch(4, drop_remainder=True)
    g = (
        g[::-2]
        .repeat(3)
        .to_iter_dataset(read_options=_GRAIN_READ)
        .map(lambda x: x - 1)
        .batch(4, drop_remainder=True)
    )
    assert_same_elements(c, g)


def test_iter_batch_then_map_then_filter():
    c, g = both(list(range(30)))
    c = c.to_iter_dataset().batch(4).map(lambda b: b * 2).filter(lambda b: int(b[0]) % 3 != 0)
    g = (
        g.to_iter_dataset(read_options=_GRAIN_READ)
        .batch(4)
        .map(lambda b: b * 2)
        .filter(lambda b: int(b[0]) % 3 != 0)
    )
    assert_same_elements(c, g)
