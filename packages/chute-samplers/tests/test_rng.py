import pickle

import numpy as np
import pytest

from chute_samplers import record_rng, record_rngs


def test_pinned_draws_catch_an_accidental_change():
    # If one of these changes, every user's per-record augmentations change: bump the
    # checkpoint version and say so in the changelog instead of editing the numbers.
    assert record_rng(0, 0).integers(0, 2**32, 3).tolist() == [1215855937, 3456743741, 1710867644]
    assert record_rng(0, 0).random() == 0.8048358702294268
    assert record_rng(42, 7).random() == 0.10602828055646629
    assert record_rng(1, 2**70, op="augment").integers(0, 1000, 4).tolist() == [345, 962, 175, 708]
    assert record_rng(0, 0, op=3).random() == 0.49990394194777255
    assert record_rng(0, 5).spawn(1)[0].integers(0, 1000, 3).tolist() == [146, 834, 641]


def test_generator_is_philox_and_a_pure_function_of_its_arguments():
    rng = record_rng(7, 11, op="crop")
    assert isinstance(rng.bit_generator, np.random.Philox)
    again = record_rng(7, 11, op="crop")
    assert rng.normal(size=5).tolist() == again.normal(size=5).tolist()


def test_seed_op_and_position_each_change_the_stream():
    base = record_rng(1, 2, op="a").random(4).tolist()
    assert record_rng(2, 2, op="a").random(4).tolist() != base
    assert record_rng(1, 3, op="a").random(4).tolist() != base
    assert record_rng(1, 2, op="b").random(4).tolist() != base


def test_neighbouring_positions_do_not_share_draws():
    # Counters of different positions are 2**128 apart: long draws never overlap.
    first = record_rng(0, 0).integers(0, 2**63, 10_000)
    second = record_rng(0, 1).integers(0, 2**63, 10_000)
    assert np.intersect1d(first, second).size == 0


def test_batched_generators_equal_single_ones():
    positions = [0, 1, 5, 2**40]
    batch = record_rngs(3, positions, op="x")
    assert [g.random() for g in batch] == [record_rng(3, p, op="x").random() for p in positions]
    assert record_rngs(3, []) == []


def test_generators_pickle_and_spawn_deterministically():
    rng = record_rng(5, 6)
    rng.random()
    clone = pickle.loads(pickle.dumps(rng))
    assert clone.random(3).tolist() == rng.random(3).tolist()
    a, b = record_rngs(5, [6, 7])
    a.spawn(2)  # Spawning from one record's generator does not affect another's.
    assert b.spawn(1)[0].random() == record_rng(5, 7).spawn(1)[0].random()
    children = record_rng(5, 6).spawn(2)
    assert children[0].random() != children[1].random()


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((-1, 0), ValueError, "seed must be >= 0"),
        ((0, -1), ValueError, "position must be >= 0"),
        ((0, 1.0), TypeError, "position must be an int"),
        ((0, 0, -3), ValueError, "op must be >= 0"),
        ((0, 0, 1.5), TypeError, "op must be an int"),
    ],
)
def test_bad_arguments_name_what_is_wrong(args, error, match):
    with pytest.raises(error, match=match):
        record_rng(*args)
    with pytest.raises(ValueError, match="non-negative integers"):
        record_rngs(0, [1, -1])
