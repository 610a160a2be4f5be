"""Grain's legacy samplers and DataLoader sharding, through `chute.grain`.

Grain 0.2.18 documents a sampler as a map from a global index to `RecordMetadata`, read
by the DataLoader at the indices of its shard (`shard_index + k * shard_count`);
`IndexSampler` keeps each shard's records contiguous. The metadata and the loaders'
elements are compared with Grain's own (a test-only peer); the loader keeps the
sharding remainder when `drop_remainder=False`, as Grain's newest DataLoader does.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
import chute.grain as cgrain

grain = pytest.importorskip("grain")

SETTINGS = settings(max_examples=50, deadline=None)


def _shards(lib, count, drop):
    return [lib.sharding.ShardOptions(i, count, drop_remainder=drop) for i in range(count)]


def _metadata(sampler, count):
    out = []
    try:
        for m in itertools.islice(sampler, count):
            draw = None if m.rng is None else int(m.rng.integers(1 << 30))
            out.append((m.index, m.record_key, draw))
    except ZeroDivisionError:  # Grain, on a shard with no records.
        out.append("empty shard")
    except IndexError as error:  # chute says so.
        out.append("empty shard" if "this shard holds no records" in str(error) else str(error))
    return out


@SETTINGS
@given(
    n=st.integers(1, 20),
    count=st.integers(1, 4),
    drop=st.booleans(),
    epochs=st.none() | st.integers(1, 3),
    seed=st.none() | st.integers(0, 2**32 - 1),
)
def test_sampler_metadata_and_lengths_are_grains(n, count, drop, epochs, seed):
    for ours, theirs in zip(_shards(cgrain, count, drop), _shards(grain, count, drop), strict=True):
        pairs = [
            (
                cgrain.samplers.SequentialSampler(n, ours, seed=seed),
                grain.samplers.SequentialSampler(n, theirs, seed=seed),
            ),
            (
                cgrain.samplers.IndexSampler(n, ours, num_epochs=epochs, seed=seed),
                grain.samplers.IndexSampler(n, theirs, num_epochs=epochs, seed=seed),
            ),
        ]
        for mine, peer in pairs:
            assert len(mine) == len(peer)
            assert repr(mine) == repr(peer)
            assert _metadata(mine, 60) == _metadata(peer, 60)


@SETTINGS
@given(n=st.integers(1, 20), count=st.integers(1, 4), epochs=st.integers(1, 3))
def test_loaders_with_dropped_remainders_read_what_grains_read(n, count, epochs):
    for ours, theirs in zip(_shards(cgrain, count, True), _shards(grain, count, True), strict=True):
        for make in ("SequentialSampler", "IndexSampler"):
            kwargs = {} if make == "SequentialSampler" else {"num_epochs": epochs}
            mine = cgrain.DataLoader(
                data_source=list(range(100, 100 + n)),
                sampler=getattr(cgrain.samplers, make)(n, **kwargs),
                shard_options=ours,
            )
            peer = grain.DataLoader(
                data_source=list(range(100, 100 + n)),
                sampler=getattr(grain.samplers, make)(n, **kwargs),
                shard_options=theirs,
                worker_count=0,
            )
            assert list(mine) == list(peer)


@pytest.mark.parametrize("workers", [0, 2])
def test_loaders_keep_the_sharding_remainder_and_cover_every_record_once(workers):
    parts = []
    for shard in _shards(cgrain, 3, False):
        loader = cgrain.DataLoader(
            data_source=list(range(10)),
            sampler=cgrain.samplers.SequentialSampler(10),
            shard_options=shard,
            worker_count=workers,
        )
        parts.append(list(loader))
    assert parts == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    shards = [
        list(
            cgrain.DataLoader(
                data_source=list(range(10)),
                sampler=cgrain.samplers.IndexSampler(10, shard, num_epochs=1),
                worker_count=workers,
            )
        )
        for shard in _shards(cgrain, 3, False)
    ]
    assert shards == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]  # The sampler's own shard.


def test_a_shuffled_sampler_permutes_each_shards_part_every_epoch_and_resumes():
    shard = cgrain.sharding.ShardOptions(1, 3, drop_remainder=False)
    sampler = cgrain.samplers.IndexSampler(10, shard, shuffle=True, num_epochs=3, seed=7)
    loader = cgrain.DataLoader(data_source=list(range(10)), sampler=sampler, worker_count=2)
    elements = chute.testing.assert_resumes(lambda: iter(loader), every=2)
    assert [sorted(elements[e * 3 : e * 3 + 3]) for e in range(3)] == [[4, 5, 6]] * 3
    assert len(set(map(tuple, [elements[0:3], elements[3:6], elements[6:9]]))) > 1


def test_any_object_grains_loader_takes_is_a_sampler_and_bad_ones_are_named():
    class EveryOther:
        def __len__(self):
            return 5

        def __getitem__(self, index):
            if not 0 <= index < 5:
                raise IndexError(index)
            return chute.RecordMetadata(index=index, record_key=2 * index)

    loader = cgrain.DataLoader(data_source=list(range(10)), sampler=EveryOther())
    assert list(loader) == [0, 2, 4, 6, 8]
    with pytest.raises(TypeError, match="sampler must give RecordMetadata by index, got 3"):
        cgrain.DataLoader(data_source=[1], sampler=3)
    chute_sampler = chute.IndexSampler(4, shard_options=chute.NoSharding())
    other = cgrain.sharding.ShardOptions(0, 2, drop_remainder=False)
    with pytest.raises(ValueError, match="chute's IndexSampler reads its own shard"):
        cgrain.DataLoader(data_source=list(range(4)), sampler=chute_sampler, shard_options=other)
    assert list(cgrain.DataLoader(data_source=list(range(4)), sampler=chute_sampler)) == [
        0,
        1,
        2,
        3,
    ]


def test_sampler_arguments_are_checked_as_grain_checks_them():
    samplers = cgrain.samplers
    with pytest.raises(ValueError, match="num_records must be an int > 0, got 0"):
        samplers.IndexSampler(0)
    with pytest.raises(ValueError, match="num_epochs must be an int > 0 or None"):
        samplers.IndexSampler(3, num_epochs=0)
    with pytest.raises(ValueError, match="shuffle=True needs a seed"):
        samplers.IndexSampler(3, shuffle=True)
    with pytest.raises(TypeError, match="seed must be an int, got str"):
        samplers.IndexSampler(3, shuffle=True, seed="1")
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*32\), got -1"):
        samplers.IndexSampler(3, seed=-1)
    with pytest.raises(IndexError, match=r"index 3 is out of range \[0, 3\)"):
        samplers.SequentialSampler(3)[3]
    assert len(samplers.IndexSampler(3)) == np.iinfo(np.int64).max  # Endless, as in Grain.
