"""Grain 0.2.18 behaviours past the common path, through `chute.grain` (issue 31, first
items): parents, the `parents=` keyword, indices past the end, `limit`'s bound and the
version. Each test is written from Grain's documented behaviour."""

from __future__ import annotations

import numpy as np
import pytest

import chute
import chute.grain as grain
from chute_testing import assert_resumes


def test_every_dataset_lists_the_datasets_it_was_made_from() -> None:
    source = grain.MapDataset.range(6)
    mapped = source.map(lambda x: x * 2)
    assert source.parents == ()
    assert mapped.parents == (source,)
    stream = mapped.to_iter_dataset()
    assert stream.parents == (mapped,)
    batched = stream.batch(2)
    assert batched.parents[0].parents == (stream,)  # Grain's batch adds its string stage.
    other = grain.MapDataset.range(3)
    assert grain.MapDataset.mix([source, other]).parents == (source, other)
    assert grain.MapDataset.concatenate([source, other]).parents == (source, other)
    assert grain.IterDataset.mix([stream, other.to_iter_dataset()]).parents[0] is stream
    assert chute.MapDataset.zip(source, other).parents == (source, other)
    assert chute.IterDataset.source(lambda: iter(chute.MapDataset.range(2))).parents == ()


def test_a_subclass_may_pass_its_parents_by_keyword() -> None:
    class Doubled(grain.MapDataset):
        def __init__(self, parent: grain.MapDataset) -> None:
            super().__init__(parents=[parent])

        def __len__(self) -> int:
            return len(self._parent)

        def __getitem__(self, index: int) -> int:
            return self._parent[index] * 2

    parent = grain.MapDataset.range(3)
    doubled = Doubled(parent)
    assert doubled.parents == (parent,)
    assert list(doubled.map(lambda x: x + 1)) == [1, 3, 5]

    class Counting(grain.IterDataset):
        def __init__(self, parent: grain.IterDataset) -> None:
            super().__init__(parents=parent)

        def __iter__(self) -> grain.DatasetIterator:
            return iter(self._parent)

    stream = grain.MapDataset.range(2).to_iter_dataset()
    assert list(Counting(stream)) == [0, 1]
    assert Counting(stream).parents == (stream,)


def test_parents_given_twice_or_not_at_all_are_refused() -> None:
    with pytest.raises(TypeError, match="pass the parents once"):
        chute.MapDataset(chute.MapDataset.range(2), parents=[chute.MapDataset.range(2)])
    with pytest.raises(TypeError, match="IterDataset needs what makes its iterators"):
        chute.IterDataset()


def test_an_index_past_the_end_reads_a_later_epoch_under_grain() -> None:
    ds = grain.MapDataset.range(10).batch(3)
    got = [ds[i].tolist() for i in range(4 * len(ds))]
    assert got == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]] * 4
    shuffled = grain.MapDataset.range(5).shuffle(seed=3)
    assert [shuffled[i] for i in range(5, 10)] == list(shuffled.repeat(2))[5:]
    assert ds[-1].tolist() == [9]


def test_chutes_own_datasets_refuse_an_index_past_the_end() -> None:
    ds = chute.MapDataset.range(10).batch(3)
    with pytest.raises(IndexError):
        ds[4]


@pytest.mark.parametrize("count", [0, -1])
def test_limit_takes_a_positive_count_under_grain(count: int) -> None:
    with pytest.raises(ValueError, match=rf"MapDataset.limit: count must be > 0, got {count}\."):
        grain.MapDataset.range(3).limit(count)
    with pytest.raises(ValueError, match=rf"IterDataset.limit: count must be > 0, got {count}\."):
        grain.MapDataset.range(3).to_iter_dataset().limit(count)
    assert list(chute.MapDataset.range(3).limit(0)) == []  # chute's own: an empty dataset.


def test_the_version_is_the_grain_release_followed() -> None:
    assert grain.__version__ == "0.2.18"
    assert grain.__version_info__ == (0, 2, 18)
    assert tuple(int(p) for p in grain.__version__.split(".")) == grain.__version_info__


def test_streams_given_once_are_read_once_and_listed_as_parents() -> None:
    made: list[int] = []

    def make_stream(n: int) -> chute.IterDataset:
        made.append(n)
        return chute.MapDataset.source([n] * 2).to_iter_dataset()

    files = chute.MapDataset.range(3).map(make_stream)
    ds = chute.IterDataset.interleave(files, cycle_length=2)
    assert made == [0, 1, 2]
    assert list(ds) == [0, 1, 0, 1, 2, 2]
    assert len(ds.parents) == 3
    parts = (chute.MapDataset.range(2).to_iter_dataset() for _ in range(2))
    assert len(chute.IterDataset.mix(parts).parents) == 2


def test_grains_other_entry_points_keep_grains_string_batches() -> None:
    letters = chute.MapDataset.source(["a", "b"])
    for ds in [
        grain.MapDataset.source(letters).to_iter_dataset(),
        grain.experimental.InterleaveIterDataset([grain.MapDataset.source(["a", "b"])], 1),
        grain.experimental.WindowShuffleMapDataset(letters, window_size=2, seed=0),
    ]:
        batch = next(iter(ds.batch(2)))
        assert isinstance(batch, np.ndarray), type(ds)
        assert sorted(batch.tolist()) == ["a", "b"]
    assert grain.MapDataset.source(letters).parents == (letters,)
    assert type(grain.MapDataset.source(letters)) is grain.MapDataset


def test_interleave_takes_grains_thread_and_buffer_arguments_and_checks_them() -> None:
    parts = [grain.MapDataset.source([c] * 3).to_iter_dataset() for c in "abc"]
    plain = list(grain.experimental.InterleaveIterDataset(parts, cycle_length=2))
    tuned = grain.experimental.InterleaveIterDataset(
        parts, cycle_length=2, num_make_iter_threads=4, make_iter_buffer_size=2, iter_buffer_size=8
    )
    assert list(tuned) == plain == list("abababccc")  # a and b in turn, then c.
    with pytest.raises(ValueError, match="num_make_iter_threads must be >= 1, got 0"):
        grain.experimental.InterleaveIterDataset(parts, 2, num_make_iter_threads=0)


def test_enable_shared_memory_output_returns_nothing_and_changes_nothing() -> None:
    ds = grain.MapDataset.range(6).batch(2)
    assert ds.enable_shared_memory_output() is None
    stream = ds.to_iter_dataset().mp_prefetch(chute.MultiprocessingOptions(num_workers=1))
    assert stream.enable_shared_memory_output() is None
    assert [b.tolist() for b in stream] == [[0, 1], [2, 3], [4, 5]]


def test_shared_memory_source_unlink_frees_it_for_processes_that_had_not_mapped_it() -> None:
    import pickle

    source = grain.sources.SharedMemoryDataSource([{"x": np.arange(3)}, "b"])
    assert source[1] == "b"
    copy = pickle.loads(pickle.dumps(source))  # Another process's view: not mapped yet.
    source.unlink()
    source.unlink()  # Twice is fine, as closing twice is.
    np.testing.assert_array_equal(source[0]["x"], np.arange(3))  # Mapped before: readable.
    with pytest.raises(chute.SharedMemoryError, match="is gone"):
        copy[0]
    source.close()


def test_element_spec_has_no_batch_size_where_the_last_batch_may_be_short() -> None:
    rows = grain.MapDataset.range(5).map(lambda i: {"x": np.zeros(3, np.float32), "s": "a"})
    spec = rows.batch(2).element_spec
    assert spec["x"].shape == (None, 3) and spec["x"].dtype == np.float32
    assert spec["s"].shape == (None,)
    assert rows.batch(2, drop_remainder=True).element_spec["x"].shape == (2, 3)
    assert rows.to_iter_dataset().batch(2).element_spec["x"].shape == (None, 3)
    assert chute.MapDataset.range(5).batch(2).element_spec.shape == (2,)  # chute's own.


def test_to_iter_dataset_with_allow_nones_reads_dropped_positions_as_none() -> None:
    ds = grain.MapDataset.range(8).filter(lambda x: x % 3 == 0)
    expected = [0, None, None, 3, None, None, 6, None]
    assert list(ds.to_iter_dataset()) == [0, 3, 6]
    stream = ds.to_iter_dataset(allow_nones=True)
    assert list(stream) == expected
    assert_resumes(lambda: iter(stream), expected=expected)
    workers = stream.mp_prefetch(chute.MultiprocessingOptions(num_workers=2))
    assert list(workers) == expected
    with pytest.raises(TypeError, match="allow_nones must be a bool, got 'yes'"):
        ds.to_iter_dataset(allow_nones="yes")


def test_load_repeats_forever_by_default_as_in_grain() -> None:
    import itertools

    loader = grain.load(chute.RangeSource(5))
    assert list(itertools.islice(loader, 12)) == [0, 1, 2, 3, 4] * 2 + [0, 1]


def test_tfrecord_iter_dataset_reads_grains_records_and_resumes(tmp_path) -> None:
    from chute_sources import write_tfrecord

    path = str(tmp_path / "data.tfrecord")
    records = [bytes([i]) * i for i in range(12)]
    write_tfrecord(path, records)
    ds = grain.experimental.TFRecordIterDataset(path)
    assert list(ds) == records
    chute.testing.assert_resumes(lambda: iter(ds), every=1)
    peer = pytest.importorskip("grain")
    assert list(peer.experimental.TFRecordIterDataset(path)) == records
