"""batch_elements / unbatch_elements / pad_batch: the stacking rules and their errors."""

import collections
import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from chute_testing import assert_trees_equal
from chute_transforms import BatchError, batch_elements, pad_batch, unbatch_elements

Point = collections.namedtuple("Point", ["x", "y"])


@dataclasses.dataclass(frozen=True)
class Pair:
    first: object
    second: object

    def __post_init__(self):
        if isinstance(self.first, np.ndarray) and self.first.ndim > 3:
            raise ValueError("rejects batched arrays: batching must not call __init__")


def test_numeric_python_scalars_get_their_natural_dtypes():
    batch = batch_elements([{"b": True, "i": 1, "f": 0.5}, {"b": False, "i": -2, "f": 2.0}])
    assert_trees_equal(
        batch,
        {"b": np.array([True, False]), "i": np.array([1, -2]), "f": np.array([0.5, 2.0])},
    )
    assert batch["i"].dtype == np.int64


def test_a_leaf_of_python_ints_gives_exactly_those_int64_values():
    values = [2**63 - 1, -(2**63), 0, -1, 7] * 60
    batch = batch_elements(values)
    assert batch.dtype == np.int64 and batch.tolist() == values
    assert batch_elements([{"i": 3}, {"i": -3}])["i"].tolist() == [3, -3]


def test_mixing_int_and_float_in_a_leaf_gives_float64():
    assert_trees_equal(batch_elements([1, 2.5, 3]), np.array([1.0, 2.5, 3.0]))


def test_arrays_and_numpy_scalars_stack_with_their_dtype():
    images = [np.full((4, 4, 3), i, np.uint8) for i in range(3)]
    batch = batch_elements(images)
    assert batch.shape == (3, 4, 4, 3) and batch.dtype == np.uint8
    assert batch_elements([np.float32(1), np.array(2, np.float32)]).dtype == np.float32


def test_strings_and_bytes_become_python_lists_and_none_stays_none():
    batch = batch_elements([{"s": "a", "b": b"x", "n": None}, {"s": "bc", "b": b"", "n": None}])
    assert batch == {"s": ["a", "bc"], "b": [b"x", b""], "n": None}


def test_containers_keep_their_types_and_the_first_key_order():
    elements = [{"z": Point(i, [i, i]), "a": Pair(np.arange(2) + i, (i,))} for i in range(2)]
    elements[1] = {"a": elements[1]["a"], "z": elements[1]["z"]}  # Other key order.
    batch = batch_elements(elements)
    assert list(batch) == ["z", "a"]
    assert isinstance(batch["z"], Point) and isinstance(batch["a"], Pair)
    assert_trees_equal(batch["z"].y, [np.array([0, 1]), np.array([0, 1])])
    assert_trees_equal(batch["a"].first, np.array([[0, 1], [1, 2]]))
    assert_trees_equal(batch["a"].second, (np.array([0, 1]),))


def test_batch_never_aliases_the_elements():
    elements = [{"x": np.arange(3)}, {"x": np.arange(3)}]
    for batch in (batch_elements(elements), batch_elements(elements, pad_to=4)[0]):
        assert not any(np.shares_memory(batch["x"], e["x"]) for e in elements)


def test_defaultdict_elements_are_not_mutated_by_a_key_check():
    first = collections.defaultdict(int, a=1, b=2)
    second = collections.defaultdict(int, a=1, c=2)
    with pytest.raises(BatchError, match=r"missing \['b'\], extra \['c'\]"):
        batch_elements([first, second])
    assert "b" not in second


@pytest.mark.parametrize(
    ("elements", "message"),
    [
        (
            [
                {"image": [np.zeros(2), np.zeros((3, 2))]},
                {"image": [np.zeros(2), np.zeros((3, 1))]},
            ],
            r"element\['image'\]\[1\]: element 1 of the batch has shape \(3, 1\) but element 0 "
            r"has shape \(3, 2\)",
        ),
        (
            [{"x": np.zeros(2, np.float32)}] * 3 + [{"x": np.zeros(2)}],
            r"element\['x'\]: element 3 of the batch has dtype float64 but element 0 has dtype "
            r"float32",
        ),
        (
            [{"a": 1, "b": 2}, {"a": 1, "c": 2}],
            r"element: element 1 .* keys \['a', 'c'\] .* \['a', 'b'\] \(missing \['b'\], extra",
        ),
        ([(1, 2), (1, 2, 3)], r"element 1 of the batch has length 3 but element 0 has length 2"),
        ([Pair(1, 2), Point(1, 2)], r"has type \S*test_batch.Point but element 0 has type \S*Pair"),
        ([Pair(np.zeros(1), 1), Pair(np.zeros(2), 1)], r"element\.first: element 1"),
        ([1, True], r"element 1 of the batch has type bool but element 0 has type int"),
        (["a", b"a"], r"has type bytes but element 0 has type str"),
        ([np.float32(1), np.float64(1)], r"has dtype float64 but element 0 has dtype float32"),
        ([np.int64(1), 1], r"has type int but element 0 has type numpy.int64"),
        ([1, None], r"has type NoneType but element 0 has type int"),
        ([np.array([1, "a"], dtype=object)] * 2, r"dtype object"),
        ([0, 2**64], r"element 1 of the batch is the int 18446744073709551616"),
        ([2**63 - 1, -(2**63), 2**63], r"element 2 of the batch is the int 9223372036854775808"),
        (
            [1, np.int64(1)],
            r"element 1 of the batch has type numpy.int64 but element 0 has type int",
        ),
        ([1, 2, False], r"element 2 of the batch has type bool but element 0 has type int"),
        ([{1, 2}], r"element 0 has type set"),
        ([], r"empty"),
    ],
)
def test_disagreeing_elements_raise_batch_error_naming_path_index_and_values(elements, message):
    with pytest.raises(BatchError, match=message):
        batch_elements(elements)


def test_batch_error_is_a_value_error():
    with pytest.raises(ValueError, match="shape"):
        batch_elements([np.zeros(1), np.zeros(2)])


def test_padding_adds_zero_rows_and_a_mask():
    elements = [{"x": np.ones(2, np.int8), "s": "a", "b": b"b", "n": None, "f": 1.5, "t": True}]
    batch, mask = batch_elements(elements, pad_to=3)
    assert_trees_equal(mask, np.array([True, False, False]))
    assert_trees_equal(
        batch,
        {
            "x": np.array([[1, 1], [0, 0], [0, 0]], np.int8),
            "s": ["a", "", ""],
            "b": [b"b", b"", b""],
            "n": None,
            "f": np.array([1.5, 0.0, 0.0]),
            "t": np.array([True, False, False]),
        },
    )


def test_padding_to_the_exact_size_gives_an_all_true_mask():
    batch, mask = batch_elements([1, 2], pad_to=2)
    assert_trees_equal((batch, mask), (np.array([1, 2]), np.array([True, True])))


def test_padding_checks_shapes_and_its_argument():
    with pytest.raises(BatchError, match=r"element 1 of the batch has shape \(2,\)"):
        batch_elements([np.zeros(1), np.zeros(2)], pad_to=4)
    with pytest.raises(ValueError, match="smaller than the 2 elements"):
        batch_elements([1, 2], pad_to=1)
    with pytest.raises(TypeError, match="pad_to"):
        batch_elements([1, 2], pad_to=2.0)


def test_unbatch_gives_row_views_and_numpy_scalars():
    batch = batch_elements(
        [{"x": np.arange(2), "i": 5, "s": "a"}, {"x": np.arange(2), "i": 6, "s": "b"}]
    )
    rows = unbatch_elements(batch)
    assert_trees_equal(rows[1], {"x": np.arange(2), "i": np.int64(6), "s": "b"})
    assert np.shares_memory(rows[0]["x"], batch["x"])


def test_unbatch_with_mask_drops_padding():
    batch, mask = batch_elements([Point(1, "a"), Point(2, "b")], pad_to=5)
    assert_trees_equal(
        unbatch_elements(batch, mask=mask), [Point(np.int64(1), "a"), Point(np.int64(2), "b")]
    )


@pytest.mark.parametrize(
    ("batch", "kwargs", "message"),
    [
        (
            {"a": np.zeros(4), "b": np.zeros(3)},
            {},
            r"batch\['b'\] has 3 rows but batch\['a'\] has 4",
        ),
        ({"a": ["x", "y"], "b": [np.zeros((3, 1))]}, {}, r"batch\['b'\]\[0\] has 3 rows"),
        ({"a": np.float32(1)}, {}, r"batch\['a'\] is a float32, which has no batch dimension"),
        ({"a": np.array(1)}, {}, r"0-d array"),
        ({"a": None}, {}, r"no array or list-of-str leaf"),
        ({"a": np.zeros(2)}, {"mask": np.ones(3, bool)}, r"mask has 3 rows but batch\['a'\] has 2"),
        ({"a": np.zeros(2)}, {"mask": np.ones(2)}, r"mask must be a 1-D bool array"),
    ],
)
def test_unbatch_errors(batch, kwargs, message):
    with pytest.raises(BatchError, match=message):
        unbatch_elements(batch, **kwargs)


def test_unbatch_of_a_batch_without_leaves_uses_the_mask():
    assert unbatch_elements({"n": None, "e": []}, mask=np.array([True, False, True])) == [
        {"n": None, "e": []},
        {"n": None, "e": []},
    ]


def test_pad_batch_pads_a_custom_batch():
    custom = {"ids": np.array([[1, 2], [3, 4]], np.int32), "names": ["a", "b"], "n": None}
    padded, mask = pad_batch(custom, 3)
    assert_trees_equal(
        padded,
        {"ids": np.array([[1, 2], [3, 4], [0, 0]], np.int32), "names": ["a", "b", ""], "n": None},
    )
    assert_trees_equal(mask, np.array([True, True, False]))
    assert not np.shares_memory(padded["ids"], custom["ids"])
    with pytest.raises(ValueError, match="size must be an int >= the 2 rows"):
        pad_batch(custom, 1)
    with pytest.raises(BatchError, match="ragged"):
        pad_batch({"a": np.zeros(2), "b": np.zeros(1)}, 4)


# --- Round trip property ------------------------------------------------------------

_DTYPES = [np.uint8, np.int32, np.float32, np.bool_]
_LEAVES = ["array", "numpy_scalar", "int", "float", "bool", "str", "bytes", "none"]


@st.composite
def _schemas(draw, depth=0):
    if depth >= 2 or draw(st.integers(0, 2)) == 0:
        kind = draw(st.sampled_from(_LEAVES))
        if kind in ("array", "numpy_scalar"):
            dtype = draw(st.sampled_from(_DTYPES))
            shape = tuple(draw(st.lists(st.integers(0, 3), max_size=2))) if kind == "array" else ()
            return (kind, dtype, shape)
        return (kind,)
    container = draw(st.sampled_from(["dict", "tuple", "list", "pair", "point"]))
    size = 2 if container in ("pair", "point") else draw(st.integers(0, 3))
    return (container, tuple(draw(_schemas(depth + 1)) for _ in range(size)))


def _values(schema):
    kind = schema[0]
    if kind == "array":
        return hnp.arrays(schema[1], schema[2])
    if kind == "numpy_scalar":
        return hnp.arrays(schema[1], ()).map(lambda a: a[()])
    simple = {
        "int": st.integers(-(2**63), 2**63 - 1),
        "float": st.floats(allow_nan=False),
        "bool": st.booleans(),
        "str": st.text(max_size=3),
        "bytes": st.binary(max_size=3),
        "none": st.none(),
    }
    if kind in simple:
        return simple[kind]
    children = st.tuples(*(_values(child) for child in schema[1]))
    build = {
        "dict": lambda values: {f"k{i}": v for i, v in enumerate(values)},
        "tuple": tuple,
        "list": list,
        "pair": lambda values: Pair(*values),
        "point": lambda values: Point(*values),
    }[kind]
    return children.map(build)


def _as_unbatched(value):
    """What unbatching gives back for a leaf: NumPy scalars for Python and 0-d leaves."""
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int):
        return np.int64(value)
    if isinstance(value, float):
        return np.float64(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value[()]
    if isinstance(value, dict):
        return {k: _as_unbatched(v) for k, v in value.items()}
    if isinstance(value, Pair):
        return Pair(_as_unbatched(value.first), _as_unbatched(value.second))
    if isinstance(value, Point):
        return Point(*map(_as_unbatched, value))
    if isinstance(value, (list, tuple)):
        return type(value)(map(_as_unbatched, value))
    return value


@st.composite
def _element_lists(draw):
    schema = draw(_schemas())
    return draw(st.lists(_values(schema), min_size=1, max_size=5))


@settings(max_examples=150, deadline=None)
@given(_element_lists(), st.integers(0, 3))
def test_unbatch_inverts_batch_also_when_padded(elements, extra):
    n = len(elements)
    expected = [_as_unbatched(e) for e in elements]
    batch = batch_elements(elements)
    assert_trees_equal(unbatch_elements(batch, mask=np.ones(n, bool)), expected)
    padded, mask = batch_elements(elements, pad_to=n + extra)
    assert_trees_equal(unbatch_elements(padded, mask=mask), expected)
    if extra and _has_batched_leaf(batch):
        assert_trees_equal(pad_batch(batch, n + extra), (padded, mask))


def _has_batched_leaf(batch):
    try:
        unbatch_elements(batch)
    except BatchError:
        return False
    return True


def test_batch_error_message_uses_the_documented_path_format():
    with pytest.raises(BatchError) as info:
        batch_elements([{"image": (1, np.zeros(3))}, {"image": (1, np.zeros(4))}])
    assert re.match(r"cannot batch element\['image'\]\[1\]: element 1 ", str(info.value))
