"""A packer over an interleave of the shard's files reshards (files read a few at a time,
tokenized, packed into rows: the common way to read a pretraining corpus): the streams
left open go to their new owners, the elements in open rows go back to be read, and
those in rows emitted are left out of their streams by whoever reads them (issue 30)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import ReshardError, apply_document, make_document, reshard

COUNTS = st.integers(1, 8)


def _document(x):
    """0 to 6 tokens, each unique to its record: 100 * x + k."""
    return {"t": np.arange(x % 7, dtype=np.int64) + 100 * x}


def tokens(row):
    """The tokens of a packed row (or of a batch of rows), padding left out."""
    t, segments = np.asarray(row["t"]), np.asarray(row["t_segment_ids"])
    return t[segments > 0].tolist()


def _not_threes(x):
    return x % 3 != 0


def _not_fives(x):
    return x % 5 != 1


@st.composite
def pipelines(draw):
    """A fit packer over an interleave of a sharded list of files, and what may be around."""
    files = draw(st.integers(0, 40))
    cycle = draw(st.integers(1, 5))
    size = draw(st.integers(1, 8))  # File n holds (7 n) % size records.
    shuffled = draw(st.booleans())  # The list of files shuffled before the shard.
    some = draw(st.booleans())  # The list of files filtered before the shard.
    inner = draw(st.booleans())  # A filter inside each file's stream.
    after = draw(st.sampled_from(["none", "filter", "prefetch"]))  # Before the packer.
    method = draw(st.sampled_from(["first_fit", "best_fit"]))
    bins = draw(st.integers(1, 4))
    length = draw(st.integers(3, 16))
    batch = draw(st.sampled_from([None, 2]))

    def file(number):
        ds = chute.MapDataset.range(number * 10, number * 10 + (number * 7) % size)
        ds = ds.to_iter_dataset()
        return ds.filter(_not_threes) if inner else ds

    def make(index, count):
        listing = chute.MapDataset.range(files)
        if shuffled:
            listing = listing.seed(7).shuffle()
        if some:
            listing = listing.filter(_not_threes)
        ds = chute.IterDataset.interleave(listing.shard(index, count).map(file), cycle_length=cycle)
        if after == "filter":
            ds = ds.filter(_not_fives)
        elif after == "prefetch":
            ds = ds.prefetch(2)
        ds = ds.map(_document).pack(length, method=method, num_packing_bins=bins)
        return ds if batch is None else ds.batch(batch)

    return make


@settings(max_examples=60, deadline=None)
@given(pipelines(), COUNTS, st.lists(COUNTS, min_size=1, max_size=3), st.integers(0, 2**16))
def test_every_token_of_every_file_comes_once_on_any_counts(make, old, news, seed):
    chute.checkpoint.check_reshardable(iter(make(0, old)))
    run = chute.testing.assert_reshards(make, old, news, seed=seed, records=tokens)
    assert run.counts == (old, *news)


def _file(number):
    return chute.MapDataset.range(number * 10, number * 10 + 4).to_iter_dataset()


def _packed(index, count):
    streams = chute.MapDataset.range(12).shard(index, count).map(_file)
    ds = chute.IterDataset.interleave(streams, cycle_length=3).map(_document)
    return ds.pack(10, num_packing_bins=2)


def test_open_rows_go_back_to_their_streams_and_emitted_ones_are_left_out():
    olds = [iter(_packed(i, 2)) for i in range(2)]
    head = [tokens(next(olds[0])), tokens(next(olds[1]))]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    state = documents[0]["state"]
    # Two rows open, two elements read since the oldest one emitted: the state names
    # what it read since by stream and position (`reads`).
    assert (state["read"], state["bins"]) == (4, [[0], [3]]) and "reads" in state
    new = reshard(documents, 3)
    assert any(document["state"]["parent"]["parent"].get("skips") for document in new)
    news = [iter(_packed(k, 3)) for k in range(3)]
    for it, document in zip(news, new, strict=True):
        apply_document(it, document)
    rest = [tokens(row) for it in news for row in it]
    everything = [
        t for f in range(12) for x in range(f * 10, f * 10 + 4) for t in _document(x)["t"]
    ]
    assert sorted(itertools.chain(*head, *rest)) == sorted(everything)


def test_states_stay_small_over_ten_reshards():
    def make(index, count):
        streams = chute.MapDataset.range(400).seed(3).shuffle().shard(index, count).map(_file)
        ds = chute.IterDataset.interleave(streams, cycle_length=4).map(_document)
        return ds.pack(16, num_packing_bins=4)

    counts = [4, 7, 2, 8, 5, 1, 3, 6, 8, 3, 5]
    run = chute.testing.assert_reshards(make, counts[0], counts[1:], seed=11, records=tokens)
    assert run.records == sum(x % 7 for f in range(400) for x in range(f * 10, f * 10 + 4))
    assert run.largest_state < 1000, run.largest_state  # 470 when measured for the guide.


def test_a_state_that_does_not_name_its_elements_is_refused_with_the_reason():
    olds = [iter(_packed(i, 2)) for i in range(2)]
    next(olds[0])
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    del documents[0]["state"]["reads"]  # As a chute from before `reads` saved it.
    with pytest.raises(ReshardError, match=r"does not name \('reads'\)"):
        reshard(documents, 3)


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        (
            lambda ds: ds.pack(8, method="concat_split"),
            r"stage 5 \(pack\) splits or packs the elements of the interleave of stage 3.*"
            "method='first_fit' or 'best_fit'",
        ),
        (
            lambda ds: ds.window_shuffle(4, seed=0).pack(8),
            r"stage 6 \(pack\) holds the elements of the window_shuffle of stage 5, over the "
            "interleave of stage 3",
        ),
    ],
    ids=["cut_between_rows", "after_a_window_shuffle"],
)
def test_packings_of_its_elements_that_cannot_continue_are_refused_when_built(tail, message):
    streams = chute.MapDataset.range(8).shard(0, 2).map(_file)
    ds = tail(chute.IterDataset.interleave(streams, cycle_length=2).map(_document))
    with pytest.raises(ReshardError, match=message):
        chute.checkpoint.check_reshardable(iter(ds))
