"""`MapDataset.set_slice`: Grain's in-place slicing of a source dataset.

Grain 0.2.18 gives `set_slice(sl, sequential_slice)` to source datasets only (its
workers call it with `slice(worker_index, None, worker_count)` to read one contiguous
part each). The parts are compared with Grain's own (a test-only peer).
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
import chute.grain as cgrain

grain = pytest.importorskip("grain")


def _sources(lib, data, start, step):
    return [lib.MapDataset.source(list(data)), lib.MapDataset.range(start, len(data) * step, step)]


@settings(max_examples=40, deadline=None)
@given(
    length=st.integers(0, 30),
    workers=st.integers(1, 7),
    start=st.integers(0, 3),
    step=st.integers(1, 3),
)
def test_each_worker_reads_the_part_grain_gives_it(length, workers, start, step):
    data = range(100, 100 + length)
    for worker in range(workers):
        for ours, theirs in zip(
            _sources(cgrain, data, start, step), _sources(grain, data, start, step), strict=True
        ):
            ours.set_slice(slice(worker, None, workers), sequential_slice=True)
            theirs.set_slice(slice(worker, None, workers), sequential_slice=True)
            assert list(ours) == list(theirs)
            assert len(ours) == len(theirs)


def test_parts_cover_the_data_once_and_later_datasets_read_the_part():
    parts = []
    for worker in range(4):
        ds = cgrain.MapDataset.source(list(range(10)))
        ds.set_slice(slice(worker, None, 4), sequential_slice=True)
        parts.append(list(ds.map(lambda x: x * 10).to_iter_dataset()))
    assert parts == [[0, 10, 20], [30, 40, 50], [60, 70], [80, 90]]


def test_a_second_call_slices_the_original_and_any_slice_is_taken():
    ds = cgrain.MapDataset.range(10)
    ds.set_slice(slice(1, None, 3))
    assert list(ds) == [1, 4, 7]
    ds.set_slice(slice(None, None, -4))
    assert list(ds) == [9, 5, 1]
    ds.set_slice(slice(0, None, 2), sequential_slice=True)
    assert list(ds) == [0, 1, 2, 3, 4]


def test_datasets_built_before_keep_their_data_and_fingerprints_differ():
    ds = cgrain.MapDataset.range(6)
    before = ds.map(lambda x: x + 1)
    plain = repr(ds)
    ds.set_slice(slice(1, None, 2), sequential_slice=True)
    assert list(before) == [1, 2, 3, 4, 5, 6]
    assert list(ds) == [3, 4, 5] and repr(ds) != plain
    assert "slice" in repr(ds)


def test_workers_read_a_sliced_source_and_resume_across_them():
    ds = cgrain.MapDataset.source([f"r{i}" for i in range(40)])
    ds.set_slice(slice(2, None, 3), sequential_slice=True)  # Records 27..39.
    pipeline = ds.seed(1).shuffle().to_iter_dataset()
    expected = list(pipeline)
    assert sorted(expected) == sorted(f"r{i}" for i in range(27, 40))
    elements = chute.testing.assert_resumes(
        lambda: iter(pipeline.mp_prefetch(chute.MultiprocessingOptions(num_workers=2))),
        every=5,
    )
    assert elements == expected


def test_only_sources_have_set_slice_and_bad_slices_are_named():
    ds = cgrain.MapDataset.range(10)
    assert hasattr(ds, "set_slice")
    assert not hasattr(ds.map(abs), "set_slice")
    with pytest.raises(AttributeError, match="this one ends with 'map': slice its source"):
        ds.map(abs).set_slice(slice(0, None, 2), True)
    with pytest.raises(ValueError, match=r"worker index 3 is not in \[0, 3\)"):
        ds.set_slice(slice(3, None, 3), sequential_slice=True)
    with pytest.raises(ValueError, match=r"the slice's step \(the worker count\) must be an int"):
        ds.set_slice(slice(0, None, None), sequential_slice=True)
    with pytest.raises(TypeError, match="expected a slice, got int"):
        ds.set_slice(3)
    with pytest.raises(TypeError, match="sequential_slice must be a bool, got 'yes'"):
        ds.set_slice(slice(0, 2), "yes")
