"""DataLoader: the seeds' example, rng from the record metadata, workers, resume."""

import threading

import numpy as np
import pytest

from chute_execution import DataLoader, ReadOptions
from chute_samplers import IndexSampler, NoSharding, ShardOptions
from chute_sources import RangeSource, SharedMemorySource
from chute_testing import assert_resumes, assert_trees_equal
from chute_testing.execution import AddNoise, Remainder
from chute_transforms import BatchTransform, FilterTransform, MapTransform, RandomMapTransform


class PlusOne(MapTransform):
    def map(self, element):
        return element + 1


class Noise(RandomMapTransform):
    def random_map(self, element, rng):
        return float(element) + rng.random()


class Even(FilterTransform):
    def filter(self, element):
        return element % 2 == 0


def _sampler(n=10, epochs=2, seed=0):
    return IndexSampler(n, num_epochs=epochs, shard_options=NoSharding(), shuffle=True, seed=seed)


def test_the_seed_example_reads_each_record_once_per_epoch():
    source = SharedMemorySource(range(5))
    loader = DataLoader(data_source=source, sampler=_sampler(5), worker_count=0)
    out = list(loader)
    assert sorted(out[:5]) == sorted(out[5:]) == [0, 1, 2, 3, 4]
    expected = [int(k) for k in _sampler(5).record_keys(np.arange(10))]
    assert out == expected
    source.close()


def test_random_map_gets_the_records_own_generator():
    loader = DataLoader(data_source=RangeSource(10), sampler=_sampler(), operations=[Noise()])
    sampler = _sampler()
    expected = [float(m.record_key) + m.rng.random() for m in sampler]
    assert list(loader) == expected


def test_operations_and_batches_match_a_plain_loop():
    ops = [PlusOne(), Even(), BatchTransform(batch_size=3, drop_remainder=False)]
    loader = DataLoader(data_source=RangeSource(10), sampler=_sampler(), operations=ops)
    plain = [m.record_key + 1 for m in _sampler() if (m.record_key + 1) % 2 == 0]
    expected = [np.asarray(plain[i : i + 3]) for i in range(0, len(plain), 3)]
    assert_trees_equal(list(loader), expected)


@pytest.mark.parametrize("workers", [2, 3])
def test_workers_give_the_same_stream_and_states_move_between_worker_counts(workers):
    # Workers import transforms by name: they come from an importable module.
    ops = [Remainder(3, 1), AddNoise(), BatchTransform(batch_size=4)]

    def make(count):
        loader = DataLoader(
            data_source=RangeSource(40),
            sampler=_sampler(40, epochs=1),
            operations=ops,
            worker_count=count,
            chunk_size=8,
        )
        return lambda: iter(loader)

    expected = list(make(0)())
    assert_trees_equal(list(make(workers)()), expected)
    assert_resumes(make(0), every=None, make_restored=[make(workers)], expected=expected)


def test_sharded_loaders_split_each_epoch():
    shards = [
        list(
            DataLoader(
                data_source=RangeSource(9),
                sampler=IndexSampler(
                    9, num_epochs=1, shard_options=ShardOptions(i, 3), shuffle=True, seed=1
                ),
            )
        )
        for i in range(3)
    ]
    assert sorted(x for shard in shards for x in shard) == list(range(9))


def test_bad_arguments():
    with pytest.raises(TypeError, match="sampler must be an IndexSampler"):
        DataLoader(data_source=RangeSource(3), sampler=[0, 1])
    with pytest.raises(ValueError, match="covers 5 records but the source has only 3"):
        DataLoader(data_source=RangeSource(3), sampler=_sampler(5))


class ThreadNames(RangeSource):
    """A range source that records the names of the threads that read it."""

    def __init__(self, n):
        super().__init__(n)
        self.readers = set()

    def __getitems__(self, keys):
        self.readers.add(threading.current_thread().name)
        return super().__getitems__(keys)


def test_read_options_read_chunks_on_threads_and_change_nothing():
    ops = [AddNoise(), BatchTransform(batch_size=4)]  # From a module: workers import it.

    def loader(workers, read_options, source=None):
        return DataLoader(
            data_source=source or RangeSource(48),
            sampler=_sampler(48, epochs=1),
            operations=ops,
            worker_count=workers,
            read_options=read_options,
            chunk_size=12,
        )

    expected = list(loader(0, None))
    source = ThreadNames(48)
    assert_trees_equal(list(loader(0, ReadOptions(num_threads=3), source)), expected)
    assert source.readers and all(name.startswith("chute-chunk") for name in source.readers)
    assert_trees_equal(list(loader(2, ReadOptions(num_threads=2))), expected)
    make = lambda: iter(loader(0, ReadOptions(num_threads=3)))  # noqa: E731
    assert_resumes(make, every=None, expected=expected)


def test_read_options_of_the_wrong_type_are_refused():
    with pytest.raises(TypeError, match="read_options must be a ReadOptions"):
        DataLoader(data_source=RangeSource(3), sampler=_sampler(3), read_options={"num_threads": 2})


@pytest.mark.parametrize("workers", [0, 2])
def test_an_endless_sampler_reads_epoch_after_epoch_and_resumes(workers):
    sampler = IndexSampler(5, num_epochs=None, shuffle=True, seed=3)
    bounded = IndexSampler(5, num_epochs=4, shuffle=True, seed=3)
    expected = [m.record_key for m in bounded]

    def loader(s):
        return DataLoader(data_source=RangeSource(5), sampler=s, worker_count=workers)

    it = iter(loader(sampler))
    head = [next(it) for _ in range(20)]
    assert head == expected
    assert sorted(head[15:]) == [0, 1, 2, 3, 4]
    resumed = iter(loader(sampler))
    resumed.set_state(it.get_state())
    assert [next(resumed) for _ in range(3)] == [next(it) for _ in range(3)]
    for iterator in (it, resumed):
        iterator.close()
