"""Batches stacked in the workers equal batches built in the consumer: the fluent API.

From packages/chute-execution/tests/test_mp_batch.py; here because it builds its
pipeline with `chute.MapDataset`.
"""

import pytest

import chute
from chute_execution import MultiprocessingOptions
from chute_testing import assert_trees_equal
from chute_testing.execution import FullArray


@pytest.mark.parametrize("workers", [1, 2])
def test_the_fluent_api_batches_in_workers_with_the_same_output(workers):
    def pipeline():
        return chute.MapDataset.range(50).shuffle(seed=2).to_iter_dataset().map(FullArray(8))

    expected = list(pipeline().batch(6))
    options = MultiprocessingOptions(num_workers=workers)
    got = list(pipeline().mp_prefetch(options, chunk_size=12).batch(6))
    assert_trees_equal(got, expected)
    assert all(batch.flags.writeable for batch in got)
