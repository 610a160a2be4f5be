"""Grain's stream operations in the samplers layer: repeat, limit (and zip, concatenate, cache)."""

import pytest

from chute_core import DROPPED, InvalidStateError
from chute_samplers import (
    CacheIter,
    CacheMap,
    ConcatenateIter,
    ConcatenateMap,
    LimitIter,
    RepeatIter,
    RepeatMap,
    SequentialIter,
    ShuffleMap,
    ZipIter,
    ZipMap,
)
from chute_testing import assert_resumes


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
        "RepeatIter(num_epochs=2): a state has exactly the keys ['epoch', 'parent'] and "
        "optionally ['ahead']; missing ['epoch', 'parent'], unknown ['position']. Was it saved "
        "by another iterator?"
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


def test_zip_of_streams_stops_at_the_shortest_and_resumes():
    make = lambda: ZipIter([SequentialIter(range(4)), SequentialIter(list("abc"))])  # noqa: E731
    assert_resumes(make, expected=[(0, "a"), (1, "b"), (2, "c")])


def test_zip_of_nodes_takes_the_shortest_and_drops_a_position_any_parent_dropped():
    node = ZipMap([range(4), [10, DROPPED, 12]])
    assert len(node) == 3
    assert list(node) == [(0, 10), (2, 12)]
    assert node[1] is DROPPED
    assert_resumes(lambda: SequentialIter(node), expected=[(0, 10), (2, 12)])


def test_concatenate_streams_resumes_across_the_boundary():
    make = lambda: ConcatenateIter(  # noqa: E731
        [SequentialIter(["a", "b"]), SequentialIter([]), SequentialIter(["c"])]
    )
    assert_resumes(make, epoch_length=2, expected=["a", "b", "c"])
    it = make()
    assert [(x, it.origin) for x in it] == [("a", (0, 0)), ("b", (0, 1)), ("c", (2, 0))]


def test_concatenate_nodes_reads_each_position_from_its_parent_in_one_call_each():
    node = ConcatenateMap([range(3), ShuffleMap(range(10, 14), seed=0), ["z"]])
    assert len(node) == 8
    assert node.__getitems__([7, 0, 4, 2]) == ["z", 0, node[4], 2]
    assert sorted(list(node)[3:7]) == [10, 11, 12, 13]
    assert node.locate(3) == (1, 0)
    assert_resumes(lambda: SequentialIter(node), expected=list(node))


def test_concatenate_refuses_an_endless_parent():
    with pytest.raises(ValueError) as caught:
        ConcatenateMap([range(2), RepeatMap(range(2), None)])
    assert str(caught.value) == (
        "ConcatenateMap: parents[1] is endless (len sys.maxsize), so the parents after it "
        "would never be reached; repeat after concatenating."
    )


def test_zip_and_concatenate_refuse_states_of_another_shape():
    it = ConcatenateIter([SequentialIter([1]), SequentialIter([2])])
    with pytest.raises(InvalidStateError) as caught:
        it.set_state({"current": 0, "parents": [{"position": 0}]})
    assert str(caught.value) == (
        "ConcatenateIter(2 parents): state['parents'] must list 2 states (dicts), one per "
        "parent; got [{'position': 0}]."
    )


class _Counting(SequentialIter):
    """A stream that counts the elements it has produced (to see the cache replay)."""

    produced = 0

    def __next__(self):
        element = super().__next__()
        type(self).produced += 1
        return element


def test_cache_replays_the_first_pass_under_a_repeat_without_reading_again():
    _Counting.produced = 0
    it = RepeatIter(CacheIter(_Counting(["a", "b", "c"])), 3)
    assert list(it) == list("abc") * 3
    assert _Counting.produced == 3


def test_a_repeated_cache_resumes_at_every_position_also_into_a_fresh_iterator():
    assert_resumes(
        lambda: RepeatIter(CacheIter(SequentialIter(["a", "b", "c"])), 3),
        epoch_length=3,
        expected=list("abc") * 3,
    )
    assert_resumes(lambda: CacheIter(SequentialIter([1, 2])), expected=[1, 2])


def test_cache_refuses_a_position_past_the_stream_and_stays_where_it_was():
    it = CacheIter(SequentialIter([1, 2]))
    assert next(it) == 1
    with pytest.raises(InvalidStateError) as caught:
        it.set_state({"parent": {"position": 2}, "position": 5, "filled": False})
    assert str(caught.value) == (
        "CacheIter(1 cached, filled=False): state['position'] = 5 is past the 2 elements of "
        "the stream; the state belongs to another pipeline."
    )
    assert it.get_state() == {"parent": {"position": 1}, "position": 1, "filled": False}
    assert list(it) == [2]


def test_cache_refuses_a_filled_state_past_the_stream_and_keeps_its_cache():
    it = CacheIter(SequentialIter([1, 2, 3]))
    assert next(it) == 1
    with pytest.raises(
        InvalidStateError, match=r"state\['position'\] = 4 is out of range \[0, 3\]"
    ):
        it.set_state({"parent": {"position": 0}, "position": 4, "filled": True})
    assert it.get_state() == {"parent": {"position": 1}, "position": 1, "filled": False}
    assert list(it) == [2, 3]


def test_cache_map_reads_each_position_once_in_epoch_0():
    reads = []

    class Source:
        def __len__(self):
            return 4

        def __getitem__(self, index):
            reads.append(index)
            return index

    node = RepeatMap(CacheMap(Source()), 2)
    assert node.__getitems__([5, 1, 0, 4]) == [1, 1, 0, 0]
    assert sorted(reads) == [0, 1]
    assert list(node) == [0, 1, 2, 3] * 2
    assert sorted(reads) == [0, 1, 2, 3]
