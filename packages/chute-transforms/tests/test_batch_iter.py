"""BatchIter and UnbatchIter: batches, remainders, padding, atomic batches and resume."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_core import DROPPED, InvalidStateError
from chute_samplers import IterNode, SequentialIter, ShuffleMap
from chute_sources import RangeSource
from chute_testing import ListIterator, assert_resumes, assert_trees_equal
from chute_transforms import BatchError, BatchIter, BatchTransform, UnbatchIter


class FailsOnce(ListIterator):
    """A ListIterator whose item `bad` raises RuntimeError the first time it is read."""

    def __init__(self, items, bad):
        super().__init__(items)
        self.bad, self.failed = bad, False

    def __next__(self):
        if self.get_state()["index"] == self.bad and not self.failed:
            self.failed = True
            raise RuntimeError("flaky read")
        return super().__next__()


def _elements(n):
    return [{"x": np.full(2, i, np.int32), "name": f"e{i}"} for i in range(n)]


def _expected_batches(n, size, mode):
    elements = _elements(n)
    out = []
    for start in range(0, n, size):
        chunk = elements[start : start + size]
        if len(chunk) < size and mode == "drop":
            break
        x = np.stack([e["x"] for e in chunk])
        names = [e["name"] for e in chunk]
        if mode != "pad":
            out.append({"x": x, "name": names})
            continue
        mask = np.arange(size) < len(chunk)
        x = np.concatenate([x, np.zeros((size - len(chunk), 2), np.int32)])
        out.append(({"x": x, "name": names + [""] * (size - len(chunk))}, mask))
    return out


@pytest.mark.parametrize("n", [0, 1, 5, 6, 7])
@pytest.mark.parametrize("size", [1, 3])
@pytest.mark.parametrize("mode", ["keep", "drop", "pad"])
def test_batch_iter_resumes_everywhere_and_handles_the_remainder(n, size, mode):
    def make():
        return BatchIter(
            ListIterator(_elements(n)), size, drop_remainder=mode == "drop", pad=mode == "pad"
        )

    assert_resumes(make, expected=_expected_batches(n, size, mode))


def test_batch_iter_state_is_the_parent_state_at_the_next_batch():
    it = BatchIter(ListIterator(list(range(10))), 4)
    assert it.get_state() == {"parent": {"index": 0}}
    next(it)
    assert it.get_state() == {"parent": {"index": 4}}


def test_batch_fn_is_used_and_padded_when_asked():
    def sums(elements):
        return {"sum": np.array([e * 10 for e in elements])}

    batches = assert_resumes(
        lambda: BatchIter(ListIterator([1, 2, 3]), 2, pad=True, batch_fn=sums),
        expected=[
            ({"sum": np.array([10, 20])}, np.array([True, True])),
            ({"sum": np.array([30, 0])}, np.array([True, False])),
        ],
    )
    assert len(batches) == 2
    plain = list(BatchIter(ListIterator([1, 2, 3]), 2, batch_fn=sums))
    assert_trees_equal(plain, [{"sum": np.array([10, 20])}, {"sum": np.array([30])}])


def test_from_transform_copies_the_options():
    def batch_fn(elements):
        return len(elements)

    it = BatchIter.from_transform(
        ListIterator(list(range(5))), BatchTransform(2, drop_remainder=True, batch_fn=batch_fn)
    )
    assert list(it) == [2, 2]


def test_a_failed_batch_leaves_the_state_at_its_start_and_next_retries_it():
    parent = FailsOnce(list(range(6)), bad=4)
    it = BatchIter(parent, 3)
    assert_trees_equal(next(it), np.array([0, 1, 2]))
    with pytest.raises(RuntimeError, match="flaky"):
        next(it)
    assert it.get_state() == {"parent": {"index": 3}}
    assert_trees_equal(list(it), [np.array([3, 4, 5])])


def test_a_batching_error_rewinds_the_parent_too():
    it = BatchIter(ListIterator([1, 2, "three", 4]), 2)
    next(it)
    with pytest.raises(BatchError, match="element 1 of the batch has type int"):
        next(it)
    assert it.get_state() == {"parent": {"index": 2}}


@pytest.mark.parametrize(
    "state", [{}, {"parent": 3}, {"parent": {"index": 0}, "extra": 1}, [1], {"parent": {"i": 0}}]
)
def test_batch_iter_rejects_foreign_states(state):
    with pytest.raises(InvalidStateError):
        BatchIter(ListIterator([1]), 1).set_state(state)


def test_batch_iter_validates_its_options():
    with pytest.raises(ValueError, match="contradict"):
        BatchIter(ListIterator([]), 2, drop_remainder=True, pad=True)
    with pytest.raises(TypeError, match="batch_size"):
        BatchIter(ListIterator([]), "2")
    assert "batch_size=2" in repr(BatchIter(ListIterator([]), 2))


def _batches(sizes):
    start, out = 0, []
    for size in sizes:
        out.append({"v": np.arange(start, start + size), "s": [str(i) for i in range(size)]})
        start += size
    return out


@pytest.mark.parametrize("sizes", [[], [3], [2, 0, 3], [0], [1, 1, 4, 2]])
def test_unbatch_iter_resumes_at_every_row(sizes):
    expected = []
    for batch in _batches(sizes):
        expected += [
            {"v": np.int64(v), "s": s} for v, s in zip(batch["v"], batch["s"], strict=True)
        ]
    assert_resumes(lambda: UnbatchIter(ListIterator(_batches(sizes))), expected=expected)


def test_unbatch_iter_state_inside_and_between_batches():
    it = UnbatchIter(ListIterator(_batches([2, 1])))
    next(it)
    # Inside a batch the state names its position (the parent's origin), for resharding.
    assert it.get_state() == {"parent": {"index": 0}, "offset": 1, "at": 0}
    next(it)
    assert it.get_state() == {"parent": {"index": 1}, "offset": 0}


def test_unbatch_iter_drops_the_rows_a_skip_entry_says_were_delivered_elsewhere():
    it = UnbatchIter(ListIterator(_batches([3, 2, 2])))
    it.set_state({"parent": {"index": 0}, "offset": 0, "skip": [[0, 2], [2, 1]]})
    assert it.get_state()["skip"] == [[0, 2], [2, 1]]
    assert next(it)["v"] == 2 and it.origin == (0, 2)  # Rows 0 and 1 went elsewhere.
    assert it.get_state() == {"parent": {"index": 1}, "offset": 0, "skip": [[2, 1]]}
    assert [int(row["v"]) for row in it] == [3, 4, 6]
    assert "skip" not in it.get_state()


def test_unbatch_iter_state_inside_a_skipped_batch_restores_the_same_rows():
    def make():
        it = UnbatchIter(ListIterator(_batches([4, 2])))
        it.set_state({"parent": {"index": 0}, "offset": 0, "skip": [[0, 1], [1, 1]]})
        return it

    it = make()
    next(it)
    state = it.get_state()  # One row yielded after the one dropped: 2 delivered in all.
    assert state == {"parent": {"index": 0}, "offset": 1, "at": 0, "skip": [[0, 1], [1, 1]]}
    rest = [int(row["v"]) for row in it]
    again = make()
    again.set_state(state)
    assert again.get_state() == state  # Before the batch is read again, too.
    assert [int(row["v"]) for row in again] == rest == [2, 3, 5]


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({"parent": {"index": 0}, "offset": 1, "at": 1}, r"state\['at'\] = 1 names the batch"),
        ({"parent": {"index": 0}, "offset": 0, "skip": [[0, 4]]}, "4 rows of position 0"),
        ({"parent": {"index": 0}, "offset": 0, "skip": [[0, 0]]}, "skip"),
        ({"parent": {"index": 0}, "offset": 0, "skip": "all"}, "skip"),
        ({"parent": {"index": 0}, "offset": 0, "at": "0"}, "at"),
    ],
    ids=["at_of_another_batch", "more_rows_than_the_batch", "zero_rows", "not_a_list", "at_text"],
)
def test_unbatch_iter_refuses_skip_and_at_that_do_not_fit(state, message):
    it = UnbatchIter(ListIterator(_batches([2, 1])))

    def restore_and_read():  # A refused `at` or skip count shows when its batch is read.
        it.set_state(state)
        return next(it)

    with pytest.raises(InvalidStateError, match=message):
        restore_and_read()


def test_unbatch_iter_masked_drops_padding_and_inverts_padded_batching():
    def make():
        return UnbatchIter(BatchIter(ListIterator(list(range(7))), 3, pad=True), masked=True)

    assert_resumes(make, expected=[np.int64(i) for i in range(7)])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(-5, 5), max_size=12), st.integers(1, 5))
def test_unbatch_of_batch_is_the_identity_and_resumes(items, size):
    def make():
        return UnbatchIter(BatchIter(ListIterator(items), size))

    assert_resumes(make, expected=[np.int64(i) for i in items])


def test_unbatch_iter_rejects_states_that_do_not_fit_the_data():
    it = UnbatchIter(ListIterator(_batches([2])))
    it.set_state({"parent": {"index": 0}, "offset": 5})
    with pytest.raises(InvalidStateError, match="skips 5 rows of a batch that has 2"):
        next(it)
    it.set_state({"parent": {"index": 1}, "offset": 1})
    assert it.get_state() == {"parent": {"index": 1}, "offset": 1}
    with pytest.raises(InvalidStateError, match="no batch there"):
        next(it)
    with pytest.raises(InvalidStateError, match="offset"):
        it.set_state({"parent": {"index": 0}, "offset": -1})


def test_unbatch_iter_masked_needs_pairs():
    with pytest.raises(BatchError, match=r"expects \(batch, mask\) pairs"):
        next(UnbatchIter(ListIterator([np.zeros(2)]), masked=True))


class OneByOne(IterNode):
    """Its parent's elements and states, without the parent's bulk `next_many`."""

    def __init__(self, parent):
        self._parent = parent

    def __next__(self):
        return next(self._parent)

    @property
    def origin(self):
        return self._parent.origin

    def get_state(self):
        return self._parent.get_state()

    def set_state(self, state):
        self._parent.set_state(state)


class CorruptFrom:
    """Records from `bad` on raise KeyError."""

    def __init__(self, size, bad):
        self.size, self.bad = size, bad

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        if i >= self.bad:
            raise KeyError(f"record {i} is corrupt")
        return i


@pytest.mark.parametrize("chunk_size", [1, 5, 256])
@pytest.mark.parametrize("size", [1, 4, 9])
@pytest.mark.parametrize("mode", ["keep", "drop", "pad"])
def test_batches_of_a_reader_taken_in_bulk_equal_element_by_element_and_resume(
    chunk_size, size, mode
):
    data = [DROPPED if i % 7 in (1, 2) else i for i in range(60)]
    for dataset in (data, ShuffleMap(RangeSource(5000), seed=2)[:70]):
        options = {"drop_remainder": mode == "drop", "pad": mode == "pad"}
        expected = list(BatchIter(OneByOne(SequentialIter(dataset, chunk_size)), size, **options))
        assert_resumes(
            lambda d=dataset, o=options: BatchIter(SequentialIter(d, chunk_size), size, **o),
            expected=expected,
        )


def test_a_read_error_in_a_bulk_batch_is_the_same_as_element_by_element():
    fast = BatchIter(SequentialIter(CorruptFrom(20, 6), 4), 4)
    slow = BatchIter(OneByOne(SequentialIter(CorruptFrom(20, 6), 4)), 4)
    assert_trees_equal(next(fast), next(slow))
    errors = []
    for it in (fast, slow):
        with pytest.raises(KeyError, match="record 6 is corrupt") as raised:
            next(it)
        errors.append(raised.value.__notes__)
        assert it.get_state() == {"parent": {"position": 4}}
    assert errors[0] == errors[1]
    assert "chute: raised by reading CorruptFrom on the element at position 6" in errors[0]
