"""The operations a Grain 0.2.18 user reaches for, on the fluent datasets (issue 19).

Each op: its exact elements, exact resume through `assert_resumes` (also into the same
pipeline with another worker count), and the same output with 0 and 2 workers where
the op can sit before or after `mp_prefetch`.
"""

from __future__ import annotations

import operator

import pytest

from chute import IterDataset, MapDataset
from chute_sources.testing import assert_resumes


def _odd(x: int) -> bool:
    return x % 2 == 1


def _stream(n: int = 12) -> IterDataset[int]:
    return MapDataset.range(n).to_iter_dataset().map(operator.neg).filter(_odd)


def _same_with_workers(make, *, max_elements=None):
    """`make(workers)` gives the same elements and states for 0 and 2 workers."""
    expected = assert_resumes(
        lambda: make(0).iter(),
        every=None,
        max_elements=max_elements,
        make_restored=[lambda: make(2).iter()],
    )
    assert_resumes(
        lambda: make(2).iter(),
        every=None,
        max_elements=max_elements,
        make_restored=[lambda: make(0).iter()],
        expected=expected,
    )
    return expected


# --- repeat -------------------------------------------------------------------------


def test_repeat_reads_the_stream_again_each_epoch():
    ds = _stream(6).repeat(2)
    assert list(ds) == [-1, -3, -5, -1, -3, -5]
    assert_resumes(ds.iter, epoch_length=3)
    assert list(_stream(4).repeat().limit(5)) == [-1, -3, -1, -3, -1]


@pytest.mark.parametrize("where", ["before", "after"])
def test_repeat_gives_the_same_stream_with_0_and_2_workers(where):
    def make(workers):
        if where == "before":
            return _stream().repeat(2).mp_prefetch(num_workers=workers, chunk_size=2)
        return _stream().mp_prefetch(num_workers=workers, chunk_size=2).repeat(2)

    assert _same_with_workers(make) == [-1, -3, -5, -7, -9, -11] * 2


def test_a_random_map_after_repeat_draws_anew_each_epoch_and_before_it_does_not():
    ds = MapDataset.range(3).to_iter_dataset()
    after = list(ds.repeat(2).random_map(lambda x, rng: int(rng.integers(1 << 30)), seed=0))
    before = list(ds.random_map(lambda x, rng: int(rng.integers(1 << 30)), seed=0).repeat(2))
    assert after[:3] != after[3:]
    assert before[:3] == before[3:]


# --- limit --------------------------------------------------------------------------


def test_limit_takes_the_first_elements_of_the_stream():
    assert list(_stream().limit(2)) == [-1, -3]
    assert list(_stream().limit(0)) == []
    assert list(_stream().limit(100)) == [-1, -3, -5, -7, -9, -11]
    assert_resumes(_stream().limit(4).iter, expected=[-1, -3, -5, -7])


@pytest.mark.parametrize("where", ["before", "after"])
def test_limit_gives_the_same_stream_with_0_and_2_workers(where):
    def make(workers):
        if where == "before":
            return _stream().limit(4).mp_prefetch(num_workers=workers, chunk_size=2)
        return _stream().mp_prefetch(num_workers=workers, chunk_size=2).limit(4)

    assert _same_with_workers(make) == [-1, -3, -5, -7]


def test_map_dataset_limit_is_a_slice_of_the_first_elements():
    ds = MapDataset.range(10).limit(3)
    assert list(ds) == [0, 1, 2]
    assert len(ds) == 3
    assert len(MapDataset.range(2).limit(5)) == 2
    assert repr(ds).endswith(".limit(count=3)")
