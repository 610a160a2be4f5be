"""Origins through the stream ops, and `RandomMapIter` keyed by them."""

import json

import numpy as np
import pytest

from chute_core import DROPPED, InvalidStateError
from chute_samplers import (
    IterNode,
    MixIter,
    RepeatMap,
    SequentialIter,
    ShuffleMap,
    WindowShuffleIter,
    record_rng,
)
from chute_samplers.internal import origin_key
from chute_sources import RangeSource
from chute_testing import ListIterator
from chute_transforms import (
    BatchIter,
    ConcatSplitIter,
    FilterIter,
    FilterMap,
    FirstFitPackIter,
    FlatMapIter,
    MapIter,
    MapWithIndexIter,
    RandomMapIter,
    RandomMapMap,
    UnbatchIter,
)


class NoOrigin:
    """A checkpointable iterator without `origin` (not an IterNode)."""

    def __init__(self, items):
        self._items, self._index = items, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self._index >= len(self._items):
            raise StopIteration
        self._index += 1
        return self._items[self._index - 1]

    def get_state(self):
        return {"index": self._index}

    def set_state(self, state):
        self._index = state["index"]


class ChunkReader(IterNode):
    """Base positions `[start, stop)` of a dataset, as a worker would read one chunk."""

    def __init__(self, dataset, start, stop):
        self._dataset, self._next, self._last = dataset, start, None
        self._stop = min(stop, len(dataset))

    @property
    def origin(self):
        return None if self._last is None else (self._last,)

    def __next__(self):
        while self._next < self._stop:
            position = self._next
            self._next += 1
            element = self._dataset[position]
            if element is not DROPPED:
                self._last = position
                return element
        raise StopIteration

    def get_state(self):
        return {"next": self._next}

    def set_state(self, state):
        self._next = state["next"]


def plain(element):
    """Elements as comparable plain values (arrays and dicts of arrays to lists)."""
    if isinstance(element, dict):
        return {key: plain(value) for key, value in element.items()}
    if isinstance(element, tuple):
        return tuple(plain(value) for value in element)
    if isinstance(element, np.ndarray):
        return element.tolist()
    if isinstance(element, np.generic):
        return element.item()
    return element


def with_origins(iterator):
    """The rest of `iterator` as `(element, origin)` pairs, origin read after each next."""
    return [(plain(element), iterator.origin) for element in iterator]


def assert_origins_resume(make, expected=None):
    """Restores at every state (JSON round trip) into a fresh and a used iterator.

    After each restore, the (element, origin) pairs from there on equal the uninterrupted
    run's. Returns that run.
    """
    full = with_origins(make())
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
        assert with_origins(fresh) == full[k:], f"fresh iterator restored at {k}"
        used.set_state(state)
        assert with_origins(used) == full[k:], f"used iterator restored at {k}"
    return full


def _stream(n=10, chunk_size=3):
    return SequentialIter(list(range(n)), chunk_size=chunk_size)


def draw(element, rng):
    return (element, int(rng.integers(2**62)))


# --- origins of each op -----------------------------------------------------------------


def test_elementwise_ops_pass_the_parent_origin_on():
    assert_origins_resume(
        lambda: MapIter(_stream(4), lambda x: x * 10),
        [(0, (0,)), (10, (1,)), (20, (2,)), (30, (3,))],
    )
    assert_origins_resume(
        lambda: MapWithIndexIter(FilterIter(_stream(7), lambda x: x % 3), lambda i, x: (i, x)),
        [((0, 1), (1,)), ((1, 2), (2,)), ((2, 4), (4,)), ((3, 5), (5,))],
    )
    it = RandomMapIter(FilterIter(_stream(6), lambda x: x > 3), lambda x, rng: x, seed=0)
    assert it.origin is None
    assert with_origins(it) == [(4, (4,)), (5, (5,))]


def test_filter_origins_have_gaps_also_over_dropped_positions():
    data = [0, DROPPED, 2, 3, DROPPED, 5, 6]
    assert_origins_resume(
        lambda: FilterIter(SequentialIter(data, chunk_size=2), lambda x: x != 3),
        [(0, (0,)), (2, (2,)), (5, (5,)), (6, (6,))],
    )


def test_ops_over_a_parent_without_origin_give_none():
    assert with_origins(MapIter(NoOrigin([1, 2]), lambda x: x)) == [(1, None), (2, None)]
    assert with_origins(FlatMapIter(NoOrigin([1]), lambda x: [x, x])) == [(1, None), (1, None)]
    assert with_origins(BatchIter(NoOrigin([1, 2, 3]), 2)) == [([1, 2], None), ([3], None)]
    assert with_origins(UnbatchIter(NoOrigin([np.array([1])]))) == [(1, None)]


def test_flat_map_origin_appends_the_output_number():
    expected = [
        ("1a", (1, 0)),
        ("2a", (2, 0)),
        ("2b", (2, 1)),
        ("4a", (4, 0)),
        ("5a", (5, 0)),
        ("5b", (5, 1)),
    ]
    assert_origins_resume(
        lambda: FlatMapIter(
            FilterIter(_stream(6), lambda x: x != 3), lambda x: [f"{x}{c}" for c in "ab"[: x % 3]]
        ),
        expected,
    )


def test_nested_flat_maps_append_one_number_each():
    pairs = assert_origins_resume(
        lambda: FlatMapIter(FlatMapIter(_stream(3), lambda x: [x] * x), lambda x: [x, -x])
    )
    assert pairs == [
        (1, (1, 0, 0)),
        (-1, (1, 0, 1)),
        (2, (2, 0, 0)),
        (-2, (2, 0, 1)),
        (2, (2, 1, 0)),
        (-2, (2, 1, 1)),
    ]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, [([1, 2, 4], (1,)), ([5, 7, 8], (5,)), ([10], (10,))]),
        ({"drop_remainder": True}, [([1, 2, 4], (1,)), ([5, 7, 8], (5,))]),
        (
            {"pad": True},
            [
                (([1, 2, 4], [True] * 3), (1,)),
                (([5, 7, 8], [True] * 3), (5,)),
                (([10, 0, 0], [True, False, False]), (10,)),
            ],
        ),
    ],
)
def test_batch_origin_is_the_first_element_origin(options, expected):
    assert_origins_resume(
        lambda: BatchIter(FilterIter(_stream(11), lambda x: x % 3), 3, **options), expected
    )


def test_unbatch_origin_appends_the_row_number():
    expected = [(1, (1, 0)), (2, (1, 1)), (4, (4, 0)), (5, (4, 1)), (7, (7, 0))]
    for masked in (False, True):
        assert_origins_resume(
            lambda m=masked: UnbatchIter(
                BatchIter(FilterIter(_stream(8), lambda x: x % 3), 2, pad=m), masked=m
            ),
            expected,
        )


def test_batch_and_unbatch_over_flat_map_and_window_shuffle():
    def make():
        shuffled = WindowShuffleIter(FlatMapIter(_stream(5), lambda x: [x] * (x % 3)), 3, seed=2)
        return UnbatchIter(BatchIter(shuffled, 2))

    pairs = assert_origins_resume(make)
    shuffled = with_origins(
        WindowShuffleIter(FlatMapIter(_stream(5), lambda x: [x] * (x % 3)), 3, seed=2)
    )
    assert [element for element, _ in pairs] == [element for element, _ in shuffled]
    firsts = [origin for _, origin in shuffled[::2]]
    assert [origin for _, origin in pairs] == [
        (*firsts[i // 2], i % 2) for i in range(len(shuffled))
    ]


def _docs(lengths):
    return [{"t": np.arange(n) + 100 * i} for i, n in enumerate(lengths)]


def test_first_fit_pack_origin_is_the_element_that_opened_the_row():
    docs = _docs([3, 0, 2, 4, 1, 2, 3])

    def make():
        return FirstFitPackIter(FilterIter(ListIterator(docs), lambda d: len(d["t"]) != 2), 4, 2)

    pairs = assert_origins_resume(make)
    firsts = [(element["t"][0] // 100,) for element, _ in pairs]
    # Element 3 fills a row at once; element 4 fills the row element 0 opened.
    assert [origin for _, origin in pairs] == firsts == [(3,), (0,), (6,)]


def test_concat_split_origin_is_the_first_element_with_tokens_in_the_row():
    docs = _docs([3, 0, 2, 6, 2])  # Rows: 0 0 0 | 2 2 3 | 3 3 3 | 3 3 4 | 4 (padded).
    for drop_remainder in (False, True):
        expected = [(0,), (2,), (3,), (3,), (4,)][: 4 if drop_remainder else 5]
        pairs = assert_origins_resume(
            lambda d=drop_remainder: ConcatSplitIter(ListIterator(docs), 3, drop_remainder=d)
        )
        assert [origin for _, origin in pairs] == expected


def test_mix_of_transformed_streams_prefixes_the_component():
    def make():
        evens = MapIter(FilterIter(_stream(10), lambda x: x % 2 == 0), lambda x: x)
        letters = FlatMapIter(SequentialIter(["ab", "c"]), list)
        return MixIter([evens, letters])

    assert_origins_resume(
        make,
        [
            (0, (0, 0)),
            ("a", (1, 0, 0)),
            (2, (0, 2)),
            ("b", (1, 0, 1)),
            (4, (0, 4)),
            ("c", (1, 1, 0)),
            (6, (0, 6)),
        ],
    )


def test_stream_iterators_of_this_layer_are_iter_nodes():
    for it in [
        BatchIter(_stream(), 2),
        UnbatchIter(_stream()),
        FirstFitPackIter(_stream(), 4, 2),
        ConcatSplitIter(_stream(), 4),
        MapIter(_stream(), abs),
    ]:
        assert isinstance(it, IterNode)
        assert it.origin is None


# --- RandomMapIter keyed by origin ------------------------------------------------------


@pytest.mark.parametrize(
    "dataset",
    [
        RangeSource(40),
        ShuffleMap(RangeSource(40), seed=3),
        FilterMap(ShuffleMap(RangeSource(40), seed=3), lambda x: x % 3),
        RepeatMap(ShuffleMap(RangeSource(10), seed=1), num_epochs=3),
    ],
    ids=["range", "shuffled", "filtered", "repeated"],
)
def test_random_map_iter_draws_what_random_map_map_draws(dataset):
    stream = list(RandomMapIter(SequentialIter(dataset, chunk_size=7), draw, seed=11))
    assert stream == list(RandomMapMap(dataset, draw, seed=11))
    assert stream != list(RandomMapIter(SequentialIter(dataset), draw, seed=12))


def test_random_map_iter_draws_do_not_depend_on_what_a_filter_dropped():
    def run(keep):
        stream = SequentialIter(RangeSource(50), chunk_size=4)
        return dict(RandomMapIter(FilterIter(stream, keep), draw, seed=5))

    everything = run(lambda x: True)
    some = run(lambda x: x % 3 != 1)
    assert len(some) < len(everything)
    assert all(everything[x] == value for x, value in some.items())


def test_random_map_iter_draws_after_a_flat_map_do_not_depend_on_filters():
    def run(keep):
        stream = FlatMapIter(FilterIter(_stream(20), keep), lambda x: [x] * (x % 3))
        it = RandomMapIter(stream, lambda x, rng: rng.integers(2**62), seed=9)
        return {origin: value for value, origin in with_origins(it)}

    everything = run(lambda x: True)
    some = run(lambda x: x % 4)
    assert len(some) < len(everything)
    assert all(everything[origin] == value for origin, value in some.items())
    assert len(set(everything.values())) == len(everything)


@pytest.mark.parametrize("chunk_size", [1, 3, 8, 64])
def test_random_map_iter_over_chunks_equals_the_whole_stream(chunk_size):
    dataset = FilterMap(ShuffleMap(RangeSource(30), seed=2), lambda x: x % 4)

    def ops(parent):
        kept = FilterIter(parent, lambda x: x % 5)
        flat = FlatMapIter(RandomMapIter(kept, draw, seed=1), lambda e: [e] * (e[0] % 3))
        return RandomMapIter(flat, lambda e, rng: (*e, int(rng.integers(100))), seed=2)

    whole = with_origins(ops(SequentialIter(dataset, chunk_size=5)))
    chunked = []
    for start in range(0, len(dataset), chunk_size):
        chunked += with_origins(ops(ChunkReader(dataset, start, start + chunk_size)))
    assert chunked == whole
    assert any(len(origin) == 2 for _, origin in whole)


def test_random_map_iter_keys_one_int_origins_by_position_and_longer_ones_by_hash():
    seed = 4
    first = lambda x, rng: rng.random()  # noqa: E731
    it = RandomMapIter(SequentialIter([DROPPED, DROPPED, "x"]), first, seed=seed)
    assert next(it) == record_rng(seed, 2, "random_map").random()
    it = RandomMapIter(FlatMapIter(SequentialIter(["ab"]), list), first, seed=seed)
    assert [next(it), next(it)] == [
        record_rng(seed, origin_key((0, 0)), "random_map").random(),
        record_rng(seed, origin_key((0, 1)), "random_map").random(),
    ]
    keys = {origin_key(o) for o in [(0, 0), (0, 1), (1, 0), (0, 0, 0), (2**63, 5), (3,) * 9]}
    assert len(keys) == 6
    assert all(2**127 <= key < 2**128 for key in keys)


def test_random_map_iter_falls_back_to_the_index_without_origins():
    first = lambda x, rng: rng.random()  # noqa: E731
    values = list(RandomMapIter(NoOrigin(["a", "b", "c"]), first, seed=3))
    assert values == [record_rng(3, i, "random_map").random() for i in range(3)]


def test_random_map_iter_resumes_with_origins_and_keeps_its_state_format():
    def make():
        parent = FlatMapIter(FilterIter(_stream(12), lambda x: x % 4), lambda x: [x] * (x % 3))
        return RandomMapIter(parent, draw, seed=6)

    pairs = assert_origins_resume(make)
    assert len(pairs) == 9
    it = make()
    next(it), next(it), next(it), next(it)
    # The random map's state format is unchanged: the index counts its input elements.
    # Inside an element, the flat map's names the element's position (`at`: 4 was dropped
    # by the filter, the element is 5), which resharding needs; states without it restore.
    flat_map_state = {"parent": {"parent": {"position": 4}, "index": 4}, "index": 3, "offset": 1}
    assert it.get_state() == {"parent": {**flat_map_state, "at": 5}, "index": 4}
    it.set_state({"parent": flat_map_state, "index": 4})
    assert with_origins(it) == pairs[4:]
    with pytest.raises(InvalidStateError, match=r"state\['at'\] = 4 names the element"):
        it.set_state({"parent": {**flat_map_state, "at": 4}, "index": 4})
