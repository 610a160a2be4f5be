"""`random_map(..., key="record")`: draws keyed by the record, not by where it lands."""

from __future__ import annotations

import pytest

import chute
from chute_testing import assert_resumes


def _draw(record, rng):
    return (int(record), round(float(rng.random()), 12))


def _by_record(pairs):
    found = {}
    for record, draw in pairs:
        assert found.setdefault(record, draw) == draw
    return found


def test_a_record_draws_the_same_wherever_a_shuffle_puts_it():
    base = chute.MapDataset.range(50)
    plain = _by_record(base.random_map(_draw, seed=3, key="record"))
    for shuffle_seed in (1, 2):
        shuffled = list(base.shuffle(seed=shuffle_seed).random_map(_draw, seed=3, key="record"))
        assert [r for r, _ in shuffled] != list(range(50))
        assert _by_record(shuffled) == plain
    by_position = _by_record(base.shuffle(seed=1).random_map(_draw, seed=3))
    assert by_position != plain  # Keyed by position, the shuffle moves the draws.


def test_each_pass_of_a_repeat_draws_anew_and_a_slice_keeps_the_key():
    ds = (
        chute.MapDataset.range(10).shuffle(seed=4).repeat(2).random_map(_draw, seed=0, key="record")
    )
    draws = list(ds)
    first, second = _by_record(draws[:10]), _by_record(draws[10:])
    assert sorted(first) == sorted(second) == list(range(10))
    assert all(first[r] != second[r] for r in range(10))
    assert list(ds) == draws  # Pure: the same again.
    sliced = chute.MapDataset.range(10)[3:8].random_map(_draw, seed=0, key="record")
    whole = _by_record(chute.MapDataset.range(10).random_map(_draw, seed=0, key="record"))
    assert _by_record(sliced) == {r: whole[r] for r in range(3, 8)}


def test_streams_and_workers_draw_what_the_map_dataset_draws():
    shuffled = chute.MapDataset.range(40).shuffle(seed=6)
    expected = list(shuffled.random_map(_draw, seed=9, key="record"))

    def stream(workers):
        ds = (
            shuffled.to_iter_dataset()
            .filter(lambda x: x % 3)
            .random_map(_draw, seed=9, key="record")
        )
        return ds if workers is None else ds.mp_prefetch(num_workers=workers, chunk_size=7)

    kept = [pair for pair in expected if pair[0] % 3]
    for workers in (None, 0, 2):
        assert list(stream(workers)) == kept
    assert_resumes(
        lambda: iter(stream(2)), every=5, make_restored=[lambda: iter(stream(0))], expected=kept
    )


def test_the_key_is_declared_only_when_it_is_the_record():
    ds = chute.MapDataset.range(3)
    assert repr(ds.random_map(_draw, seed=1)).splitlines()[-1] == "  .random_map(fn=_draw, seed=1)"
    assert repr(ds.random_map(_draw, seed=1, key="record")).splitlines()[-1] == (
        "  .random_map(fn=_draw, seed=1, key='record')"
    )


def test_bad_keys_and_unknown_records_raise_clear_errors():
    ds = chute.MapDataset.range(6)
    message = r"key must be 'position' \(draws keyed by the element's position\) or 'record'"
    with pytest.raises(chute.InvalidArgumentError, match=r"^RandomMapMap: " + message):
        ds.random_map(_draw, seed=0, key="element")
    with pytest.raises(chute.InvalidArgumentError, match=r"^IterDataset.random_map: " + message):
        ds.to_iter_dataset().random_map(_draw, seed=0, key="element")
    mixed = chute.MapDataset.mix([ds, ds]).random_map(_draw, seed=0, key="record")
    with pytest.raises(
        chute.InvalidArgumentError, match=r"key='record': MixMap does not read each position"
    ):
        list(mixed)
    flat = ds.to_iter_dataset().flat_map(lambda x: [x, x]).random_map(_draw, seed=0, key="record")
    with pytest.raises(
        chute.InvalidArgumentError, match=r"the element's origin \(0, 0\) is not a position"
    ):
        next(iter(flat))


def _tag(key, element):
    return (key, int(element))


def test_map_with_key_gives_the_record_key_through_shuffles_and_workers():
    base = chute.MapDataset.range(30).map(lambda x: x * 10).shuffle(seed=8).repeat(2)
    mapped = list(base.map_with_key(_tag))
    assert sorted(mapped) == sorted((k, 10 * k) for k in range(30) for _ in range(2))
    stream = base.to_iter_dataset().filter(lambda x: x % 20).map_with_key(_tag)
    expected = [pair for pair in mapped if pair[1] % 20]
    assert list(stream) == expected
    assert list(stream.mp_prefetch(num_workers=2, chunk_size=4)) == expected
    with pytest.raises(
        chute.InvalidArgumentError, match=r"map_with_key\(_tag\): the element's origin"
    ):
        next(iter(base.to_iter_dataset().flat_map(lambda x: [x]).map_with_key(_tag)))
