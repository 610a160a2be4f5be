"""`DatasetOptions`, `WithOptionsIterDataset` and `ExecutionTrackingMode` through `chute.grain`.

Grain 0.2.18 documents the options as applying to every transformation of a pipeline,
before and after `WithOptionsIterDataset`, merged with the later one winning; a filter
warns or raises when the share it drops in a window of 1000 elements is above a
threshold. The outcomes are compared with Grain's own (a test-only peer).
"""

import warnings

import pytest

import chute
import chute.grain as cgrain

grain = pytest.importorskip("grain")

_GRAIN_READ = grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)


def _outcome(make):
    """("ok", count) or ("raises", type), and how many filter warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = ("ok", len(list(make())))
        except ValueError:
            result = ("raises", "ValueError")
    return result, sum(issubclass(w.category, chute.FilterWarning) for w in caught)


def _cases(lib):
    read = {"read_options": _GRAIN_READ} if lib is grain else {}
    E = lib.experimental

    def base(step=10):
        return lib.MapDataset.range(5000).filter(lambda x: x % step == 0).to_iter_dataset(**read)

    def opts(ds, **options):
        return E.WithOptionsIterDataset(ds, E.DatasetOptions(**options))

    return {
        "default, 90% dropped": lambda: base(),
        "default, 95% dropped": lambda: base(20),
        "raise above 0.5": lambda: opts(base(), filter_raise_threshold_ratio=0.5),
        "raise above 0.95": lambda: opts(base(), filter_raise_threshold_ratio=0.95),
        "no warning": lambda: opts(base(20), filter_warn_threshold_ratio=None),
        "a stream filter after the options": lambda: opts(
            lib.MapDataset.range(5000).to_iter_dataset(**read), filter_raise_threshold_ratio=0.5
        ).filter(lambda x: x % 10 == 0),
        "merged": lambda: opts(
            opts(base(20), filter_raise_threshold_ratio=0.99), filter_warn_threshold_ratio=None
        ),
        "the later options win": lambda: opts(
            opts(base(), filter_raise_threshold_ratio=0.5), filter_raise_threshold_ratio=None
        ),
    }


# Grain logs its filter warnings (absl); chute issues them as `chute.FilterWarning`.
WARNS = {"default, 95% dropped"}


@pytest.mark.parametrize("case", list(_cases(cgrain)))
def test_filters_warn_and_raise_where_grains_do(case):
    (ours, warned), (theirs, _) = _outcome(_cases(cgrain)[case]), _outcome(_cases(grain)[case])
    assert ours == theirs
    assert warned == (1 if case in WARNS else 0)


def test_filter_ratios_reach_worker_processes_and_name_the_filter():
    E = cgrain.experimental
    ds = cgrain.MapDataset.range(5000).filter(lambda x: x % 10 == 0).to_iter_dataset()
    ds = E.WithOptionsIterDataset(ds, E.DatasetOptions(filter_raise_threshold_ratio=0.5))
    workers = ds.mp_prefetch(cgrain.MultiprocessingOptions(num_workers=2))
    with pytest.raises(chute.FilterRatioError, match=r"filter\(<lambda>\) dropped \d+ of a window"):
        list(workers)
    unfiltered = cgrain.MapDataset.range(5000).filter(lambda x: x % 10 == 0).to_iter_dataset()
    assert len(list(unfiltered)) == 500  # Options set on another dataset do not reach it.


def test_stage_timing_times_every_stage():
    E = cgrain.experimental
    ds = cgrain.MapDataset.range(10).to_iter_dataset().map(abs)
    options = E.DatasetOptions(execution_tracking_mode=E.ExecutionTrackingMode.STAGE_TIMING)
    it = iter(E.WithOptionsIterDataset(ds, options))
    assert list(it) == list(range(10))
    assert [s.elements for s in it.stats().stages] == [10, 10]


def test_options_merge_as_grains_and_are_checked():
    E = cgrain.experimental
    first = E.DatasetOptions(filter_warn_threshold_ratio=0.6, filter_raise_threshold_ratio=0.8)
    merged = E.DatasetOptions(filter_warn_threshold_ratio=0.7).merge(first)
    assert (merged.filter_warn_threshold_ratio, merged.filter_raise_threshold_ratio) == (0.7, 0.8)
    assert merged.execution_tracking_mode is E.ExecutionTrackingMode.DISABLED
    assert E.DatasetOptions().merge(None).min_shm_size == 0
    with pytest.raises(ValueError, match=r"raise_ratio must be a number in \[0, 1\] or None"):
        E.DatasetOptions(filter_raise_threshold_ratio=2)
    with pytest.raises(TypeError, match="execution_tracking_mode must be an ExecutionTrackingMode"):
        E.DatasetOptions(execution_tracking_mode="on")
    with pytest.raises(TypeError, match="options must be a DatasetOptions"):
        E.WithOptionsIterDataset(cgrain.MapDataset.range(3).to_iter_dataset(), {"x": 1})
