"""A stride slice `ds[i::n]` is a shard stage: Grain's (and MaxText's) way to shard a
`MapDataset` reshards as `.shard(i, n)` does (issue 30)."""

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
import chute.grain as grain
from chute_checkpoint import ReshardError, apply_document, make_document, reshard

COUNTS = st.integers(1, 8)


def _odd(x):
    return x % 2 == 1


@st.composite
def pipelines(draw):
    """`ds[i::n]` with what may come before and after a shard."""
    size = draw(st.integers(0, 40))
    seed = draw(st.integers(0, 5))
    grains = draw(st.booleans())
    before = draw(st.sampled_from(["none", "repeat"]))
    after = draw(st.sampled_from(["none", "filter", "window", "map_repeat"]))
    batch = draw(st.sampled_from([None, 3]))

    def make(index, count):
        if grains:  # MaxText's: shuffle, repeat, then the host's slice.
            ds = grain.MapDataset.range(size).shuffle(seed=seed)
        else:
            ds = chute.MapDataset.range(size).seed(seed).shuffle()
        if before == "repeat":
            ds = ds.repeat(2)
        ds = ds[index::count]
        if after == "map_repeat":
            ds = ds.repeat(2)
        it = ds.to_iter_dataset()
        if after == "filter":
            it = it.filter(_odd)
        elif after == "window":
            it = it.window_shuffle(4, seed=1)
        return it if batch is None else it.batch(batch)

    return make, batch is not None


@settings(max_examples=40, deadline=None)
@given(pipelines(), COUNTS, st.lists(COUNTS, min_size=1, max_size=3), st.integers(0, 2**16))
def test_a_stride_slice_reshards_as_a_shard(pipeline, old, news, seed):
    make, batched = pipeline
    chute.checkpoint.check_reshardable(iter(make(0, old)))
    records = chute.testing.rows if batched else None
    run = chute.testing.assert_reshards(make, old, news, seed=seed, records=records)
    assert run.counts == (old, *news)


def _sliced(index, count):
    return chute.MapDataset.range(20).seed(1).shuffle()[index::count].to_iter_dataset()


def _stopped(make, count, stops):
    olds = [iter(make(i, count)) for i in range(count)]
    seen = [x for it, stop in zip(olds, stops, strict=True) for x in itertools.islice(it, stop)]
    return seen, [make_document(it, i, count) for i, it in enumerate(olds)]


def _continued(make, documents, count):
    rest = []
    for k, document in enumerate(reshard(documents, count)):
        it = iter(make(k, count))
        apply_document(it, json.loads(json.dumps(document)))
        rest += list(it)
    return rest


def test_the_new_hosts_take_slices_of_their_own():
    seen, documents = _stopped(_sliced, 2, [6, 2])
    news = reshard(documents, 3)
    shown = [d["pipeline"]["stages"][3]["params"][""] for d in news]
    assert shown == ["[0::3]", "[1::3]", "[2::3]"]
    assert sorted(seen + _continued(_sliced, documents, 3)) == list(range(20))


def test_documents_do_not_carry_the_stride_which_resharding_reads_from_this_release():
    seen, documents = _stopped(_sliced, 3, [1, 4, 0])
    # As a chute before 2026-11-29 wrote it too: the slice's traits say nothing.
    assert all(document["traits"]["slice"] == {} for document in documents)
    assert sorted(seen + _continued(_sliced, documents, 2)) == list(range(20))


def test_the_same_slice_on_every_host_is_a_subsample_not_a_shard():
    def make(index, count):
        return chute.MapDataset.range(20)[1::2].to_iter_dataset()

    seen, documents = _stopped(make, 2, [3, 3])
    assert seen == [1, 3, 5] * 2  # Every host reads the same records: a global pipeline.
    rest = _continued(make, documents, 3)
    assert rest == [7, 9, 11, 13, 15, 17, 19] * 3


def test_slices_that_are_no_stride_shard_stay_what_they_were():
    def make(index, count):  # A stop: each host's block, which no stride describes.
        return chute.MapDataset.range(20)[index:20:count].to_iter_dataset()

    _, documents = _stopped(make, 2, [1, 1])
    with pytest.raises(ReshardError, match="state 1 is of a different pipeline than state 0"):
        reshard(documents, 3)


def test_what_cannot_follow_a_shard_cannot_follow_a_stride_slice():
    it = iter(chute.MapDataset.range(20)[0::2].shuffle(seed=0).to_iter_dataset())
    with pytest.raises(ReshardError, match=r"^stage 2 \(shuffle\) follows the shard stage"):
        chute.checkpoint.check_reshardable(it)
