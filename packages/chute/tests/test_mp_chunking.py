"""mp_prefetch's own chunk size: whole batches per chunk when the workers batch."""

import chute
from chute_execution import batch_aligned_chunk_size


def test_workers_that_batch_get_chunks_of_whole_batches_and_the_same_batches():
    ds = chute.MapDataset.range(1000).seed(4).shuffle().to_iter_dataset()
    fused = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=2)).batch(24)
    assert fused._factory.plan.chunks.chunk_size == 48  # 2 batches of 24, about 64 elements.
    (stage,) = [s for s in fused._stages if s.op == "mp_prefetch"]
    assert stage.raw == (("chunk_size", 48),)  # What the checkpoint fingerprint sees.
    expected = [b.tolist() for b in ds.batch(24)]
    assert [b.tolist() for b in fused] == expected
    # A chunk size given by the user is kept.
    given = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=0), chunk_size=10).batch(24)
    assert given._factory.plan.chunks.chunk_size == 10
    assert [b.tolist() for b in given] == expected


def test_batch_aligned_chunk_sizes():
    assert batch_aligned_chunk_size(128, 4096) == 128
    assert batch_aligned_chunk_size(8, 100_000) == 64
    assert batch_aligned_chunk_size(8, 100) == 8  # At most 1/16 of the data, >= 1 batch.
    assert batch_aligned_chunk_size(1000, 10) == 1000
