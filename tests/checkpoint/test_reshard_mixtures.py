"""Resharding a mixture of sharded streams: every component on its own, exactly once.

`IterDataset.mix` of streams that are each sharded by process (one per domain, as
language-model mixtures are built): the states of `n` processes, each stopped at its own
point, continue on `m`. A mixture stops when the component whose turn it is runs out, so
where it ends depends on the processes; what must hold is that no record of any
component comes twice, and that none consumed before a stop is read again.
"""

import collections
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import apply_document, make_document, reshard

COUNTS = st.integers(1, 8)


def _not_threes(x):
    return x % 3 != 0


def _domains(index, count, workers=None):
    web = chute.MapDataset.range(0, 90).seed(1).shuffle().shard(index, count).to_iter_dataset()
    code = chute.MapDataset.range(1000, 1120).seed(2).shuffle().shard(index, count)
    code = code.to_iter_dataset().filter(_not_threes)
    if workers is not None:
        code = code.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=5)
    books = chute.MapDataset.range(2000, 2060).shard(index, count).to_iter_dataset()
    return [web, code, books]


def _mixture(weights, workers=None):
    def make(index, count):
        return chute.IterDataset.mix(_domains(index, count, workers), weights).batch(4)

    return make


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(1, 6), min_size=3, max_size=3),
    COUNTS,
    st.lists(COUNTS, min_size=1, max_size=3),
    st.integers(0, 2**16),
)
def test_no_record_of_any_component_comes_twice_on_any_counts(weights, old, news, seed):
    make = _mixture(weights)
    chute.checkpoint.check_reshardable(iter(make(0, old)))
    run = chute.testing.assert_reshards(
        make, old, news, seed=seed, records=chute.testing.rows, complete=False
    )
    assert run.counts == (old, *news)


@pytest.mark.parametrize("workers", [None, 0])
def test_uneven_states_reshard_each_component_and_the_mixture_position(workers):
    make = _mixture([1, 2, 1], workers)
    olds = [iter(make(i, 3)) for i in range(3)]
    head = []
    for it, stop in zip(olds, [1, 6, 3], strict=True):
        head += [x for _ in range(stop) for x in next(it).tolist()]
    documents = [json.loads(json.dumps(make_document(it, i, 3))) for i, it in enumerate(olds)]
    positions = [d["state"]["parent"]["position"] for d in documents]
    news = reshard(documents, 2)
    # The mixture's position continues from the processes' total, split over the new ones.
    assert [d["state"]["parent"]["position"] for d in news] == [sum(positions) // 2] * 2
    rest = []
    for k, document in enumerate(news):
        it = iter(make(k, 2))
        apply_document(it, document)
        rest += [x for batch in it for x in batch.tolist()]
    counts = collections.Counter(head + rest)
    assert [x for x, n in counts.items() if n > 1] == []
    # Each component: what was consumed before the stop is still there, once.
    for low in (0, 1000, 2000):
        component = {x for x in head + rest if low <= x < low + 1000}
        before = {x for x in head if low <= x < low + 1000}
        assert before <= component


def test_a_weight_schedule_stays_at_the_step_the_run_reached():
    schedule = chute.WeightSchedule([(0, [1, 1, 1]), (9, [1, 6, 1])])

    def make(index, count):
        return chute.IterDataset.mix(_domains(index, count), schedule)

    olds = [iter(make(i, 2)) for i in range(2)]
    for it in olds:
        for _ in range(12):  # Both past step 9: weights 1:6:1.
            next(it)
    (document,) = reshard([make_document(it, i, 2) for i, it in enumerate(olds)], 1)
    assert document["state"]["position"] == 24
    it = iter(make(0, 1))
    apply_document(it, document)
    following = [next(it) for _ in range(16)]
    assert [sum(low <= x < low + 1000 for x in following) for low in (0, 1000, 2000)] == [2, 12, 2]


def test_a_stage_after_the_mixture_that_reorders_is_refused_at_build_and_restore(refused_alike):
    def make(index, count):
        return chute.IterDataset.mix(_domains(index, count)).window_shuffle(4, seed=0)

    assert refused_alike(make) == (
        "stage 1 (window_shuffle) follows the mixture of sharded streams and changes which "
        "element of the mixture an output is (or keeps elements across steps), so the "
        "components cannot be resharded under it; restore with the same process count."
    )


def test_restore_reshards_a_mixture_saved_by_another_process_count(tmp_path):
    make = _mixture([2, 1, 1])
    olds = [iter(make(i, 4)) for i in range(4)]
    head = []
    for index, (it, stop) in enumerate(zip(olds, [2, 0, 5, 1], strict=True)):
        head += [x for _ in range(stop) for x in next(it).tolist()]
        chute.checkpoint.save(it, tmp_path, process_index=index, process_count=4)
    rest = []
    for k in range(3):
        it = chute.checkpoint.restore(iter(make(k, 3)), tmp_path, process_index=k, process_count=3)
        rest += [x for batch in it for x in batch.tolist()]
    counts = collections.Counter(head + rest)
    assert max(counts.values()) == 1 and len(counts) > 150
