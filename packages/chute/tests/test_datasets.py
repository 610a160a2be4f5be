"""The fluent API: each method builds one node; exact sequences, resume, printing."""

import operator
import pickle
import sys

import numpy as np
import pytest

import chute
from chute import IterDataset, MapDataset
from chute_samplers import Permutation
from chute_testing import assert_resumes, assert_trees_equal


def test_each_method_gives_the_exact_sequence():
    ds = MapDataset.range(10)
    assert list(ds.map(lambda x: x + 1)) == list(range(1, 11))
    assert list(ds.filter(lambda x: x % 3 == 0)) == [0, 3, 6, 9]
    assert list(ds[2:9:3]) == [2, 5, 8]
    assert list(ds[::-4]) == [9, 5, 1]
    assert list(ds.shard(2, 4)) == [2, 6]
    assert list(ds[:3].repeat(2)) == [0, 1, 2, 0, 1, 2]
    assert list(MapDataset.source(["ab", "c"]).flat_map(list, max_fan_out=2)) == ["a", "b", "c"]
    assert list(ds.map_with_index(lambda i, x: i * x)[:4]) == [0, 1, 4, 9]
    assert_trees_equal(list(ds[:5].batch(2)), [np.array([0, 1]), np.array([2, 3]), np.array([4])])
    assert len(ds.batch(3, drop_remainder=True)) == 3


def test_shuffle_is_a_permutation_reshuffled_each_epoch_and_seeded():
    ds = MapDataset.range(20).shuffle(seed=3).repeat(2)
    first, second = list(ds)[:20], list(ds)[20:]
    assert sorted(first) == sorted(second) == list(range(20))
    assert first != second
    assert list(ds) == list(MapDataset.range(20).shuffle(seed=3).repeat(2))
    assert list(ds) != list(MapDataset.range(20).shuffle(seed=4).repeat(2))


def test_pipeline_seed_gives_each_random_stage_its_own_seed():
    ds = MapDataset.range(100).seed(7).shuffle().random_map(lambda x, rng: rng.integers(1000))
    again = MapDataset.range(100).seed(7).shuffle().random_map(lambda x, rng: rng.integers(1000))
    assert list(ds) == list(again)
    shuffled = list(MapDataset.range(100).seed(7).shuffle())
    assert (
        list(MapDataset.range(100).seed(7).shuffle().shuffle()) != shuffled
    )  # Not the same seed twice.
    assert list(MapDataset.range(100).seed(8).shuffle()) != shuffled
    explicit = list(MapDataset.range(100).seed(7).shuffle(seed=1))
    assert explicit == list(MapDataset.range(100).shuffle(seed=1))


def test_random_stages_without_any_seed_fail_with_a_hint():
    with pytest.raises(
        ValueError, match=r"shuffle needs a seed: pass seed=\.\.\. or .*ds\.seed\(0\)"
    ):
        MapDataset.range(3).shuffle()
    with pytest.raises(ValueError, match="random_map needs a seed"):
        MapDataset.range(3).to_iter_dataset().random_map(lambda x, rng: x)
    with pytest.raises(ValueError, match=r"seed must be in \[0, 2\*\*64\)"):
        MapDataset.range(3).seed(-1)


def test_source_rejects_non_random_access_input():
    with pytest.raises(TypeError, match="needs a random-access source"):
        MapDataset.source(x for x in range(3))
    with pytest.raises(TypeError, match="needs a random-access source"):
        MapDataset.source({"a": 1})


def test_mix_and_select_from():
    a, b = MapDataset.source(["a"] * 3), MapDataset.source(["b"] * 10)
    mixed = MapDataset.mix([a, b], weights=[1, 1])
    assert "".join(mixed) == "ababab"
    endless = MapDataset.mix([a.repeat(), b.repeat()], weights=[1, 2])
    assert len(endless) == sys.maxsize
    assert list(MapDataset.select_from([a, b], [1, 1, 0])) == ["b", "b", "a"]


def test_print_shows_the_pipeline_as_a_chain():
    def double(x):
        return 2 * x

    ds = (
        MapDataset.range(8)
        .seed(1)
        .shuffle(seed=5)
        .map(double)
        .filter(operator.truth)[2:]
        .to_iter_dataset()
        .batch(2)
    )
    assert str(ds) == "\n".join(
        [
            "IterDataset",
            "  source(RangeSource(start=0, stop=8, step=1))",
            "  .seed(seed=1)",
            "  .shuffle(seed=5)",
            "  .map(fn=double)",
            "  .filter(fn=truth)",
            "  .slice([2:])",
            "  .to_iter_dataset()",
            "  .batch(batch_size=2, drop_remainder=False)",
        ]
    )


def test_datasets_iterate_many_times_independently():
    ds = MapDataset.range(5).to_iter_dataset().map(operator.neg)
    one, two = iter(ds), iter(ds)
    assert [next(one), next(one), next(two), next(one), next(two)] == [0, -1, 0, -2, -1]
    assert list(ds) == list(ds) == [0, -1, -2, -3, -4]


@pytest.mark.parametrize(
    "build",
    [
        lambda: (
            MapDataset.range(23)
            .seed(0)
            .shuffle()
            .filter(lambda x: x % 4)
            .to_iter_dataset()
            .batch(3)
        ),
        lambda: (
            MapDataset.range(9)
            .to_iter_dataset()
            .flat_map(lambda x: [x] * (x % 3))
            .batch(2, pad=True)
        ),
        lambda: (
            MapDataset.range(15)
            .seed(2)
            .to_iter_dataset()
            .random_map(lambda x, rng: x + rng.random())
        ),
        lambda: IterDataset.mix(
            [MapDataset.range(30).to_iter_dataset().filter(lambda x: x % 2), MapDataset.range(5)],
            [2, 1],
        ),
        lambda: MapDataset.range(12).to_iter_dataset().batch(4).unbatch().window_shuffle(5, seed=1),
        lambda: IterDataset.interleave([MapDataset.source([c] * 3) for c in "xyz"], cycle_length=2),
    ],
)
def test_iterators_resume_exactly_anywhere(build):
    assert_resumes(lambda: iter(build()), every=1)


@pytest.mark.parametrize("size", [1000, 9000])
def test_shuffle_map_batch_is_the_same_batched_before_or_after_the_stream_and_resumes(size):
    shuffled = MapDataset.range(size).shuffle(seed=5).map(operator.neg)
    order = [-Permutation(size, 5)[i] for i in range(size)]
    expected = [np.array(order[i : i + 256]) for i in range(0, size, 256)]
    for ds in (shuffled.batch(256), shuffled.to_iter_dataset().batch(256)):
        assert_resumes(lambda d=ds: iter(d), expected=expected, every=7)
    assert_trees_equal(
        [shuffled.batch(256)[k] for k in (3, 0, 1)], [expected[k] for k in (3, 0, 1)]
    )
    assert_trees_equal(
        list(shuffled.batch(300, drop_remainder=True)),
        [np.array(order[i : i + 300]) for i in range(0, size - 299, 300)],
    )


def test_iter_datasets_pickle_for_worker_processes():
    ds = MapDataset.range(10).shuffle(seed=1).to_iter_dataset().map(operator.neg).batch(4)
    copy = pickle.loads(pickle.dumps(ds))
    assert_trees_equal(list(copy), list(ds))


def test_batch_options_are_checked_when_declared():
    with pytest.raises(ValueError, match="contradict"):
        MapDataset.range(3).to_iter_dataset().batch(2, drop_remainder=True, pad=True)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        MapDataset.range(3).batch(0)


def test_pipe_and_aliases():
    assert MapDataset.range(4).pipe(lambda ds, n: len(ds[:n]), 3) == 3
    assert chute.MapDataset.source(chute.RangeDataSource(0, 3)).node is not None


def test_adding_a_deterministic_stage_upstream_keeps_the_shuffle_order():
    plain = list(MapDataset.range(50).seed(3).shuffle())
    assert list(MapDataset.range(50).map(operator.pos).seed(3).shuffle()) == plain
    assert list(MapDataset.range(50).seed(3).filter(operator.truth).shuffle()) != []


def test_read_errors_are_not_blamed_on_the_op_above():
    class Broken:
        def __len__(self):
            return 4

        def __getitem__(self, key):
            if key == 2:
                raise KeyError("bad record")
            return key

    with pytest.raises(KeyError) as info:
        list(MapDataset.source(Broken()).map(operator.neg))
    assert not any("map(neg)" in note for note in getattr(info.value, "__notes__", []))


def test_slices_print_like_python():
    assert str(MapDataset.range(9)[:8]).endswith(".slice([:8])")
    assert str(MapDataset.range(9)[1::2]).endswith(".slice([1::2])")


def test_batching_positions_after_a_filter_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"cannot follow filter.*to_iter_dataset\(\)\.batch"):
        MapDataset.range(9).filter(operator.truth).map(operator.neg).batch(2)
    with pytest.raises(ValueError, match="cannot follow filter or flat_map"):
        MapDataset.mix([MapDataset.range(3).flat_map(lambda x: [x], max_fan_out=1)]).batch(2)


def test_list_sources_hand_out_copies_so_in_place_maps_stay_pure():
    def scale(element):
        element["x"] = element["x"] * 2
        return element

    ds = MapDataset.source([{"x": 1.0}, {"x": 2.0}]).map(scale)
    assert list(ds) == list(ds) == [{"x": 2.0}, {"x": 4.0}]


def test_iter_dataset_source_wants_a_factory_not_an_iterator():
    from functools import partial

    from chute_samplers import SequentialIter

    with pytest.raises(TypeError, match="can be iterated only once"):
        IterDataset.source(SequentialIter([1]))
    ds = IterDataset.interleave([partial(SequentialIter, [1, 2]), partial(SequentialIter, [3])], 2)
    assert list(ds) == list(ds) == [1, 3, 2]
    assert "[0] <a stream>" not in str(ds)
