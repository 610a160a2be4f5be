"""`RebatchIter` and `UnbatchMap`: re-cutting batches, and random access to their rows."""

import numpy as np
import pytest

from chute_core import DROPPED, InvalidStateError
from chute_testing import ListIterator, assert_resumes, assert_trees_equal
from chute_transforms import BatchError, BatchMap, FilterMap, RebatchIter, UnbatchMap


def _batches(sizes):
    out, start = [], 0
    for size in sizes:
        out.append(
            {"x": np.arange(start, start + size), "s": [str(i) for i in range(start, start + size)]}
        )
        start += size
    return out


@pytest.mark.parametrize("size", [1, 2, 3, 5, 11])
@pytest.mark.parametrize("drop_remainder", [False, True])
def test_rebatch_gives_the_rows_in_order_and_resumes_everywhere(size, drop_remainder):
    sizes = [3, 1, 4, 2]
    total = sum(sizes)
    stop = total - total % size if drop_remainder else total
    expected = [
        {
            "x": np.arange(a, min(a + size, stop)),
            "s": [str(i) for i in range(a, min(a + size, stop))],
        }
        for a in range(0, stop, size)
    ]
    out = assert_resumes(
        lambda: RebatchIter(ListIterator(_batches(sizes)), size, drop_remainder=drop_remainder)
    )
    assert_trees_equal(out, expected)


def test_rebatch_slices_views_and_copies_only_across_inputs():
    source = np.arange(6)
    it = RebatchIter(ListIterator([source, np.arange(6, 8)]), 4)
    first, second = next(it), next(it)
    assert np.shares_memory(first, source)
    assert second.tolist() == [4, 5, 6, 7] and not np.shares_memory(second, source)
    assert it.origin == (0, 4)


def test_rebatch_leaves_out_the_rows_a_skip_entry_says_went_elsewhere():
    """A resharded state's `skip`: rows of input batches another process handed out."""

    def make():
        it = RebatchIter(ListIterator([np.arange(3), np.arange(3, 7), np.arange(7, 9)]), 3)
        it.set_state({"parent": {"index": 0}, "offset": 0, "skip": [[1, 2], [2, 1]]})
        return it

    assert [b.tolist() for b in make()] == [[0, 1, 2], [5, 6, 8]]
    it = make()
    next(it)
    assert it.get_state() == {"parent": {"index": 1}, "offset": 0, "skip": [[1, 2], [2, 1]]}
    assert_resumes(make, expected=[np.arange(3), np.array([5, 6, 8])])


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({"parent": {"index": 0}, "offset": 1, "at": 1}, r"state\['at'\] = 1 names the batch"),
        ({"parent": {"index": 0}, "offset": 0, "skip": [[0, 2]]}, "skips 2 rows of a batch of 2"),
        ({"parent": {"index": 0}, "offset": 0, "skip": [[0, -1]]}, "skip"),
        ({"parent": {"index": 0}, "offset": 0, "at": -1}, "at"),
    ],
    ids=["at_of_another_batch", "all_rows", "negative_rows", "negative_at"],
)
def test_rebatch_refuses_at_and_skip_that_do_not_fit(state, message):
    it = RebatchIter(ListIterator([np.arange(2), np.arange(2, 4)]), 2)

    def restore_and_read():  # A refused `at` or skip count shows when its batch is read.
        it.set_state(state)
        return next(it)

    with pytest.raises(InvalidStateError, match=message):
        restore_and_read()


def test_rebatch_refuses_a_batch_without_rows_and_a_stale_offset():
    with pytest.raises(BatchError) as caught:
        next(RebatchIter(ListIterator([np.zeros(0)]), 2))
    assert str(caught.value) == (
        "RebatchIter(batch_size=2, drop_remainder=False): an input batch has no rows (or no "
        "array or list-of-str leaf); rebatch needs batches with a leading batch dimension."
    )
    it = RebatchIter(ListIterator([np.arange(2)]), 2)
    it.set_state({"parent": {"index": 0}, "offset": 2})
    with pytest.raises(InvalidStateError) as caught:
        next(it)
    assert str(caught.value) == (
        "RebatchIter(batch_size=2, drop_remainder=False): the state skips 2 rows of a batch "
        "of 2. Was it saved with other data?"
    )


def test_unbatch_map_over_a_batch_map_knows_its_rows_without_reading():
    node = UnbatchMap(BatchMap(range(7), 3))
    assert len(node) == 7
    assert [int(x) for x in node] == list(range(7))
    assert [int(x) for x in node.__getitems__([6, 0, 3, 3])] == [6, 0, 3, 3]


def test_unbatch_map_counts_rows_of_ragged_or_filtered_batches_once():
    node = UnbatchMap([np.arange(2), DROPPED, np.arange(10, 13)])
    assert len(node) == 5
    assert [int(x) for x in node] == [0, 1, 10, 11, 12]
    filtered = UnbatchMap(BatchMap(FilterMap(range(6), lambda x: x != 1), 2))
    assert [int(x) for x in filtered] == [0, 2, 3, 4, 5]


def test_unbatch_map_refuses_padded_batches():
    with pytest.raises(ValueError) as caught:
        UnbatchMap(BatchMap(range(5), 2, pad=True))
    assert str(caught.value).startswith("UnbatchMap: the batches are padded ((batch, mask) pairs)")
