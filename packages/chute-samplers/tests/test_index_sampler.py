import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_core import InvalidStateError, RecordIndexError, RecordMetadata
from chute_samplers import (
    IndexSampler,
    IndexSamplerIterator,
    NoSharding,
    RepeatMap,
    ShardMap,
    ShardOptions,
    ShuffleMap,
    record_rng,
)
from chute_sources import RangeSource
from chute_testing import assert_resumes


def _keys(sampler):
    return [m.record_key for m in sampler]


class Comparable:
    """Wraps a sampler iterator so elements compare by value (generators compare by id)."""

    def __init__(self, iterator):
        self._iterator = iterator

    def __iter__(self):
        return self

    def __next__(self):
        m = next(self._iterator)
        return (m.index, m.record_key, None if m.rng is None else int(m.rng.integers(2**63)))

    def get_state(self):
        return self._iterator.get_state()

    def set_state(self, state):
        self._iterator.set_state(state)


def test_guide_example_prints_record_metadata_and_reshuffles_each_epoch():
    sampler = IndexSampler(
        num_records=5,
        num_epochs=2,
        shard_options=ShardOptions(shard_index=0, shard_count=1, drop_remainder=True),
        shuffle=True,
        seed=0,
    )
    metadata = list(sampler)
    assert [m.index for m in metadata] == list(range(10))
    assert repr(metadata[1]) == "RecordMetadata(index=1, record_key=2, rng=Generator(Philox))"
    keys = [m.record_key for m in metadata]
    assert sorted(keys[:5]) == sorted(keys[5:]) == [0, 1, 2, 3, 4]
    assert keys[:5] != keys[5:]
    assert repr(sampler) == (
        "IndexSampler(num_records=5, shard_options=ShardOptions(shard_index=0, shard_count=1, "
        "drop_remainder=True), shuffle=True, num_epochs=2, seed=0)"
    )


def test_without_shuffle_records_come_in_order_and_without_seed_there_is_no_rng():
    metadata = list(IndexSampler(3, num_epochs=2))
    assert metadata == [RecordMetadata(i, i % 3) for i in range(6)]


def test_rng_is_a_function_of_seed_and_global_index_only():
    one = IndexSampler(10, 1, NoSharding(), shuffle=True, seed=4)
    draws = {m.index: m.rng.random() for m in one}
    for shard in range(3):
        sharded = IndexSampler(10, 1, ShardOptions(shard, 3), shuffle=True, seed=4)
        for m in sharded:
            assert m.rng.random() == draws[m.index]
    assert draws[3] == record_rng(4, 3, "chute.IndexSampler").random()


def test_random_access_equals_iteration_and_vectorised_keys():
    sampler = IndexSampler(37, num_epochs=3, shard_options=ShardOptions(1, 4), shuffle=True, seed=9)
    metadata = list(sampler)
    assert len(metadata) == len(sampler) == 3 * 9
    for position in (0, 8, 9, 26, -1):
        got, want = sampler[position], metadata[position]
        assert (got.index, got.record_key) == (want.index, want.record_key)
        assert got.rng.random() == record_rng(9, want.index, "chute.IndexSampler").random()
    assert sampler.record_keys(np.arange(27)).tolist() == [m.record_key for m in metadata]


def test_no_sharding_equals_repeat_of_shuffle_node():
    sampler = IndexSampler(23, num_epochs=4, shuffle=True, seed=5)
    node = RepeatMap(ShuffleMap(RangeSource(23), seed=5), num_epochs=4)
    assert _keys(sampler) == list(node)


def test_sharding_equals_shard_node_over_repeated_shuffle_when_shards_divide_epochs():
    node = RepeatMap(ShuffleMap(RangeSource(24), seed=5), num_epochs=3)
    for shard in range(4):
        sampler = IndexSampler(24, 3, ShardOptions(shard, 4), shuffle=True, seed=5)
        assert _keys(sampler) == list(ShardMap(node, shard, 4))


@settings(max_examples=60, deadline=None)
@given(
    num_records=st.integers(0, 60),
    shard_count=st.integers(1, 7),
    drop_remainder=st.booleans(),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**64 - 1),
)
def test_shards_are_disjoint_and_cover_every_epoch(
    num_records, shard_count, drop_remainder, shuffle, seed
):
    epochs = 3
    shards = [
        IndexSampler(
            num_records, epochs, ShardOptions(i, shard_count, drop_remainder), shuffle, seed
        )
        for i in range(shard_count)
    ]
    lengths = [s.epoch_length for s in shards]
    if drop_remainder:
        assert set(lengths) == {num_records // shard_count}
    else:
        assert max(lengths) - min(lengths) <= (1 if num_records else 0)
        assert sum(lengths) == num_records
    for epoch in range(epochs):
        seen = []
        for shard, length in zip(shards, lengths, strict=True):
            seen += shard.record_keys(np.arange(epoch * length, (epoch + 1) * length)).tolist()
        assert len(seen) == len(set(seen))  # Disjoint.
        if not drop_remainder:
            assert sorted(seen) == list(range(num_records))  # Covering.
    all_indices = [m.index for s in shards for m in s]
    assert len(all_indices) == len(set(all_indices))


def test_each_shard_sees_different_records_in_different_epochs():
    sampler = IndexSampler(1000, 2, ShardOptions(0, 4), shuffle=True, seed=1)
    first, second = set(_keys(sampler)[:250]), set(_keys(sampler)[250:])
    assert 0 < len(first & second) < 250


@pytest.mark.parametrize("num_records", [65535, 65536, 65537])
def test_every_epoch_is_a_permutation_around_a_power_of_two(num_records):
    sampler = IndexSampler(num_records, None, shuffle=True, seed=0)
    for epoch in (0, 1):
        keys = sampler.record_keys(np.arange(epoch * num_records, (epoch + 1) * num_records))
        assert np.array_equal(np.sort(keys), np.arange(num_records))


def test_endless_sampler_has_no_len_but_random_access_far_ahead():
    sampler = IndexSampler(5, None, shuffle=True, seed=3)
    assert sampler.endless
    with pytest.raises(TypeError, match="endless"):
        len(sampler)
    far = sampler[10**12 + 2]
    assert far.index == 10**12 + 2 and 0 <= far.record_key < 5
    with pytest.raises(RecordIndexError):
        sampler[-1]
    assert list(IndexSampler(0, None)) == []
    assert len(IndexSampler(2, None, ShardOptions(2, 3, drop_remainder=True))) == 0


def test_out_of_range_positions_raise():
    sampler = IndexSampler(4, 2)
    with pytest.raises(RecordIndexError, match="out of range"):
        sampler[8]
    with pytest.raises(RecordIndexError, match="out of range"):
        sampler.record_keys([0, 8])
    assert sampler[-8].record_key == 0
    assert sampler.record_keys([-1, -8]).tolist() == [3, 0]
    with pytest.raises(RecordIndexError, match="out of range"):
        sampler.record_keys([-9])
    with pytest.raises(RecordIndexError, match="out of range"):
        IndexSampler(4, None).record_keys([-1])


def test_iterator_resumes_mid_epoch_at_boundaries_start_and_end():
    def make():
        return Comparable(iter(IndexSampler(7, 3, ShardOptions(1, 2), shuffle=True, seed=11)))

    elements = assert_resumes(make, epoch_length=3, every=1)
    assert len(elements) == 9


def test_endless_iterator_resumes():
    assert_resumes(
        lambda: Comparable(iter(IndexSampler(5, None, shuffle=True, seed=2))),
        max_elements=23,
        epoch_length=5,
        every=1,
    )


def test_iterator_resumes_across_chunks():
    sampler = IndexSampler(1000, 2, shuffle=True, seed=2)
    assert_resumes(lambda: Comparable(iter(sampler)), epoch_length=1000, every=None)
    unseeded = IndexSampler(600, 1)
    assert_resumes(
        lambda: iter(unseeded), every=97, expected=[(RecordMetadata(i, i)) for i in range(600)]
    )


def test_iterator_state_is_json_and_validated():
    it = IndexSamplerIterator(IndexSampler(5, 1), position=2)
    assert json.loads(json.dumps(it.get_state())) == {"position": 2}
    assert next(it).record_key == 2
    for bad in ({}, {"position": -1}, {"position": 6}, {"position": "3"}, [], {"position": True}):
        with pytest.raises(InvalidStateError):
            it.set_state(bad)
    it.set_state({"position": 5})
    assert list(it) == []


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_records": -1}, ValueError, "num_records must be >= 0"),
        ({"num_records": 3.0}, TypeError, "num_records must be an int"),
        ({"num_records": 3, "num_epochs": -1}, ValueError, "num_epochs must be >= 0"),
        ({"num_records": 3, "shuffle": True}, ValueError, "shuffle=True needs a seed"),
        ({"num_records": 3, "shuffle": 1, "seed": 0}, TypeError, "shuffle must be a bool"),
        ({"num_records": 3, "seed": -5}, ValueError, "seed must be >= 0"),
        ({"num_records": 3, "shard_options": (0, 1)}, TypeError, "shard_options must be"),
    ],
)
def test_bad_arguments_name_what_is_wrong(kwargs, error, match):
    with pytest.raises(error, match=match):
        IndexSampler(**kwargs)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((3, 3), ValueError, "shard_index must be < shard_count"),
        ((-1, 3), ValueError, "shard_index must be >= 0"),
        ((0, 0), ValueError, "shard_count must be >= 1"),
        ((0, 2, "yes"), TypeError, "drop_remainder must be a bool"),
        ((0.0, 2), TypeError, "shard_index must be an int"),
    ],
)
def test_shard_options_are_validated(args, error, match):
    with pytest.raises(error, match=match):
        ShardOptions(*args)


def test_shard_options_are_frozen_and_no_sharding_is_one_shard():
    options = ShardOptions(1, 2, True)
    with pytest.raises(AttributeError):
        options.shard_index = 0  # type: ignore[misc]
    assert NoSharding() == NoSharding()
    assert (NoSharding().shard_index, NoSharding().shard_count) == (0, 1)
    assert repr(NoSharding()) == "NoSharding()"
    with pytest.raises(TypeError):
        NoSharding(1)  # type: ignore[call-arg]
