"""Grain's stream operations in the samplers layer: repeat, limit (and zip, concatenate, cache)."""

import pytest

from chute_samplers import LimitIter, RepeatIter, SequentialIter
from chute_sources import InvalidStateError
from chute_sources.testing import assert_resumes


def test_repeat_yields_the_stream_num_epochs_times_and_resumes_at_every_position():
    elements = assert_resumes(
        lambda: RepeatIter(SequentialIter(["a", "b", "c"]), 3),
        epoch_length=3,
        expected=list("abcabcabc"),
    )
    assert len(elements) == 9


def test_an_endless_repeat_resumes_across_epochs():
    assert_resumes(
        lambda: RepeatIter(SequentialIter([1, 2]), None),
        max_elements=7,
        epoch_length=2,
        expected=[1, 2, 1, 2, 1, 2, 1],
    )


@pytest.mark.parametrize("num_epochs", [None, 0, 3])
def test_a_repeat_of_an_empty_stream_or_of_zero_epochs_is_empty(num_epochs):
    assert list(RepeatIter(SequentialIter([]), num_epochs)) == []
    assert list(RepeatIter(SequentialIter([1]), 0)) == []


def test_repeat_origins_put_the_epoch_first():
    it = RepeatIter(SequentialIter(["a", "b"]), 2)
    assert [(x, it.origin) for x in it] == [
        ("a", (0, 0)),
        ("b", (0, 1)),
        ("a", (1, 0)),
        ("b", (1, 1)),
    ]


def test_repeat_refuses_a_state_of_another_iterator():
    it = RepeatIter(SequentialIter([1]), 2)
    with pytest.raises(InvalidStateError) as caught:
        it.set_state({"position": 1})
    assert str(caught.value) == (
        "RepeatIter(num_epochs=2): a state has exactly the keys ['epoch', 'parent']; missing "
        "['epoch', 'parent'], unknown ['position']. Was it saved by another iterator?"
    )


def test_limit_takes_the_first_count_elements_and_resumes():
    assert_resumes(lambda: LimitIter(SequentialIter(range(10)), 4), expected=[0, 1, 2, 3])
    assert_resumes(lambda: LimitIter(SequentialIter(range(3)), 5), expected=[0, 1, 2])
    assert_resumes(lambda: LimitIter(SequentialIter(range(3)), 0), expected=[])


def test_limit_never_reads_past_its_count():
    parent = SequentialIter(range(10))
    assert list(LimitIter(parent, 2)) == [0, 1]
    assert parent.get_state() == {"position": 2}


def test_limit_over_an_endless_repeat_ends():
    it = LimitIter(RepeatIter(SequentialIter([7, 8]), None), 5)
    assert list(it) == [7, 8, 7, 8, 7]


def test_limit_refuses_a_count_past_its_limit():
    it = LimitIter(SequentialIter(range(10)), 2)
    with pytest.raises(InvalidStateError) as caught:
        it.set_state({"count": 3, "parent": {"position": 3}})
    assert str(caught.value) == (
        "LimitIter(count=2): state['count'] = 3 is past the limit 2; the state belongs to "
        "another pipeline."
    )
