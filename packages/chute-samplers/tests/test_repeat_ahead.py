"""A resharded stream repeat: the parent's states of later epochs (`ahead`)."""

import pytest

from chute_core import InvalidStateError
from chute_samplers import RepeatIter, SequentialIter
from chute_samplers.internal import REPEAT_ENDED as ENDED
from chute_testing import assert_resumes


def _resharded(epochs=4):
    """Epoch 1 from position 2; epoch 2 from position 1; epoch 3 empty (others read it)."""
    it = RepeatIter(SequentialIter(["a", "b", "c"]), epochs)
    ahead = [{"position": 1}, {"position": 3}]
    it.set_state({"epoch": 1, "parent": {"position": 2}, "ahead": ahead})
    return it


def test_each_epoch_ahead_starts_where_its_state_says():
    it = _resharded()
    assert next(it) == "c"  # Epoch 1.
    assert it.get_state() == {
        "epoch": 1,
        "parent": {"position": 3},
        "ahead": [{"position": 1}, {"position": 3}],
    }
    # Epoch 2 from position 1; epoch 3, which others read all of, does not end the
    # stream; it ends after epoch 3 (of 4).
    assert list(it) == ["b", "c"]
    assert it.get_state()["epoch"] == 4


def test_an_endless_repeat_goes_on_from_the_parent_start_after_the_epochs_ahead():
    it = _resharded(None)
    assert [next(it) for _ in range(6)] == ["c", "b", "c", "a", "b", "c"]
    assert "ahead" not in it.get_state()


def test_a_resharded_repeat_resumes_everywhere():
    assert assert_resumes(_resharded, every=1) == ["c", "b", "c"]


@pytest.mark.parametrize(
    ("ahead", "match"),
    [
        ({"position": 1}, "must list the parent's states of later epochs"),
        ([{"position": 0}, 5], "must list the parent's states of later epochs"),
        ([{"position": 0}] * 3, "lists 3 epochs after epoch 1, past the last of 4"),
        ([{"position": "x"}], "must be an int"),  # Each epoch's state is tried at once.
        ([{"bogus": 1}], "bogus"),
    ],
)
def test_epochs_ahead_that_cannot_be_are_refused_before_moving(ahead, match):
    it = RepeatIter(SequentialIter(["a", "b", "c"]), 4)
    next(it)
    before = it.get_state()
    with pytest.raises(InvalidStateError, match=match):
        it.set_state({"epoch": 1, "parent": {"position": 2}, "ahead": ahead})
    assert it.get_state() == before


def test_an_endless_repeat_of_nothing_ends_and_says_so():
    it = RepeatIter(SequentialIter([]), None)
    assert list(it) == []
    assert it.get_state()["epoch"] == ENDED
    again = RepeatIter(SequentialIter([]), None)
    again.set_state(it.get_state())
    assert list(again) == []
    assert again.get_state()["epoch"] == ENDED
