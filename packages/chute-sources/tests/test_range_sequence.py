import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chute_core import (
    RandomAccessDataSource,
    RecordIndexError,
    RecordKeyTypeError,
    SourceClosedError,
    SupportsGetItems,
    read_records,
)
from chute_sources import RangeSource, SequenceSource


@given(
    st.integers(-50, 50),
    st.integers(-50, 50),
    st.integers(-7, 7).filter(lambda s: s != 0),
)
def test_range_source_matches_range(start, stop, step):
    source = RangeSource(start, stop, step)
    expected = range(start, stop, step)
    assert len(source) == len(expected)
    assert list(source) == list(expected)
    assert source.__getitems__(list(range(len(expected)))[::-1]) == list(expected)[::-1]


def test_range_source_single_argument_and_repr():
    assert list(RangeSource(3)) == [0, 1, 2]
    assert repr(RangeSource(1, 10, 2)) == "RangeSource(start=1, stop=10, step=2)"


def test_range_source_rejects_bad_arguments():
    with pytest.raises(ValueError, match="step must not be zero"):
        RangeSource(0, 5, 0)
    with pytest.raises(TypeError, match="stop must be an int"):
        RangeSource(0, 2.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", [5, -6, 100])
def test_out_of_range_keys_name_the_source_and_the_range(key):
    source = RangeSource(5)
    with pytest.raises(
        RecordIndexError,
        match=r"RangeSource\(start=0, stop=5, step=1\).*"
        rf"record key {key} is out of range.*5 records",
    ):
        source[key]
    with pytest.raises(IndexError):  # Still an IndexError for generic code.
        source.__getitems__([0, key])


@pytest.mark.parametrize("key", [1.0, "1", None])
def test_non_integer_keys_raise_a_type_error(key):
    with pytest.raises(RecordKeyTypeError, match="record keys are integers"):
        RangeSource(5)[key]


def test_numpy_integer_keys_and_negative_keys():
    source = SequenceSource(["a", "b", "c"])
    assert source[np.int64(2)] == "c"
    assert source[-1] == "c"
    assert source.__getitems__(np.array([2, -3, 1])) == ["c", "a", "b"]
    assert source.__getitems__([]) == []


def test_sources_satisfy_the_protocols():
    for source in (RangeSource(3), SequenceSource([1])):
        assert isinstance(source, RandomAccessDataSource)
        assert isinstance(source, SupportsGetItems)


def test_read_records_falls_back_to_getitem():
    class Plain:
        def __len__(self):
            return 3

        def __getitem__(self, key):
            return key * 10

    assert read_records(Plain(), [2, 0]) == [20, 0]


def test_sequence_source_needs_a_sequence():
    with pytest.raises(TypeError, match="needs a sequence"):
        SequenceSource(iter([1, 2]))  # type: ignore[arg-type]
    assert repr(SequenceSource([1, 2])) == "SequenceSource(type='list', len=2)"


def test_pickle_round_trip_and_spawned_process(spawn_pool):
    for source in (RangeSource(2, 20, 3), SequenceSource([{"a": 1}, {"a": 2}])):
        copy = pickle.loads(pickle.dumps(source))
        assert list(copy) == list(source)
        assert spawn_pool(read_records, source, [1, 0]) == read_records(source, [1, 0])


def test_closed_sources_refuse_reads_and_context_manager_closes():
    with RangeSource(3) as source:
        assert source[0] == 0
    with pytest.raises(SourceClosedError, match="was closed"):
        source[0]


@given(
    start=st.integers(-(2**40), 2**40),
    length=st.integers(0, 50),
    step=st.integers(-(2**20), 2**20).filter(bool),
    data=st.data(),
)
def test_batched_range_reads_equal_single_reads_also_past_int64(start, length, step, data):
    for offset in (0, 2**63):  # Vectorised below 2**31, element by element above.
        source = RangeSource(start + offset, start + offset + length * step, step)
        n = len(source)
        if n == 0:
            continue
        keys = data.draw(st.lists(st.integers(-n, n - 1), max_size=20))
        assert source.__getitems__(keys) == [source[k] for k in keys]
        assert all(type(value) is int for value in source.__getitems__(keys))


RECORDS = st.one_of(
    st.integers(),
    st.text(max_size=3),
    st.tuples(st.integers()),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.lists(st.integers(), max_size=2),
)


@given(st.lists(RECORDS, min_size=1, max_size=20), st.data())
def test_batched_reads_copy_dicts_and_lists_and_return_the_rest_as_stored(records, data):
    """`__getitems__` gathers in one call: the same records `[source[k] for k in keys]` give."""
    keys = data.draw(st.lists(st.integers(-len(records), len(records) - 1), max_size=30))
    source = SequenceSource(records)
    got = source.__getitems__(keys)
    assert got == [source[k] for k in keys] == [records[k] for k in keys]
    for key, record in zip(keys, got, strict=True):
        if type(record) in (dict, list):
            assert record is not records[key]  # Changing it leaves the source as it was.
            record.clear()
            assert source[key] == records[key]
        else:
            assert record is records[key]


def test_batched_reads_of_arrays_ranges_and_tuples_index_each_record():
    array = np.arange(10) * 3
    assert SequenceSource(array).__getitems__([4, 0, 4]) == [12, 0, 12]
    assert SequenceSource(range(5, 15)).__getitems__([9, 1]) == [14, 6]
    assert SequenceSource(("a", "b")).__getitems__(np.array([1, 0, -1])) == ["b", "a", "b"]
