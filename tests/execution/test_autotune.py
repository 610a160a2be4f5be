"""Autotuning through chute's fluent API: the seed's offline `pick_performance_config`,
and the runtime autotuner of `mp_prefetch` and `DataLoader`.

The seed example is from packages/chute-execution/tests/test_autotune.py; here because
it builds its pipeline with `chute.MapDataset`.
"""

import functools

import pytest

import chute
from chute_checkpoint import apply_document, make_document
from chute_testing.execution import Busy


def test_the_seed_example_runs():
    source = chute.SequenceSource(list(range(100)))
    ds = chute.MapDataset.source(source)
    performance_config = chute.experimental.pick_performance_config(
        ds=ds, ram_budget_mb=1024, max_workers=None, max_buffer_size=None
    )
    ds = ds.to_iter_dataset(read_options=performance_config.read_options)
    assert list(ds.mp_prefetch(performance_config.multiprocessing_options)) == list(range(100))


def _pipeline():
    return (
        chute.MapDataset.range(600)
        .seed(5)
        .shuffle()
        .to_iter_dataset()
        .map(Busy(0.0003))
        .filter(_not_fifth)
    )


def _not_fifth(x):
    return x % 5 != 0


def test_an_autotuned_pipeline_yields_the_untuned_elements_and_shows_its_changes():
    expected = list(_pipeline())
    bounds = chute.AutotuneOptions(max_workers=2, max_buffer_size=4, interval_seconds=0.05)
    it = _pipeline().mp_prefetch(num_workers=0, autotune=bounds).batch(7).iter(stats=True)
    batches = list(it)
    assert [int(x) for batch in batches for x in batch] == expected
    stats = it.stats()
    lines = [line for line in str(stats).splitlines() if line.startswith("autotune at ")]
    assert lines == [f"autotune at {decision}" for decision in stats.tuning]
    for decision in stats.tuning:
        assert 0 <= decision.workers <= 2 and 1 <= decision.buffer_size <= 4


def test_a_checkpoint_of_an_autotuned_pipeline_restores_without_it(tmp_path):
    tuned = _pipeline().mp_prefetch(num_workers=1, autotune=True)
    it = iter(tuned)
    taken = [next(it) for _ in range(250)]
    chute.checkpoint.save(it, tmp_path)
    rest = list(chute.checkpoint.restore(iter(_pipeline().mp_prefetch(num_workers=2)), tmp_path))
    assert taken + rest == list(_pipeline())


def test_a_data_loader_autotunes_too():
    sampler = chute.IndexSampler(
        300, shard_options=chute.NoSharding(), num_epochs=1, shuffle=True, seed=1
    )
    make = functools.partial(chute.DataLoader, data_source=chute.RangeSource(300), sampler=sampler)
    expected = list(make())
    bounds = chute.AutotuneOptions(max_workers=2, interval_seconds=0.02)
    assert list(make(operations=[], worker_count=0, autotune=bounds)) == expected


def test_the_options_autotune_unless_a_worker_count_is_given():
    default = chute.MultiprocessingOptions()
    assert (default.num_workers, default.autotune) == (0, True)
    for options in [
        chute.MultiprocessingOptions(num_workers=0),
        chute.MultiprocessingOptions(num_workers=2),
        chute.MultiprocessingOptions(autotune=False),
    ]:
        assert options.autotune is False
    bounds = chute.AutotuneOptions(max_workers=1)
    assert chute.MultiprocessingOptions(num_workers=1, autotune=bounds).autotune == bounds


def _slow(length):
    return chute.MapDataset.range(length).to_iter_dataset().map(Busy(0.001))


def test_mp_prefetch_without_a_worker_count_adds_workers_while_the_loop_waits():
    """With no workers the loop waits for every element, so the first measurement (0.5 s)
    already tries workers; a count given stays as it is."""
    it = _slow(1500).mp_prefetch().iter(stats=True)
    assert list(it) == list(range(1500))
    tuning = it.stats().tuning
    assert tuning and tuning[0].reason == "more workers" and tuning[0].workers > 0
    fixed = _slow(1500).mp_prefetch(num_workers=0).iter(stats=True)
    assert list(fixed) == list(range(1500))
    assert fixed.stats().tuning == ()


def _starts(it):
    """Where an autotuned iterator started: its warm start's configuration, or None."""
    tuning = it.stats().tuning
    if not tuning or tuning[0].reason != "warm start":
        return None
    assert tuning[0].seconds == 0.0 and f"autotune at {tuning[0]}" in str(it.stats())
    return tuning[0].workers, tuning[0].buffer_size


def test_each_later_iterator_of_a_dataset_starts_where_the_last_ones_tuning_settled():
    """A loop over epochs tunes in its first epoch; the next epochs start there (also
    through a batch the workers make), unless the first settled where it started."""
    ds = _slow(1500).mp_prefetch()
    first = ds.iter(stats=True)
    assert list(first) == list(range(1500))
    assert _starts(first) is None
    reached = {(d.workers, d.buffer_size) for d in first.stats().tuning if d.workers}
    for later in (ds, ds, ds.batch(50)):
        it = later.iter(stats=True)
        assert [int(x) for x in it for x in (x if later is not ds else [x])] == list(range(1500))
        start = _starts(it)
        assert start is None or start in reached
        if start is not None:
            reached |= {(d.workers, d.buffer_size) for d in it.stats().tuning}
    # Another dataset (even of the same pipeline) tunes from its own start.
    other = _slow(1500).mp_prefetch().iter(stats=True)
    assert list(other) == list(range(1500))
    assert other.stats().tuning[0].reason == "more workers"


def test_grain_spelled_options_keep_grains_default_and_the_pipeline_says_when_it_tunes():
    import chute.grain as grain

    options = grain.MultiprocessingOptions()
    assert (options.num_workers, options.autotune) == (0, False)
    assert grain.MultiprocessingOptions(autotune=True).autotune is True
    ds = chute.MapDataset.range(6).to_iter_dataset()
    assert str(ds.mp_prefetch()).splitlines()[-1] == "  .mp_prefetch(num_workers=0, autotune=True)"
    assert str(ds.mp_prefetch(options)).splitlines()[-1] == "  .mp_prefetch(num_workers=0)"
    # Tuned or not, one pipeline: a state of one restores into the other.
    tuned = iter(ds.mp_prefetch())
    assert [next(tuned), next(tuned)] == [0, 1]
    fixed = iter(ds.mp_prefetch(options))
    apply_document(fixed, make_document(tuned, 0, 1))  # Checks the fingerprint.
    assert list(fixed) == [2, 3, 4, 5]


def test_a_data_loader_refuses_an_autotune_that_is_not_one():
    sampler = chute.IndexSampler(4, shard_options=chute.NoSharding(), num_epochs=1)
    with pytest.raises(TypeError) as caught:
        chute.DataLoader(data_source=chute.RangeSource(4), sampler=sampler, autotune=None)
    assert str(caught.value) == (
        "DataLoader: autotune must be True, False or an AutotuneOptions, got NoneType None."
    )
