"""Packing after the shard reshards: the elements in open rows go back to be read, those
in rows emitted are skipped, and the tokens emitted of an element concat-then-split cut
are dropped by its new owner (issue 30)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import ReshardError, apply_document, make_document, reshard

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


@st.composite
def pipelines(draw):
    """Packing after the shard, with a filter and workers before it and a batch after."""
    size = draw(st.integers(0, 60))
    seed = draw(st.integers(0, 5))
    method = draw(st.sampled_from(sorted(METHODS)))
    options = METHODS[method](draw)
    length = draw(st.integers(3, 9))
    before = draw(st.booleans())  # A filter between the reader and the packer.
    workers = draw(st.sampled_from([None, 0, 1]))  # mp_prefetch before the packer.
    chunk = draw(st.integers(1, 5))
    batch = draw(st.sampled_from([None, 2]))

    def make(index, count):
        ds = chute.MapDataset.range(size).seed(seed).shuffle().shard(index, count)
        it = ds.to_iter_dataset()
        if before:
            it = it.filter(_kept)
        it = it.map(_document)
        if workers is not None:
            it = it.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=chunk)
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
            lambda ds: ds.window_shuffle(4, seed=0).pack(8),
            "stage 5 (pack) follows the shard stage",
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
    ids=["flat_map_of_rows", "inside_workers", "after_a_window_shuffle", "rows_shuffled", "budget"],
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
