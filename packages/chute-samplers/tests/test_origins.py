"""`IterNode.origin`: where each element of a stream came from, exactly and after resumes."""

import json

import pytest

from chute_core import DROPPED
from chute_samplers import (
    IndexSampler,
    IndexSamplerIterator,
    InterleaveIter,
    IterNode,
    MixIter,
    SequentialIter,
    ShardOptions,
    ShuffleMap,
    WindowShuffleIter,
)
from chute_samplers._hashing import hash_ints, origin_key, tag
from chute_sources import RangeSource


class FilterIter(IterNode):
    """A filtered stream passing its parent's origin on (the transforms layer owns the real one)."""

    def __init__(self, parent, keep):
        self._parent, self._keep = parent, keep

    @property
    def origin(self):
        return self._parent.origin

    def __next__(self):
        while True:
            element = next(self._parent)
            if self._keep(element):
                return element

    def get_state(self):
        return self._parent.get_state()

    def set_state(self, state):
        self._parent.set_state(state)


class NoOrigin:
    """A checkpointable iterator without `origin` (not an IterNode)."""

    def __init__(self, items):
        self._items, self._index = items, 0

    def __next__(self):
        if self._index >= len(self._items):
            raise StopIteration
        self._index += 1
        return self._items[self._index - 1]

    def get_state(self):
        return {"index": self._index}

    def set_state(self, state):
        self._index = state["index"]


def with_origins(iterator, key=lambda element: element):
    """The rest of `iterator` as `(key(element), origin)` pairs, origin read after each next."""
    out = []
    for element in iterator:
        out.append((key(element), iterator.origin))
    return out


def assert_origins_resume(make, expected=None, key=lambda element: element):
    """Restores at every state (JSON round trip) into a fresh and a used iterator.

    After each restore, the (element, origin) pairs from there on equal the uninterrupted
    run's. Returns that run.
    """
    full = with_origins(make(), key)
    if expected is not None:
        assert full == expected
    iterator = make()
    states = [json.loads(json.dumps(iterator.get_state()))]
    for _ in iterator:
        states.append(json.loads(json.dumps(iterator.get_state())))
    assert len(states) == len(full) + 1
    used = make()
    list(used)
    for k, state in enumerate(states):
        fresh = make()
        fresh.set_state(state)
        assert with_origins(fresh, key) == full[k:], f"fresh iterator restored at {k}"
        used.set_state(state)
        assert with_origins(used, key) == full[k:], f"used iterator restored at {k}"
    return full


def test_iter_node_origin_defaults_to_none():
    class Plain(IterNode):
        def __next__(self):
            return 1

        def get_state(self):
            return {}

        def set_state(self, state):
            pass

    it = Plain()
    assert it.origin is None
    next(it)
    assert it.origin is None


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 256])
def test_sequential_iter_origin_is_the_position_with_gaps_for_dropped(chunk_size):
    data = [DROPPED, "a", DROPPED, DROPPED, "b", "c", DROPPED]
    it = SequentialIter(data, chunk_size)
    assert it.origin is None
    assert with_origins(it) == [("a", (1,)), ("b", (4,)), ("c", (5,))]
    assert it.origin == (5,)  # Still the last element returned after StopIteration.
    it.set_state({"position": 2})
    assert it.origin is None  # Nothing returned since the restore.
    assert_origins_resume(
        lambda: SequentialIter(data, chunk_size), [("a", (1,)), ("b", (4,)), ("c", (5,))]
    )


def test_sequential_iter_origin_is_the_position_of_the_dataset_read():
    dataset = ShuffleMap(RangeSource(20), seed=3)
    pairs = assert_origins_resume(lambda: SequentialIter(dataset, chunk_size=7))
    assert [origin for _, origin in pairs] == [(p,) for p in range(20)]
    assert [element for element, _ in pairs] == list(dataset)


def _filtered_mix():
    tens = FilterIter(SequentialIter(RangeSource(0, 60)), lambda x: x % 10 == 0)
    threes = FilterIter(SequentialIter(RangeSource(100, 130)), lambda x: x % 3 == 0)
    return MixIter([tens, threes], weights=[1, 1])


def test_mix_iter_origin_is_the_component_then_its_origin():
    expected = [
        (0, (0, 0)),
        (102, (1, 2)),
        (10, (0, 10)),
        (105, (1, 5)),
        (20, (0, 20)),
        (108, (1, 8)),
        (30, (0, 30)),
        (111, (1, 11)),
    ]
    pairs = assert_origins_resume(_filtered_mix)
    assert pairs[:8] == expected
    assert all(element == (0, 100)[o[0]] + o[1] for element, o in pairs)


def test_mix_iter_origin_is_none_when_the_component_gives_none():
    it = MixIter([NoOrigin(["x", "y"]), SequentialIter(["a", "b"])])
    assert with_origins(it) == [("x", None), ("a", (1, 0)), ("y", None), ("b", (1, 1))]


def _interleave(use_factories):
    files = [["a0", DROPPED, "a2"], ["b0"], [DROPPED, "c1", "c2"], ["d0", "d1"]]
    if use_factories:
        inputs = [lambda f=f: SequentialIter(f, chunk_size=2) for f in files]
    else:
        inputs = [SequentialIter(f, chunk_size=2) for f in files]
    return InterleaveIter(inputs, cycle_length=2)


@pytest.mark.parametrize("use_factories", [True, False])
def test_interleave_iter_origin_is_the_input_number_then_its_origin(use_factories):
    expected = [
        ("a0", (0, 0)),
        ("b0", (1, 0)),
        ("a2", (0, 2)),
        ("c1", (2, 1)),
        ("d0", (3, 0)),
        ("c2", (2, 2)),
        ("d1", (3, 1)),
    ]
    assert_origins_resume(lambda: _interleave(use_factories), expected)


def test_interleave_iter_origin_is_none_for_inputs_without_origin():
    it = InterleaveIter([lambda: NoOrigin([1, 2]), lambda: SequentialIter([3])], 2)
    assert with_origins(it) == [(1, None), (3, (1, 0)), (2, None)]


@pytest.mark.parametrize("window_size", [1, 4, 7, 40])
def test_window_shuffle_iter_keeps_the_parent_origin(window_size):
    def make():
        parent = FilterIter(SequentialIter(RangeSource(30), chunk_size=4), lambda x: x % 4)
        return WindowShuffleIter(parent, window_size, seed=5)

    pairs = assert_origins_resume(make)
    assert all(origin == (element,) for element, origin in pairs)
    assert sorted(element for element, _ in pairs) == [x for x in range(30) if x % 4]


def test_window_shuffle_iter_over_a_mix_keeps_the_mix_origins():
    pairs = assert_origins_resume(lambda: WindowShuffleIter(_filtered_mix(), 5, seed=1))
    unshuffled = with_origins(_filtered_mix())
    assert pairs != unshuffled
    assert sorted(pairs) == sorted(unshuffled)


def test_window_shuffle_iter_without_parent_origins_gives_none():
    pairs = with_origins(WindowShuffleIter(NoOrigin([1, 2, 3]), 2, seed=0))
    assert sorted(element for element, _ in pairs) == [1, 2, 3]
    assert all(origin is None for _, origin in pairs)


@pytest.mark.parametrize("shard_index", [0, 1, 2])
def test_index_sampler_iterator_origin_is_the_global_index(shard_index):
    sampler = IndexSampler(
        10,
        num_epochs=2,
        shard_options=ShardOptions(shard_index, 3, drop_remainder=False),
        shuffle=True,
        seed=4,
    )

    def make():
        return IndexSamplerIterator(sampler)

    pairs = assert_origins_resume(make, key=lambda m: (m.index, m.record_key))
    assert [origin for _, origin in pairs] == [(index,) for (index, _), _ in pairs]
    assert all(index % 10 % 3 == shard_index for (index, _), _ in pairs)
    assert iter(sampler).origin is None


def test_origins_of_nested_combinations():
    def make():
        left = InterleaveIter([lambda: SequentialIter(["p", "q"]), lambda: _filtered_mix()], 2)
        return MixIter([left, SequentialIter(["z0", DROPPED, "z2"])], weights=[2, 1])

    pairs = assert_origins_resume(make)
    assert pairs[:6] == [
        ("p", (0, 0, 0)),
        (0, (0, 1, 0, 0)),
        ("z0", (1, 0)),
        ("q", (0, 0, 1)),
        (102, (0, 1, 1, 2)),
        ("z2", (1, 2)),
    ]


@pytest.mark.parametrize("origin", [(0, 0), (3, 1), (2**64 - 1, 0, 7), (5,) * 12])
def test_origin_key_is_two_hash_lanes_with_the_top_bit_set(origin):
    lanes = [hash_ints(tag("chute.origin_key"), lane, *origin) for lane in (0, 1)]
    assert origin_key(origin) == 2**127 | (lanes[0] % 2**63) << 64 | lanes[1]


def test_origin_keys_differ_between_origins():
    origins = [(a, b) for a in range(30) for b in range(30)] + [(0, 0, 0), (0,) * 5, (1, 0, 0)]
    keys = {origin_key(origin) for origin in origins}
    assert len(keys) == len(origins)
    assert all(2**127 <= key < 2**128 for key in keys)
