"""The shared resume helper must catch broken iterators, or it proves nothing."""

import numpy as np
import pytest

from chute_testing import assert_resumes, assert_trees_equal


class Counter:
    """Yields 0..n-1; `bug` selects a way to get resuming wrong."""

    def __init__(self, n=10, bug=None):
        self.n, self.i, self.bug = n, 0, bug

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i - 1

    def get_state(self):
        if self.bug == "not_json":
            return {"i": np.int64(self.i)}
        return {"i": self.i}

    def set_state(self, state):
        if self.bug == "off_by_one" and state["i"] == 5:
            self.i = state["i"] + 1
        elif self.bug == "ignores_state_after_use" and self.i > 0:
            return
        else:
            self.i = state["i"]


def test_a_correct_iterator_passes_and_returns_its_elements():
    assert assert_resumes(lambda: Counter(7), epoch_length=3) == list(range(7))


@pytest.mark.parametrize(
    ("bug", "message"),
    [
        ("off_by_one", r"restored at 5/10"),
        ("ignores_state_after_use", r"into a used iterator"),
        ("not_json", r"not JSON-serialisable"),
    ],
)
def test_broken_iterators_fail(bug, message):
    with pytest.raises(AssertionError, match=message):
        assert_resumes(lambda: Counter(10, bug))


def test_restored_factories_must_continue_the_same_way():
    with pytest.raises(AssertionError, match="factory 1"):
        assert_resumes(lambda: Counter(5), make_restored=[lambda: Counter(6)])


def test_expected_run_is_checked():
    with pytest.raises(AssertionError, match="uninterrupted run"):
        assert_resumes(lambda: Counter(3), expected=[0, 1, 3])


def test_endless_iterators_need_and_use_max_elements():
    assert assert_resumes(lambda: Counter(10**9), max_elements=6) == list(range(6))


@pytest.mark.parametrize(
    ("actual", "expected", "message"),
    [
        (np.zeros(2, np.int32), np.zeros(2, np.int64), r"array int32\[2\] != int64\[2\]"),
        ({"a": np.arange(3)}, {"a": np.arange(1, 4)}, r"element\['a'\]: array values differ"),
        ([1, 2], (1, 2), "type list != tuple"),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, "keys"),
        (1, 1.0, "type int != float"),
        ([[1], [2]], [[1], [3]], r"element\[1\]\[0\]: 2 != 3"),
    ],
)
def test_assert_trees_equal_names_the_first_difference(actual, expected, message):
    with pytest.raises(AssertionError, match=message):
        assert_trees_equal(actual, expected)


def test_assert_trees_equal_treats_nan_and_nat_as_equal():
    assert_trees_equal([float("nan"), np.array([np.nan])], [float("nan"), np.array([np.nan])])
    nat = np.array(["NaT"], dtype="datetime64[s]")
    assert_trees_equal(nat, nat.copy())
