"""`select_keys`: the function, its Map and Iter nodes, their errors, and resuming."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chute_core import ArgumentTypeError, InvalidArgumentError
from chute_samplers import SequentialIter
from chute_testing import assert_resumes
from chute_transforms import MissingKeyError, SelectKeysIter, SelectKeysMap, TransformTypeError

RECORDS = [{"image": i, "label": i % 3, "path": f"{i}.png"} for i in range(10)]


@given(
    st.dictionaries(st.text(max_size=3), st.integers(), min_size=1),
    st.data(),
)
def test_the_result_holds_exactly_the_keys_asked_for_in_their_order(element, data):
    keys = data.draw(st.lists(st.sampled_from(sorted(element)), min_size=1, unique=True))
    [selected] = SelectKeysMap([element], keys)
    assert list(selected) == keys
    assert selected == {key: element[key] for key in keys}


def test_the_map_and_iter_nodes_select_the_same_keys():
    expected = [{"label": r["label"], "image": r["image"]} for r in RECORDS]
    assert list(SelectKeysMap(RECORDS, ["label", "image"])) == expected
    assert list(SelectKeysIter(SequentialIter(RECORDS), ["label", "image"])) == expected
    assert SelectKeysMap(RECORDS, ("path",)).__getitems__([4, 1]) == [
        {"path": "4.png"},
        {"path": "1.png"},
    ]


def test_the_iter_node_resumes_exactly():
    assert_resumes(lambda: SelectKeysIter(SequentialIter(RECORDS), ["path"]), every=3)


@pytest.mark.parametrize(
    ("keys", "error", "message"),
    [
        ("image", ArgumentTypeError, r"keys must be a list of keys .* got str 'image'"),
        (None, ArgumentTypeError, r"keys must be a list of keys .* got NoneType"),
        ([["a"]], ArgumentTypeError, "each key must be hashable, got list"),
        ([], InvalidArgumentError, "keys must name at least one key"),
        (["a", "b", "a"], InvalidArgumentError, "keys names 'a' twice"),
    ],
)
def test_bad_keys_are_refused_when_the_node_is_made(keys, error, message):
    with pytest.raises(error, match=message):
        SelectKeysMap(RECORDS, keys)
    with pytest.raises(error, match=message):
        SelectKeysIter(SequentialIter(RECORDS), keys)


def test_a_missing_key_names_the_key_the_element_and_its_position():
    with pytest.raises(MissingKeyError) as caught:
        SelectKeysMap(RECORDS, ["label", "caption"])[3]
    assert str(caught.value.args[0]) == (
        "select_keys: the element has no key 'caption' (its keys: ['image', 'label', 'path'])."
    )
    assert isinstance(caught.value, KeyError)
    assert caught.value.__notes__ == [
        "chute: raised by select_keys(['label', 'caption']) on the element at position 3"
    ]


def test_an_element_that_is_no_dict_is_a_clear_error():
    with pytest.raises(TransformTypeError, match=r"an element must be a dict .* got int"):
        next(SelectKeysIter(SequentialIter([1, 2]), ["a"]))
