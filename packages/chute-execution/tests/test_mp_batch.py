"""Batches stacked in the workers equal batches built in the consumer, states too."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_execution import (
    ChunkPlan,
    MultiprocessBatchIter,
    MultiprocessingOptions,
    MultiprocessPrefetchIter,
)
from chute_sources import SequenceSource
from chute_testing import assert_resumes, assert_trees_equal
from chute_testing.execution import Remainder, Repeat
from chute_transforms import BatchIter, FilterIter, FlatMapIter


def _records(n):
    return [{"x": np.full(3, i, np.int32), "name": f"r{i}", "label": i % 7} for i in range(n)]


def _plan(n, chunk_size, filtered):
    ops = []
    if filtered:
        ops = [(FilterIter, (Remainder(3, 1),), {}), (FlatMapIter, (Repeat(3),), {})]
    return ChunkPlan(SequenceSource(list(range(n))), ops, chunk_size)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 60),
    chunk_size=st.integers(1, 12),
    batch_size=st.integers(1, 9),
    drop_remainder=st.booleans(),
    pad=st.booleans(),
    filtered=st.booleans(),
)
def test_equals_batching_in_the_consumer(n, chunk_size, batch_size, drop_remainder, pad, filtered):
    if drop_remainder and pad:
        pad = False
    plan = _plan(n, chunk_size, filtered)
    options = MultiprocessingOptions(0)
    ours = MultiprocessBatchIter(plan, options, batch_size, drop_remainder=drop_remainder, pad=pad)
    theirs = BatchIter(
        MultiprocessPrefetchIter(plan, options), batch_size, drop_remainder=drop_remainder, pad=pad
    )
    assert_trees_equal(list(ours), list(theirs))


def test_dict_records_with_strings_across_chunk_boundaries():
    plan = ChunkPlan(SequenceSource(_records(23)), [], chunk_size=5)
    options = MultiprocessingOptions(0)
    ours = list(MultiprocessBatchIter(plan, options, 4))
    theirs = list(BatchIter(MultiprocessPrefetchIter(plan, options), 4))
    assert_trees_equal(ours, theirs)


def test_states_are_interchangeable_with_batching_in_the_consumer():
    plan = _plan(40, 6, filtered=True)
    options = MultiprocessingOptions(0)
    assert_resumes(
        lambda: MultiprocessBatchIter(plan, options, 4),
        make_restored=[lambda: BatchIter(MultiprocessPrefetchIter(plan, options), 4)],
    )
