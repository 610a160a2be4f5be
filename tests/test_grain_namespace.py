"""`chute.grain`: Grain 0.2.18's public names, and Grain's documented behaviour for them.

The seeds' guide examples run through the namespace in `tests/grain_spelling`; this
file checks that every public name of Grain 0.2.18's modules is either provided or
listed in `chute.grain.NOT_PROVIDED` with a reason, and the behaviour of the names
that are more than a spelling of a chute method.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import chute
import chute.grain as grain
from chute.grain import python as pygrain
from chute_testing import assert_resumes

# Grain 0.2.18's public names, module by module (from `dir()` of each module).
GRAIN_NAMES = {
    "grain": "DataLoader DataLoaderIterator DatasetIterator IterDataset MapDataset "
    "MultiprocessingOptions ReadOptions Record RecordMetadata checkpoint config constants "
    "experimental load monitoring multiprocessing proto samplers sharding sources transforms",
    "grain.python": "ArrayRecordDataSource Batch BatchOperation DATASET_INDEX DataLoader "
    "DatasetIterator DatasetSelectionMap EPOCH FilterOperation FilterTransform INDEX "
    "InMemoryDataSource IndexSampler IterDataset META_FEATURES MapDataset MapOperation "
    "MapTransform MapWithIndexTransform MultiprocessingOptions NoSharding Operation "
    "PyGrainCheckpointHandler PyGrainCheckpointRestore PyGrainCheckpointSave "
    "PyGrainDatasetIterator RECORD RECORD_KEY RandomAccessDataSource RandomMapOperation "
    "RandomMapTransform RangeDataSource ReadOptions Record RecordMetadata SEED Sampler "
    "SequentialSampler ShardByJaxProcess ShardOptions SharedMemoryArray Transformation "
    "Transformations config experimental load",
    "grain.transforms": "Batch DatasetSelectionMap Filter Map MapWithIndex RandomMap "
    "TfRandomMap Transformation Transformations",
    "grain.sources": "ArrayRecordDataSource RandomAccessDataSource RangeDataSource "
    "SharedMemoryDataSource",
    "grain.samplers": "IndexSampler Sampler SequentialSampler",
    "grain.sharding": "NoSharding ShardByJaxProcess ShardOptions",
    "grain.experimental": "BOSHandling BestFitPackIterDataset CacheIterDataset "
    "ConcatThenSplitIterDataset DatasetOptions ElasticIterator ExecutionTrackingMode "
    "FirstFitPackIterDataset FlatMapIterDataset FlatMapMapDataset FlatMapTransform "
    "InterleaveIterDataset LimitIterDataset MapWithIndexTransform PackAndBatchOperation "
    "ParquetIterDataset PerformanceConfig RebatchIterDataset RepeatIterDataset RngPool "
    "ShapeDtypeStruct ShapeDtypeStructProtocol TFRecordIterDataset "
    "ThreadPrefetchDatasetIterator ThreadPrefetchIterDataset WindowShuffleIterDataset "
    "WindowShuffleMapDataset WithOptionsIterDataset ZipIterDataset ZipMapDataset "
    "apply_transformations assert_equal_output_after_checkpoint batch_and_pad device_put "
    "get_element_spec get_next_index index_shuffle multithread_prefetch "
    "pick_performance_config set_next_index",
    "grain.checkpoint": "CheckpointHandler CheckpointRestore CheckpointSave",
    "grain.multiprocessing": "MultiprocessingOptions SharedMemoryArray SharedMemoryArrayMetadata",
    "grain.constants": "DATASET_INDEX EPOCH INDEX META_FEATURES RECORD RECORD_KEY SEED",
}
# grain.python repeats names other modules give; left out there for the same reasons.
ALSO_LEFT_OUT = {
    "grain.python.config": "config",
    "grain.python.SharedMemoryArray": "multiprocessing.SharedMemoryArray",
    "grain.python.Operation": "experimental.PackAndBatchOperation",
}


def _name_in_chute(module: str, name: str) -> tuple[bool, str]:
    """Whether `chute.<module>` has `name`, and the key NOT_PROVIDED would list it under."""
    ours = importlib.import_module(f"chute.{module}")
    key = name if module == "grain" else f"{module.removeprefix('grain.')}.{name}"
    return hasattr(ours, name), ALSO_LEFT_OUT.get(f"{module}.{name}", key)


@pytest.mark.parametrize("module", sorted(GRAIN_NAMES))
def test_every_grain_name_is_provided_or_left_out_with_a_reason(module):
    missing = []
    for name in GRAIN_NAMES[module].split():
        provided, key = _name_in_chute(module, name)
        if not provided and key not in grain.NOT_PROVIDED:
            missing.append(name)
        if provided:
            assert key not in grain.NOT_PROVIDED or module == "grain.python", (module, name)
    assert missing == []
    assert all(reason for reason in grain.NOT_PROVIDED.values())


def test_the_listed_names_are_grains_when_grain_is_installed():
    pytest.importorskip("grain", reason="Grain is in the `compare` dependency group only")
    for module, names in GRAIN_NAMES.items():
        theirs = {n for n in dir(importlib.import_module(module)) if not n.startswith("_")}
        assert sorted(theirs) == sorted(names.split()), module


def test_legacy_operations_run_in_the_data_loader():
    loader = pygrain.DataLoader(
        data_source=pygrain.RangeDataSource(0, 10, 1),
        sampler=pygrain.SequentialSampler(10, seed=1),
        operations=[
            pygrain.FilterOperation(lambda x: x % 3 != 0),
            pygrain.MapOperation(lambda x: x * 10),
            pygrain.RandomMapOperation(lambda x, rng: (x, round(float(rng.random()), 6))),
            pygrain.BatchOperation(3, drop_remainder=True),
        ],
    )
    batches = list(loader)
    values = [row.tolist() for batch in batches for row in np.asarray(batch[0])[:, None]]
    assert [v[0] for v in values] == [10, 20, 40, 50, 70, 80]
    assert [b[1].tolist() for b in batches] == [b[1].tolist() for b in loader]  # Seeded.


def test_load_builds_a_loader_from_options():
    loader = grain.load(
        pygrain.RangeDataSource(0, 6, 1), num_epochs=2, shuffle=True, seed=3, batch_size=4
    )
    rows = [x for batch in loader for x in batch.tolist()]
    assert sorted(rows) == sorted(list(range(6)) * 2)
    assert rows == [x for batch in loader for x in batch.tolist()]
    assert rows[:6] != list(range(6))  # Shuffled.


def test_a_selection_map_picks_dataset_and_element():
    class Reverse(grain.python.DatasetSelectionMap):
        def __len__(self):
            return 4

        def __getitem__(self, index):
            return index % 2, 1 - index // 2

    a, b = grain.MapDataset.source(["a0", "a1"]), grain.MapDataset.source(["b0", "b1"])
    assert list(Reverse().select([a, b])) == ["a1", "b1", "a0", "b0"]
    with pytest.raises(TypeError, match="abstract"):
        grain.python.DatasetSelectionMap()


def test_window_shuffle_keeps_each_window_and_resumes():
    ds = grain.experimental.WindowShuffleMapDataset(
        grain.MapDataset.range(10), window_size=4, seed=5
    )
    items = list(ds)
    assert [sorted(items[i : i + 4]) for i in (0, 4)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert sorted(items[8:]) == [8, 9] and items != list(range(10))
    again = grain.experimental.WindowShuffleMapDataset(
        grain.MapDataset.range(10), window_size=4, seed=5
    )
    assert list(again) == items and ds[-1] == items[-1]
    assert_resumes(lambda: iter(ds.to_iter_dataset()), expected=items)


def test_grain_style_subclasses_work_with_every_chute_method():
    ds = Doubled(grain.MapDataset.range(6).seed(1))
    assert list(ds) == [0, 2, 4, 6, 8, 10] and len(ds) == 6
    assert sorted(ds.shuffle()) == list(ds)
    stream = PlusOne(ds.to_iter_dataset())
    assert list(stream) == [1, 3, 5, 7, 9, 11]
    assert [b.tolist() for b in stream.batch(4)] == [[1, 3, 5, 7], [9, 11]]
    assert list(ds.to_iter_dataset().mp_prefetch(num_workers=2, chunk_size=2)) == list(ds)
    assert_resumes(lambda: iter(stream), expected=list(stream))
    assert repr(ds).splitlines()[1] == "  source(Doubled[len=6])"


class Doubled(grain.MapDataset):
    def __init__(self, parent):
        super().__init__(parent)

    def __len__(self):
        return len(self._parent)

    def __getitem__(self, index):
        return self._parent[index] * 2


class PlusOneIterator(grain.DatasetIterator):
    def __next__(self):
        return next(self._parent) + 1

    def get_state(self):
        return self._parent.get_state()

    def set_state(self, state):
        self._parent.set_state(state)


class PlusOne(grain.IterDataset):
    def __init__(self, parent):
        super().__init__(parent)

    def __iter__(self):
        return PlusOneIterator(self._parent.__iter__())


def test_strict_zip_raises_when_streams_end_apart():
    a = grain.MapDataset.range(3).to_iter_dataset()
    b = grain.MapDataset.range(2).to_iter_dataset()
    with pytest.raises(
        ValueError, match=r"^ZipIter\(strict=True\): parent 1 ended, but parents \[0\]"
    ):
        list(grain.experimental.ZipIterDataset([a, b]))
    assert list(grain.experimental.ZipIterDataset([a, b], strict=False)) == [(0, 0), (1, 1)]


def test_next_index_reads_and_moves_the_position():
    it = iter(grain.MapDataset.range(8).to_iter_dataset().map(lambda x: -x))
    assert [next(it), next(it)] == [0, -1]
    assert grain.experimental.get_next_index(it) == 2
    grain.experimental.set_next_index(it, 6)
    assert list(it) == [-6, -7]
    batched = iter(grain.MapDataset.range(4).to_iter_dataset().batch(2))
    assert grain.experimental.get_next_index(batched) == 0
    with pytest.raises(NotImplementedError, match="_NoPosition is not an iterator of a chute"):
        grain.experimental.get_next_index(_NoPosition())


class _NoPosition:
    def get_state(self):
        return {"chunk": 0, "offset": 0}


def test_assert_equal_output_after_checkpoint_fails_on_a_stream_that_does_not_resume():
    grain.experimental.assert_equal_output_after_checkpoint(
        grain.MapDataset.range(5).to_iter_dataset()
    )

    class Forgetful(grain.DatasetIterator):
        def __init__(self):
            super().__init__()
            self.n = 0

        def __next__(self):
            if self.n >= 4:
                raise StopIteration
            self.n += 1
            return self.n

        def get_state(self):
            return {}

        def set_state(self, state):
            pass  # Forgets: a restore starts over.

    with pytest.raises(AssertionError):
        grain.experimental.assert_equal_output_after_checkpoint(grain.IterDataset(Forgetful))


def test_batch_and_pad_fills_missing_rows_with_the_pad_value():
    batch = grain.experimental.batch_and_pad(
        [{"x": np.array([1, 2])}, {"x": np.array([3, 4])}], batch_size=3, pad_value=7
    )
    assert batch["x"].tolist() == [[1, 2], [3, 4], [7, 7]]
    with pytest.raises(chute.InvalidArgumentError, match="3 values do not fit a batch of 2"):
        grain.experimental.batch_and_pad([1, 2, 3], batch_size=2)


def test_packers_refuse_grain_options_chute_lacks():
    ds = grain.MapDataset.source([{"t": np.arange(3)}]).to_iter_dataset()
    with pytest.raises(
        chute.InvalidArgumentError, match=r"do not support meta_features; leave it out"
    ):
        grain.experimental.FirstFitPackIterDataset(
            ds, length_struct={"t": 4}, num_packing_bins=2, meta_features=["t"]
        )
    with pytest.raises(chute.InvalidArgumentError, match=r"one length to the keys that are not"):
        grain.experimental.ConcatThenSplitIterDataset(ds, length_struct={"t": 4, "u": 5})
    with pytest.raises(chute.InvalidArgumentError, match=r"bos_token_id must be set"):
        grain.experimental.ConcatThenSplitIterDataset(
            ds,
            length_struct={"t": 4},
            bos_handling=grain.experimental.BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS,
        )
