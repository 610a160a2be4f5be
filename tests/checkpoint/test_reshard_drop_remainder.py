"""Resharding shards that drop a remainder: another count drops another one, so a start
may lie past a shorter shard's end; what was consumed stays consumed."""

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import apply_document, make_document, reshard

COUNTS = st.integers(1, 8)


@pytest.mark.parametrize("workers", [None, 0])
def test_shards_that_drop_a_remainder_continue_on_a_count_that_drops_another(workers):
    """23 records: 3 shards cover 21 of them, 2 shards 22, 4 shards 20."""

    def make(index, count):
        ds = chute.MapDataset.range(23).seed(4).shuffle().shard(index, count, drop_remainder=True)
        it = ds.to_iter_dataset()
        if workers is None:
            return it
        return it.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=3)

    order = list(chute.MapDataset.range(23).seed(4).shuffle())
    for stops, new, covered in [([2, 7, 5], 2, 22), ([7, 7, 7], 4, 20), ([7, 7, 7], 2, 22)]:
        olds = [iter(make(i, 3)) for i in range(3)]
        head = [x for it, stop in zip(olds, stops, strict=True) for x in itertools.islice(it, stop)]
        documents = [make_document(it, i, 3) for i, it in enumerate(olds)]
        news = [iter(make(k, new)) for k in range(new)]
        for it, document in zip(news, reshard(documents, new), strict=True):
            apply_document(it, document)  # A start past a shorter shard's end: it ends there.
        seen = head + [x for it in news for x in it]
        assert len(seen) == len(set(seen))  # Nothing repeated.
        # What both counts cover comes once; what only the old one covered, if read.
        assert set(order[: min(21, covered)]) <= set(seen) <= set(order[: max(21, covered)])


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 40),
    COUNTS,
    st.lists(COUNTS, min_size=2, max_size=4),
    st.integers(0, 2**16),
)
def test_shards_that_drop_a_remainder_repeat_nothing_across_several_reshards(size, old, news, seed):
    # A start clamped to a shorter shard's end keeps the watermark as a level: without
    # it, 13 records on 2 -> 1 -> 5 -> 6 processes read records 10 and 11 twice.
    def make(index, count):
        return (
            chute.MapDataset.range(size).shard(index, count, drop_remainder=True).to_iter_dataset()
        )

    chute.testing.assert_reshards(make, old, news, seed=seed, complete=False)


def test_a_start_past_a_shorter_shard_keeps_what_was_consumed():
    def make(index, count):
        return chute.MapDataset.range(13).shard(index, count, drop_remainder=True).to_iter_dataset()

    seen = []
    olds = [iter(make(i, 2)) for i in range(2)]
    for it in olds:
        seen += itertools.islice(it, 4)
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    for count, stops in [(1, [5]), (5, [0, 0, 0, 5, 1]), (6, None)]:
        news = [iter(make(k, count)) for k in range(count)]
        for it, document in zip(news, reshard(documents, count), strict=True):
            apply_document(it, json.loads(json.dumps(document)))
        for it, stop in zip(news, stops or [None] * count, strict=True):
            seen += itertools.islice(it, stop)
        documents = [make_document(it, k, count) for k, it in enumerate(news)]
    assert sorted(seen) == list(range(13))  # The 1-process run read 8 to 12; none twice.
