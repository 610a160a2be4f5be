"""`pick_performance_config` in the seed's example, with chute's fluent API.

From packages/chute-execution/tests/test_autotune.py; here because it builds its
pipeline with `chute.MapDataset`.
"""

import chute


def test_the_seed_example_runs():
    source = chute.SequenceSource(list(range(100)))
    ds = chute.MapDataset.source(source)
    performance_config = chute.experimental.pick_performance_config(
        ds=ds, ram_budget_mb=1024, max_workers=None, max_buffer_size=None
    )
    ds = ds.to_iter_dataset(read_options=performance_config.read_options)
    assert list(ds.mp_prefetch(performance_config.multiprocessing_options)) == list(range(100))
