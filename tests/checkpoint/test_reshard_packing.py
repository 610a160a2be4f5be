"""Packing after the shard reshards: the elements in open rows go back to be read, those
in rows emitted are skipped, and the tokens emitted of an element concat-then-split cut
are dropped by its new owner; after a window shuffle too (documents shuffled, then packed
into rows, as pretraining pipelines read them), where the elements either holds go back
(issue 30)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import ReshardError, apply_document, make_document, reshard
from chute_samplers.internal import named_origins, ordered_positions

COUNTS = st.integers(1, 8)


def _document(x):
    """0 to 5 tokens, each unique to its record: 100 * x + k."""
    return {"t": np.arange(x % 6, dtype=np.int64) + 100 * x}


def _kept(x):
    return x % 7 != 3


def tokens(row):
    """The tokens of a packed row (or of a batch of rows), padding left out."""
    t, segments = np.asarray(row["t"]), np.asarray(row["t_segment_ids"])
    return t[segments > 0].tolist()


METHODS = {
    "first_fit": lambda draw: {"num_packing_bins": draw(st.integers(1, 4))},
    "best_fit": lambda draw: {
        "num_packing_bins": draw(st.integers(1, 4)),
        "max_sequences_per_bin": draw(st.sampled_from([None, 2])),
    },
    "concat_split": lambda draw: {},
}


def _shorter_than_two(document):
    return len(document["t"]) != 2


@st.composite
def pipelines(draw, windowed=False):
    """Packing after the shard, with a filter and workers before it and a batch after.

    `windowed`: a window shuffle before the packer, and maybe a filter between them.
    """
    size = draw(st.integers(0, 80 if windowed else 60))
    seed = draw(st.integers(0, 5))
    method = draw(st.sampled_from(sorted(METHODS)))
    options = METHODS[method](draw)
    length = draw(st.integers(3, 16 if windowed else 9))
    before = draw(st.booleans())  # A filter between the reader and the packer.
    workers = draw(st.sampled_from([None, 0, 1]))  # mp_prefetch before the packer.
    chunk = draw(st.integers(1, 5))
    batch = draw(st.sampled_from([None, 2]))
    window = draw(st.integers(1, 12)) if windowed else None
    between = windowed and draw(st.booleans())  # A filter after the window shuffle.

    def make(index, count):
        ds = chute.MapDataset.range(size).seed(seed).shuffle().shard(index, count)
        it = ds.to_iter_dataset()
        if before:
            it = it.filter(_kept)
        it = it.map(_document)
        if workers is not None:
            it = it.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=chunk)
        if window is not None:
            it = it.window_shuffle(window, seed=seed + 1)
        if between:
            it = it.filter(_shorter_than_two)
        it = it.pack(length, method=method, **options)
        return it if batch is None else it.batch(batch)

    return make


@settings(max_examples=60, deadline=None)
@given(pipelines(), COUNTS, st.lists(COUNTS, min_size=1, max_size=3), st.integers(0, 2**16))
def test_every_token_comes_once_on_any_counts(make, old, news, seed):
    chute.checkpoint.check_reshardable(iter(make(0, old)))
    run = chute.testing.assert_reshards(make, old, news, seed=seed, records=tokens)
    assert run.counts == (old, *news)


def _fit(index, count):
    ds = chute.MapDataset.range(30).shard(index, count).to_iter_dataset().map(_document)
    return ds.pack(7, num_packing_bins=3)


def test_open_rows_go_back_and_emitted_rows_stay_emitted():
    olds = [iter(_fit(i, 2)) for i in range(2)]
    head = [tokens(next(olds[0])), tokens(next(olds[1]))]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    state = documents[0]["state"]
    start = state["parent"]["parent"]["position"]  # Before the oldest element held.
    assert state["bins"] and state["span"] == [start, state["read"]]  # And their positions.
    new = reshard(documents, 3)
    news = [iter(_fit(k, 3)) for k in range(3)]
    for it, document in zip(news, new, strict=True):
        apply_document(it, document)
    rest = [tokens(row) for it in news for row in it]
    everything = [t for x in range(30) for t in _document(x)["t"].tolist()]
    assert sorted(itertools.chain(*head, *rest)) == sorted(everything)


def _split(index, count):
    ds = chute.MapDataset.range(30).shard(index, count).to_iter_dataset().map(_document)
    return ds.pack(3, method="concat_split")


def test_an_element_cut_between_rows_continues_on_its_new_owner():
    olds = [iter(_split(i, 2)) for i in range(2)]
    # Process 0 stops inside record 10 (its third row ends with token 1000 of 1000..1003).
    head = [tokens(row) for row in itertools.islice(olds[0], 3)] + [tokens(next(olds[1]))]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    cut = [d["state"] for d in documents if d["state"]["skip"]]
    assert cut and all("at" in state for state in cut)
    new = reshard(documents, 3)
    assert any("drop" in d["state"] for d in new)
    news = [iter(_split(k, 3)) for k in range(3)]
    for it, document in zip(news, new, strict=True):
        apply_document(it, document)
    rest = [tokens(row) for it in news for row in it]
    everything = [t for x in range(30) for t in _document(x)["t"].tolist()]
    assert sorted(itertools.chain(*head, *rest)) == sorted(everything)


def test_a_resharded_packer_resumes_exactly_on_its_own_count():
    """A state with `drop` entries, saved again and restored, gives the same rows."""
    olds = [iter(_split(i, 2)) for i in range(2)]
    list(itertools.islice(olds[0], 3))
    new = reshard([make_document(it, i, 2) for i, it in enumerate(olds)], 3)

    def resharded():
        it = iter(_split(1, 3))
        apply_document(it, new[1])
        return it

    chute.testing.assert_resumes(resharded, every=1)


def test_packer_states_stay_small_over_ten_reshards():
    def make(index, count):
        ds = chute.MapDataset.range(2000).seed(1).shuffle().shard(index, count)
        return ds.to_iter_dataset().map(_document).pack(16, num_packing_bins=4)

    counts = [4, 7, 2, 8, 5, 1, 3, 6, 8, 3, 5]
    run = chute.testing.assert_reshards(make, counts[0], counts[1:], seed=11, records=tokens)
    assert run.records == sum(x % 6 for x in range(2000))
    assert run.largest_state < 1600, run.largest_state


@pytest.mark.parametrize(
    ("tail", "stage"),
    [
        (lambda ds: ds.pack(8).flat_map(list), "stage 5 (flat_map) follows the shard stage"),
        (
            lambda ds: ds.pack(8).mp_prefetch(chute.MultiprocessingOptions(num_workers=0)),
            "stage 5 (mp_prefetch) runs the pack of stage 4 in its workers",
        ),
        (
            lambda ds: ds.pack(8).window_shuffle(4, seed=0),
            "stage 5 (window_shuffle) follows the shard stage",
        ),
        (
            lambda ds: ds.pack(8, method="concat_split").skip_errors(3),
            "stage 5 (skip_errors) counts the failures of elements that the pack of stage 4",
        ),
    ],
    ids=["flat_map_of_rows", "inside_workers", "rows_shuffled", "budget"],
)
def test_packings_that_cannot_continue_elsewhere_are_refused_when_built(tail, stage, refused_alike):
    def make(index, count):
        return tail(chute.MapDataset.range(9).shard(index, count).to_iter_dataset().map(_document))

    assert refused_alike(make).startswith(stage)


def test_states_saved_without_positions_are_refused_with_the_reason():
    olds = [iter(_fit(i, 2)) for i in range(2)]
    next(olds[0])
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    del documents[0]["state"]["span"]  # As a chute from before `span` saved it.
    with pytest.raises(ReshardError, match="whose positions its state does not name"):
        reshard(documents, 3)
    olds = [iter(_split(i, 2)) for i in range(2)]
    list(itertools.islice(olds[0], 3))
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    for document in documents:
        document["state"].pop("at", None)
    with pytest.raises(ReshardError, match="whose position its state does not name"):
        reshard(documents, 3)


@pytest.mark.parametrize(
    ("drop", "message"),
    [
        ([[0, 0]], r"state\['drop'\] must list"),
        ([[0, 1], [0, 2]], r"state\['drop'\] must list"),
        ("x", r"state\['drop'\] must list"),
        ([[1, 99]], "were emitted elsewhere, but it has"),
    ],
)
def test_damaged_drop_lists_are_refused(drop, message):
    it = iter(_split(0, 1))
    state = it.get_state()
    state["drop"] = drop
    fresh = iter(_split(0, 1))

    def restore_and_read():  # Some are refused by set_state, the rest at their element.
        fresh.set_state(state)
        next(fresh)

    with pytest.raises(chute.InvalidStateError, match=message):
        restore_and_read()


def test_a_span_that_does_not_match_the_elements_read_again_is_refused():
    it = iter(_fit(0, 1))
    next(it)
    state = it.get_state()
    assert state["read"] > 1
    state["span"] = [1, state["read"]]
    fresh = iter(_fit(0, 1))
    fresh.set_state(state)
    with pytest.raises(chute.InvalidStateError, match="reading them again gave"):
        next(fresh)


@settings(max_examples=60, deadline=None)
@given(
    pipelines(windowed=True),
    COUNTS,
    st.lists(COUNTS, min_size=1, max_size=3),
    st.integers(0, 2**16),
)
def test_every_token_after_a_window_shuffle_comes_once_on_any_counts(make, old, news, seed):
    chute.checkpoint.check_reshardable(iter(make(0, old)))
    run = chute.testing.assert_reshards(make, old, news, seed=seed, records=tokens)
    assert run.counts == (old, *news)


def _window_fit(index, count):
    ds = chute.MapDataset.range(23).seed(1).shuffle().shard(index, count).to_iter_dataset()
    shuffled = ds.map(_document).window_shuffle(4, seed=2)
    return shuffled.pack(3, num_packing_bins=3, method="best_fit")


def test_rows_open_over_a_shuffled_window_go_back_and_emitted_ones_stay_emitted():
    olds = [iter(_window_fit(i, 5)) for i in range(5)]
    stops = zip(olds, (1, 4, 2, 2, 2), strict=True)
    head = [tokens(row) for it, stop in stops for row in itertools.islice(it, stop)]
    documents = [make_document(it, i, 5) for i, it in enumerate(olds)]
    # Process 1 holds the window's third element (local 2) in an open row, and emitted
    # the window's last one (local 0) and the next window's first (local 4) after it:
    # read in that order, which the packer's state names (`order`).
    state = documents[1]["state"]
    assert state["bins"] == [[0]] and state["parent"]["offset"] == 2
    assert ordered_positions(state["span"], state["order"], "state").tolist() == [2, 0, 4]
    new = reshard(documents, 3)
    news = [iter(_window_fit(k, 3)) for k in range(3)]
    for it, document in zip(news, new, strict=True):
        apply_document(it, document)
    rest = [tokens(row) for it in news for row in it]
    everything = [t for x in range(23) for t in _document(x)["t"][:3].tolist()]
    assert sorted(itertools.chain(*head, *rest)) == sorted(everything)


def test_the_packed_rows_after_a_reshard_are_a_function_of_the_saved_states():
    olds = [iter(_window_fit(i, 2)) for i in range(2)]
    list(itertools.islice(olds[0], 3))
    new = reshard([make_document(it, i, 2) for i, it in enumerate(olds)], 3)

    def rows():
        news = [iter(_window_fit(k, 3)) for k in range(3)]
        for it, document in zip(news, new, strict=True):
            apply_document(it, document)
        return [[tokens(row) for row in it] for it in news]

    assert rows() == rows()


def test_a_resharded_window_and_packer_resume_exactly_on_their_own_count():
    olds = [iter(_window_fit(i, 2)) for i in range(2)]
    list(itertools.islice(olds[1], 2))
    new = reshard([make_document(it, i, 2) for i, it in enumerate(olds)], 3)

    def resharded():
        it = iter(_window_fit(2, 3))
        apply_document(it, new[2])
        return it

    chute.testing.assert_resumes(resharded, every=1)


def test_window_and_packer_states_stay_small_over_ten_reshards():
    def make(index, count):
        ds = chute.MapDataset.range(2000).seed(1).shuffle().shard(index, count).to_iter_dataset()
        return ds.map(_document).window_shuffle(64, seed=5).pack(16, num_packing_bins=4)

    counts = [4, 7, 2, 8, 5, 1, 3, 6, 8, 3, 5]
    run = chute.testing.assert_reshards(make, counts[0], counts[1:], seed=11, records=tokens)
    assert run.records == sum(x % 6 for x in range(2000))
    assert run.largest_state < 2000, run.largest_state


@pytest.mark.parametrize(
    ("order", "message"),
    [
        ("AAAAAAAA", "each once"),  # Ranks 0, 0, 0, 0.
        ("AQAAAA==", "each once"),  # Two ranks for more elements.
        ("not base64!", "each once"),
        (7, "each once"),
    ],
)
def test_damaged_orders_are_refused(order, message):
    olds = [iter(_window_fit(i, 5)) for i in range(5)]
    list(itertools.islice(olds[1], 4))
    state = olds[1].get_state()
    assert "order" in state
    state["order"] = order
    with pytest.raises(chute.InvalidStateError, match=message):
        iter(_window_fit(1, 5)).set_state(state)


def test_an_order_that_does_not_match_the_elements_read_again_is_refused():
    it = iter(_window_fit(1, 5))
    list(itertools.islice(it, 4))
    state = it.get_state()
    state["order"] = named_origins([(4,), (2,), (0,)])["order"]  # Another order, same span.
    fresh = iter(_window_fit(1, 5))
    fresh.set_state(state)
    with pytest.raises(chute.InvalidStateError, match="reading them again gave"):
        next(fresh)


def test_positions_read_out_of_order_are_named_with_their_order():
    assert named_origins([(2,), (3,), (4,)]) == {"span": [2, 3]}
    shuffled = named_origins([(2,), (0,), (4,)])  # First and last as for 2, 3, 4.
    assert ordered_positions(shuffled["span"], shuffled["order"], "state").tolist() == [2, 0, 4]
    assert named_origins([(2,), (2,)]) == {} and named_origins([(2,), None]) == {}
    assert named_origins([(2, 0), (1, 5)]) == {"reads": [[[1, [5, 1]], [2, [0, 1]]], "AQA="]}


@pytest.mark.parametrize(
    ("tail", "stage"),
    [
        (
            lambda ds: ds.window_shuffle(4, seed=0).pack(8).window_shuffle(2, seed=1),
            "stage 6 (window_shuffle) follows the shard stage",
        ),
        (
            lambda ds: ds.window_shuffle(4, seed=0).window_shuffle(3, seed=1).pack(8),
            "stage 5 (window_shuffle) follows the shard stage",
        ),
        (
            lambda ds: ds.window_shuffle(4, seed=0).flat_map(lambda d: [d, d]).pack(8),
            "stage 6 (pack) follows the shard stage",
        ),
        (
            lambda ds: ds.window_shuffle(4, seed=0).pack(8).skip_errors(3),
            "stage 6 (skip_errors) counts the failures of elements that the window_shuffle",
        ),
    ],
    ids=["rows_shuffled", "two_windows", "after_a_flat_map", "budget"],
)
def test_what_cannot_continue_after_a_window_shuffle_is_refused_when_built(
    tail, stage, refused_alike
):
    def make(index, count):
        return tail(chute.MapDataset.range(9).shard(index, count).to_iter_dataset().map(_document))

    assert refused_alike(make).startswith(stage)
