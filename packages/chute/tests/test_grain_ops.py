"""The operations a Grain 0.2.18 user reaches for, on the fluent datasets (issue 19).

Each op: its exact elements, exact resume through `assert_resumes` (also into the same
pipeline with another worker count), and the same output with 0 and 2 workers where
the op can sit before or after `mp_prefetch`.
"""

from __future__ import annotations

import operator

import pytest

import chute
from chute import IterDataset, MapDataset
from chute_testing import assert_resumes


def _odd(x: int) -> bool:
    return x % 2 == 1


def _stream(n: int = 12) -> IterDataset[int]:
    return MapDataset.range(n).to_iter_dataset().map(operator.neg).filter(_odd)


def _same_with_workers(make, *, max_elements=None):
    """`make(workers)` gives the same elements and states for 0 and 2 workers."""
    expected = assert_resumes(
        lambda: make(0).iter(),
        every=None,
        max_elements=max_elements,
        make_restored=[lambda: make(2).iter()],
    )
    assert_resumes(
        lambda: make(2).iter(),
        every=None,
        max_elements=max_elements,
        make_restored=[lambda: make(0).iter()],
        expected=expected,
    )
    return expected


# --- repeat -------------------------------------------------------------------------


def test_repeat_reads_the_stream_again_each_epoch():
    ds = _stream(6).repeat(2)
    assert list(ds) == [-1, -3, -5, -1, -3, -5]
    assert_resumes(ds.iter, epoch_length=3)
    assert list(_stream(4).repeat().limit(5)) == [-1, -3, -1, -3, -1]


@pytest.mark.parametrize("where", ["before", "after"])
def test_repeat_gives_the_same_stream_with_0_and_2_workers(where):
    def make(workers):
        if where == "before":
            return _stream().repeat(2).mp_prefetch(num_workers=workers, chunk_size=2)
        return _stream().mp_prefetch(num_workers=workers, chunk_size=2).repeat(2)

    assert _same_with_workers(make) == [-1, -3, -5, -7, -9, -11] * 2


def test_a_random_map_after_repeat_draws_anew_each_epoch_and_before_it_does_not():
    ds = MapDataset.range(3).to_iter_dataset()
    after = list(ds.repeat(2).random_map(lambda x, rng: int(rng.integers(1 << 30)), seed=0))
    before = list(ds.random_map(lambda x, rng: int(rng.integers(1 << 30)), seed=0).repeat(2))
    assert after[:3] != after[3:]
    assert before[:3] == before[3:]


# --- limit --------------------------------------------------------------------------


def test_limit_takes_the_first_elements_of_the_stream():
    assert list(_stream().limit(2)) == [-1, -3]
    assert list(_stream().limit(0)) == []
    assert list(_stream().limit(100)) == [-1, -3, -5, -7, -9, -11]
    assert_resumes(_stream().limit(4).iter, expected=[-1, -3, -5, -7])


@pytest.mark.parametrize("where", ["before", "after"])
def test_limit_gives_the_same_stream_with_0_and_2_workers(where):
    def make(workers):
        if where == "before":
            return _stream().limit(4).mp_prefetch(num_workers=workers, chunk_size=2)
        return _stream().mp_prefetch(num_workers=workers, chunk_size=2).limit(4)

    assert _same_with_workers(make) == [-1, -3, -5, -7]


def test_map_dataset_limit_is_a_slice_of_the_first_elements():
    ds = MapDataset.range(10).limit(3)
    assert list(ds) == [0, 1, 2]
    assert len(ds) == 3
    assert len(MapDataset.range(2).limit(5)) == 2
    assert repr(ds).endswith(".limit(count=3)")


# --- zip ----------------------------------------------------------------------------


def test_map_dataset_zip_gives_tuples_up_to_the_shortest():
    ds = MapDataset.zip(MapDataset.range(4), MapDataset.source(["a", "b", "c"]))
    assert len(ds) == 3
    assert ds[2] == (2, "c")
    assert list(MapDataset.zip([MapDataset.range(2), MapDataset.range(5, 7)])) == [(0, 5), (1, 6)]
    print_form = repr(ds).splitlines()
    assert print_form[:2] == ["MapDataset", "  zip()"]


def test_map_dataset_zip_gives_the_same_stream_with_0_and_2_workers():
    def make(workers):
        ds = MapDataset.zip(MapDataset.range(10), MapDataset.range(10).shuffle(seed=3))
        return ds.to_iter_dataset().mp_prefetch(num_workers=workers, chunk_size=3)

    out = _same_with_workers(make)
    assert [a for a, _ in out] == list(range(10))
    assert sorted(b for _, b in out) == list(range(10))


def test_iter_dataset_zip_stops_at_the_shortest_and_resumes():
    ds = IterDataset.zip(_stream(), MapDataset.source(list("abcd")))
    assert list(ds) == [(-1, "a"), (-3, "b"), (-5, "c"), (-7, "d")]
    assert_resumes(ds.iter)


def test_iter_dataset_zip_of_prefetched_streams_is_the_same_with_0_and_2_workers():
    def make(workers):
        return IterDataset.zip(
            _stream().mp_prefetch(num_workers=workers, chunk_size=2), _stream(8).batch(2)
        )

    out = _same_with_workers(make)
    assert [(a, b.tolist()) for a, b in out] == [(-1, [-1, -3]), (-3, [-5, -7])]


def test_zip_and_concatenate_refuse_no_datasets_and_a_non_list():
    for call, owner in [
        (MapDataset.zip, "MapDataset.zip"),
        (IterDataset.zip, "IterDataset.zip"),
        (lambda: MapDataset.concatenate([]), "MapDataset.concatenate"),
        (lambda: IterDataset.concatenate([]), "IterDataset.concatenate"),
    ]:
        with pytest.raises(ValueError) as caught:
            call()
        assert str(caught.value) == f"{owner} needs at least one dataset."
    with pytest.raises(TypeError) as caught:
        IterDataset.concatenate(_stream())
    assert str(caught.value) == (
        "IterDataset.concatenate takes a list of datasets, got IterDataset; e.g. "
        "IterDataset.concatenate([a, b])."
    )


# --- concatenate --------------------------------------------------------------------


def test_map_dataset_concatenate_gives_random_access_over_the_parts():
    ds = MapDataset.concatenate([MapDataset.range(3), MapDataset.source(["a", "b"])])
    assert len(ds) == 5
    assert [ds[4], ds[0], ds[-3]] == ["b", 0, 2]
    assert list(ds[2:4]) == [2, "a"]
    assert list(ds.shuffle(seed=0).limit(5)) != list(ds)
    assert sorted(map(str, ds.shuffle(seed=0))) == ["0", "1", "2", "a", "b"]


def test_map_dataset_concatenate_gives_the_same_stream_with_0_and_2_workers():
    def make(workers):
        ds = MapDataset.concatenate([MapDataset.range(5), MapDataset.range(100, 103)])
        return ds.to_iter_dataset().mp_prefetch(num_workers=workers, chunk_size=3)

    assert _same_with_workers(make) == [0, 1, 2, 3, 4, 100, 101, 102]


def test_iter_dataset_concatenate_reads_the_streams_one_after_another():
    ds = IterDataset.concatenate([_stream(6), MapDataset.range(2), _stream(4)])
    assert list(ds) == [-1, -3, -5, 0, 1, -1, -3]
    assert_resumes(ds.iter, epoch_length=3)

    def make(workers):
        first = _stream(6).mp_prefetch(num_workers=workers, chunk_size=2)
        return IterDataset.concatenate([first, _stream(4)])

    assert _same_with_workers(make) == [-1, -3, -5, -1, -3]


# --- rebatch ------------------------------------------------------------------------


def test_rebatch_recuts_batches_and_resumes():
    ds = MapDataset.range(10).to_iter_dataset().batch(4).rebatch(3)
    assert [b.tolist() for b in ds] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    dropped = MapDataset.range(10).to_iter_dataset().batch(4).rebatch(3, drop_remainder=True)
    assert [b.tolist() for b in dropped] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert_resumes(ds.iter)


def test_rebatch_after_workers_is_the_same_with_0_and_2_workers():
    def make(workers):
        ds = MapDataset.range(20).map(lambda x: {"x": x}).to_iter_dataset()
        return ds.mp_prefetch(num_workers=workers, chunk_size=5).batch(5).rebatch(3)

    out = _same_with_workers(make)
    assert [b["x"].tolist() for b in out] == [
        list(range(a, min(a + 3, 20))) for a in range(0, 20, 3)
    ]


def test_rebatch_refuses_bad_arguments():
    with pytest.raises(chute.ArgumentTypeError) as caught:
        _stream().batch(2).rebatch(2, drop_remainder=1)
    assert str(caught.value) == "RebatchIter: drop_remainder must be a bool, got int 1."


# --- unbatch (MapDataset) -----------------------------------------------------------


def test_map_dataset_unbatch_gives_random_access_to_the_rows():
    ds = MapDataset.range(7).batch(3).unbatch()
    assert len(ds) == 7
    assert [int(ds[i]) for i in (6, 0, 4)] == [6, 0, 4]
    shuffled = ds.shuffle(seed=1)
    assert sorted(int(x) for x in shuffled) == list(range(7))

    def make(workers):
        return shuffled.to_iter_dataset().mp_prefetch(num_workers=workers, chunk_size=2)

    assert [int(x) for x in _same_with_workers(make)] == [int(x) for x in shuffled]


# --- cache --------------------------------------------------------------------------


class _Calls:
    """A picklable map that records the elements it saw (in this process)."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def __call__(self, x: int) -> int:
        self.seen.append(x)
        return x


def test_iter_dataset_cache_replays_the_first_pass_and_resumes():
    calls = _Calls()
    ds = MapDataset.range(4).to_iter_dataset().map(calls).filter(_odd).cache().repeat(3)
    assert list(ds) == [1, 3] * 3
    assert calls.seen == [0, 1, 2, 3]
    assert_resumes(ds.iter, epoch_length=2, expected=[1, 3] * 3)


def test_iter_dataset_cache_after_workers_is_the_same_with_0_and_2_workers():
    def make(workers):
        return _stream().mp_prefetch(num_workers=workers, chunk_size=2).cache().repeat(2)

    assert _same_with_workers(make) == [-1, -3, -5, -7, -9, -11] * 2


def test_map_dataset_cache_reads_each_position_once():
    calls = _Calls()
    ds = MapDataset.range(5).map(calls).cache()
    assert list(ds.shuffle(seed=0).repeat(2))[:5] != list(range(5))
    assert sorted(calls.seen) == [0, 1, 2, 3, 4]

    def make(workers):
        return ds.repeat(2).to_iter_dataset().mp_prefetch(num_workers=workers, chunk_size=2)

    assert _same_with_workers(make) == [0, 1, 2, 3, 4] * 2


# --- apply --------------------------------------------------------------------------


class _Neg(chute.MapTransform):
    def map(self, x):
        return -x


class _KeepEven(chute.FilterTransform):
    def filter(self, x):
        return x % 2 == 0


class _Twice(chute.FlatMapTransform):
    max_fan_out = 2

    def flat_map(self, x):
        return [x, x]


class _Jitter(chute.RandomMapTransform):
    def random_map(self, x, rng):
        return x + int(rng.integers(100)) * 1000


@pytest.mark.parametrize("kind", ["map", "iter"])
def test_apply_runs_each_transform_as_its_op_in_order(kind):
    base = MapDataset.range(6).seed(0)
    ds = base if kind == "map" else base.to_iter_dataset()
    steps = [_KeepEven(), _Neg(), _Twice(), _Jitter()]
    expected = ds.filter(steps[0]).map(steps[1]).flat_map(steps[2]).random_map(steps[3])
    if kind == "map":
        expected = ds.filter(steps[0]).map(steps[1]).flat_map(steps[2], max_fan_out=2)
        expected = expected.random_map(steps[3])
    applied = ds.apply(steps)
    assert list(applied) == list(expected)
    assert repr(applied) == repr(expected)
    batched = ds.apply(_Neg()).apply([chute.BatchTransform(4, drop_remainder=True)])
    assert [b.tolist() for b in batched] == [[0, -1, -2, -3]]


@pytest.mark.parametrize("owner", ["MapDataset.apply", "IterDataset.apply"])
def test_apply_refuses_an_object_that_is_not_a_transform(owner):
    ds = MapDataset.range(3) if owner.startswith("Map") else _stream()
    with pytest.raises(chute.ArgumentTypeError) as caught:
        ds.apply([_Neg(), operator.neg])
    assert str(caught.value) == (
        f"{owner}: transformations[1] must be a MapTransform, RandomMapTransform, "
        "FilterTransform, FlatMapTransform, MapWithIndexTransform or BatchTransform (from "
        "chute), got builtin_function_or_method; for a plain function use map, filter, ... "
        "directly."
    )


# --- start_prefetch -----------------------------------------------------------------


class _Touch:
    """A picklable map that creates `folder/<element>` when it runs (in any process)."""

    def __init__(self, folder) -> None:
        self.folder = folder

    def __call__(self, x: int) -> int:
        (self.folder / str(x)).touch()
        return x


def _wait_for(path, seconds=60.0):
    import time

    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} was never created"
        time.sleep(0.01)


def test_start_prefetch_starts_worker_processes_before_the_first_next(tmp_path):
    ds = MapDataset.range(8).to_iter_dataset().map(_Touch(tmp_path))
    it = ds.mp_prefetch(num_workers=2, chunk_size=2).batch(2).iter()
    it.start_prefetch()
    it.start_prefetch()  # Idempotent.
    _wait_for(tmp_path / "0")  # Run by a worker, though nothing was asked for yet.
    assert [b.tolist() for b in it] == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_start_prefetch_starts_a_prefetch_thread_through_the_chain(tmp_path):
    ds = MapDataset.range(4).to_iter_dataset().map(_Touch(tmp_path)).prefetch(2).repeat(2)
    it = ds.iter(stats=True, progress=True)
    it.start_prefetch()
    _wait_for(tmp_path / "1")
    assert list(it) == [0, 1, 2, 3] * 2


def test_start_prefetch_is_a_no_op_without_prefetching_stages_and_keeps_states():
    it = _stream().mp_prefetch(num_workers=0, chunk_size=2).batch(2).iter()
    before = it.get_state()
    it.start_prefetch()
    assert it.get_state() == before
    first = next(it).tolist()
    state = it.get_state()
    restored = _stream().mp_prefetch(num_workers=2, chunk_size=2).batch(2).iter()
    restored.set_state(state)
    restored.start_prefetch()
    assert first == [-1, -3]
    assert [b.tolist() for b in restored] == [[-5, -7], [-9, -11]]


# --- element_spec -------------------------------------------------------------------


def test_element_spec_gives_shapes_and_dtypes_of_one_element_or_batch():
    import numpy as np

    ds = MapDataset.range(6).map(lambda i: {"x": np.full((2,), i, np.float32), "i": i})
    spec = ds.element_spec
    assert spec == {
        "x": chute.ShapeDtypeStruct((2,), np.dtype("float32")),
        "i": chute.ShapeDtypeStruct((), np.dtype("int64")),
    }
    assert ds.batch(4).element_spec["x"] == chute.ShapeDtypeStruct((4, 2), np.dtype("float32"))
    stream = ds.to_iter_dataset().batch(3)
    assert stream.element_spec["i"] == chute.ShapeDtypeStruct((3,), np.dtype("int64"))
    assert MapDataset.range(3).filter(lambda x: x == 2).element_spec.shape == ()
    with pytest.raises(ValueError) as caught:
        _ = MapDataset.range(0).element_spec
    assert str(caught.value) == "element_spec: the dataset has no element to read a spec from."
