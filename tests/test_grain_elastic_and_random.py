"""`ElasticIterator`, `index_shuffle` and `RngPool` through `chute.grain`, against Grain.

Grain 0.2.18 documents `ElasticIterator` as a global batch cut over hosts whose state
(the same on every host after the same steps) restores on another number of hosts,
`index_shuffle` as the position of an index in a keyed permutation of `[0, max_index]`,
and `RngPool` as generators reused per (index, op_seed). Grain is a test-only peer.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute.grain as cgrain

grain = pytest.importorskip("grain")

SETTINGS = settings(max_examples=40, deadline=None)


def _batches(iterator, count):
    return [batch.tolist() for batch in itertools.islice(iterator, count)]


def _elastic(lib, n, global_batch, shards, index):
    options = lib.sharding.ShardOptions(index, shards, drop_remainder=True)
    return lib.experimental.ElasticIterator(lib.MapDataset.range(n), global_batch, options)


@SETTINGS
@given(
    n=st.integers(0, 60),
    per_host=st.integers(1, 4),
    before=st.integers(1, 4),
    after=st.integers(1, 4),
    steps=st.integers(0, 6),
)
def test_hosts_read_grains_batches_and_restore_on_another_host_count(
    n, per_host, before, after, steps
):
    seen = []
    states = set()
    steps = min(steps, n // (per_host * before))  # Steps every host can take.
    for index in range(before):
        ours, theirs = (
            _elastic(lib, n, per_host * before, before, index) for lib in (cgrain, grain)
        )
        head = _batches(ours, steps)
        assert head == _batches(theirs, steps)
        states.add(tuple(ours.get_state().items()))
        seen.extend(x for batch in head for x in batch)
    assert len(states) == 1  # Every host holds the same state.
    (state,) = states
    for index in range(after):
        ours = _elastic(cgrain, n, per_host * after, after, index)
        theirs = _elastic(grain, n, per_host * after, after, index)
        ours.set_state(dict(state))
        theirs.set_state(dict(state))
        rest = _batches(ours, 100)
        assert rest == _batches(theirs, 100)
        seen.extend(x for batch in rest for x in batch)
    assert len(seen) == len(set(seen)) and set(seen) <= set(range(n))  # None twice.


def test_elastic_iterator_refuses_filters_and_bad_batch_sizes():
    options = cgrain.sharding.ShardOptions(0, 2, drop_remainder=True)
    with pytest.raises(ValueError, match="does not support `filter`"):
        cgrain.experimental.ElasticIterator(
            cgrain.MapDataset.range(8).filter(lambda x: x > 2).map(abs), 4, options
        )
    with pytest.raises(ValueError, match="global batch size 3 is not divisible by shard count 2"):
        cgrain.experimental.ElasticIterator(cgrain.MapDataset.range(8), 3, options)
    it = cgrain.experimental.ElasticIterator(cgrain.MapDataset.range(8), 4, options)
    with pytest.raises(ValueError, match="global_next_index"):
        it.set_state({"position": 3})


def test_elastic_iterator_with_workers_reads_the_same_batches():
    options = cgrain.sharding.ShardOptions(1, 2, drop_remainder=True)
    plain = cgrain.experimental.ElasticIterator(cgrain.MapDataset.range(20), 4, options)
    workers = cgrain.experimental.ElasticIterator(
        cgrain.MapDataset.range(20),
        4,
        options,
        multiprocessing_options=cgrain.MultiprocessingOptions(num_workers=2),
    )
    assert (
        _batches(workers, 10)
        == _batches(plain, 10)
        == [[1, 3], [5, 7], [9, 11], [13, 15], [17, 19]]
    )
    workers.close()


@SETTINGS
@given(
    max_index=st.integers(0, 2**63 - 1) | st.integers(0, 70_000),
    seed=st.integers(0, 2**32 - 1),
    rounds=st.sampled_from([4, 6, 8, 32, 1024]),
    data=st.data(),
)
def test_index_shuffle_gives_grains_positions(max_index, seed, rounds, data):
    index = data.draw(st.integers(0, max_index))
    ours = cgrain.experimental.index_shuffle(index, max_index, seed, rounds)
    assert ours == grain.experimental.index_shuffle(index, max_index, seed, rounds)


def test_index_shuffle_is_a_permutation_and_checks_its_arguments():
    order = [cgrain.experimental.index_shuffle(i, 99, 5, 4) for i in range(100)]
    assert sorted(order) == list(range(100)) and order != list(range(100))
    with pytest.raises(ValueError, match="rounds must be an even integer between 4 and 1024"):
        cgrain.experimental.index_shuffle(0, 9, 1, 5)
    with pytest.raises(ValueError, match=r"index must be in \[0, max_index\], got index 10"):
        cgrain.experimental.index_shuffle(10, 9, 1, 4)


def test_rng_pool_draws_grains_numbers_for_each_index_and_op_seed():
    ours, theirs = cgrain.experimental.RngPool(11), grain.experimental.RngPool(11)
    for index, op_seed in [(0, 0), (5, 0), (5, 3), (2**40, 9)]:
        mine = ours.acquire_rng(index, op_seed=op_seed)
        peer = theirs.acquire_rng(index, op_seed=op_seed)
        np.testing.assert_array_equal(
            mine.integers(1 << 62, size=8), peer.integers(1 << 62, size=8)
        )
        ours.release_rng(mine)
        theirs.release_rng(peer)
    again = ours.acquire_rng(5, op_seed=3)
    first = grain.experimental.RngPool(11).acquire_rng(5, op_seed=3)
    assert again.random() == first.random()


def test_four_hosts_then_three_read_every_record_once():
    seen = []
    for index in range(4):
        it = _elastic(cgrain, 52, 8, 4, index)
        seen += [x for batch in _batches(it, 2) for x in batch]
        state = it.get_state()
    assert state == {"global_next_index": 16}
    for index in range(3):
        it = _elastic(cgrain, 52, 6, 3, index)  # 36 left: six global batches of 6.
        it.set_state(state)
        seen += [x for batch in _batches(it, 100) for x in batch]
    assert sorted(seen) == list(range(52))
