"""A flat map after the shard reshards: the element a process stopped inside goes to its
new owner, which drops the outputs already delivered (issue 30)."""

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import ReshardError, apply_document, make_document, reshard

COUNTS = st.integers(1, 8)


def _fan(x):
    """0 to 3 outputs per record, each a distinct (record, k) pair."""
    return [(x, k) for k in range(x % 4)]


def _kept(x):
    return x % 5 != 2


def _flat_pair(pair):
    return pair[0] * 10 + pair[1]


@st.composite
def pipelines(draw):
    """A stream flat map after the shard, with filters, workers and a batch around it."""
    size = draw(st.integers(0, 60))
    seed = draw(st.integers(0, 5))
    before = draw(st.booleans())  # A filter between the reader and the flat map.
    workers = draw(st.sampled_from([None, 0, 1]))  # mp_prefetch before the flat map...
    inside = draw(st.booleans())  # ... or after it: the flat map runs in the workers.
    chunk = draw(st.integers(1, 5))
    after = draw(st.booleans())  # A filter of the flat map's outputs.
    batch = draw(st.sampled_from([None, 1, 3]))

    def make(index, count):
        ds = chute.MapDataset.range(size).seed(seed).shuffle().shard(index, count)
        it = ds.to_iter_dataset()
        if before:
            it = it.filter(_kept)
        options = None if workers is None else chute.MultiprocessingOptions(num_workers=workers)
        if options is not None and not inside:
            it = it.mp_prefetch(options, chunk_size=chunk)
        it = it.flat_map(_fan)
        if after:
            it = it.map(_flat_pair).filter(_kept)
        if options is not None and inside:  # A batch after it is stacked by the workers.
            it = it.mp_prefetch(options, chunk_size=chunk)
        return it if batch is None else it.batch(batch)

    return make, batch is not None


@settings(max_examples=60, deadline=None)
@given(pipelines(), COUNTS, st.lists(COUNTS, min_size=1, max_size=3), st.integers(0, 2**16))
def test_every_output_comes_once_on_any_counts(pipeline, old, news, seed):
    make, batched = pipeline
    chute.checkpoint.check_reshardable(iter(make(0, old)))
    records = chute.testing.rows if batched else None
    run = chute.testing.assert_reshards(make, old, news, seed=seed, records=records)
    assert run.counts == (old, *news)


def _pipeline(index, count):
    ds = chute.MapDataset.range(24).shard(index, count).to_iter_dataset()
    return ds.flat_map(lambda x: [(x, k) for k in range(3)])


def test_the_element_a_process_stopped_inside_continues_on_its_new_owner():
    olds = [iter(_pipeline(i, 2)) for i in range(2)]
    # Process 0 takes (0, *), (2, *) and two outputs of 4; process 1 one output of 1.
    head = [*itertools.islice(olds[0], 8), next(olds[1])]
    assert head[-3:] == [(4, 0), (4, 1), (1, 0)]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    assert documents[0]["state"]["offset"] == 2 and documents[0]["state"]["at"] == 2
    new = reshard(documents, 3)
    # Global 4 is position 1 of shard 1 of 3, global 1 position 0 of shard 1 too.
    assert new[1]["state"]["skip"] == [[0, 1], [1, 2]]
    assert "skip" not in new[0]["state"] and "skip" not in new[2]["state"]
    news = [iter(_pipeline(k, 3)) for k in range(3)]
    for it, document in zip(news, new, strict=True):
        apply_document(it, document)
    assert list(itertools.islice(news[1], 3)) == [(1, 1), (1, 2), (4, 2)]
    rest = [x for it in news for x in it]
    everything = [(x, k) for x in range(24) for k in range(3)]
    assert sorted([*head, (1, 1), (1, 2), (4, 2), *rest]) == everything


def test_skip_entries_stay_few_over_ten_reshards():
    def make(index, count):
        ds = chute.MapDataset.range(3000).seed(1).shuffle().shard(index, count)
        return ds.to_iter_dataset().flat_map(lambda x: [x] * 5)

    counts = [4, 7, 2, 8, 5, 1, 3, 6, 8, 3, 5]
    run = chute.testing.assert_reshards(make, counts[0], counts[1:], seed=11)
    assert run.records == 15000
    assert run.largest_state < 600, run.largest_state


@pytest.mark.parametrize(
    ("make", "stage", "reason"),
    [
        (
            lambda i, n: (
                chute.MapDataset.range(9)
                .shard(i, n)
                .to_iter_dataset()
                .flat_map(_fan)
                .batch(2)
                .mp_prefetch(chute.MultiprocessingOptions(num_workers=0))
            ),
            "stage 5 (mp_prefetch) runs the batch of stage 4 in its workers, over the outputs "
            "of the flat_map of stage 3",
            "apply the batch after mp_prefetch(...) (the workers still build the batches)",
        ),
        (
            lambda i, n: (
                chute.MapDataset.range(9)
                .shard(i, n)
                .to_iter_dataset()
                .flat_map(_fan)
                .flat_map(list)
            ),
            "stage 4 (flat_map) follows the shard stage",
            "put it before .shard(...)",
        ),
        (
            lambda i, n: (
                chute.MapDataset.range(9).shard(i, n).to_iter_dataset().batch(2).flat_map(list)
            ),
            "stage 4 (flat_map) follows the shard stage",
            "put it before .shard(...)",
        ),
    ],
    ids=["batched_inside_workers", "two_flat_maps", "of_batches"],
)
def test_flat_maps_that_cannot_continue_elsewhere_are_refused_when_built(
    make, stage, reason, refused_alike
):
    message = refused_alike(make)
    assert message.startswith(stage) and reason in message


def test_a_state_saved_inside_an_element_without_its_position_is_refused_with_the_reason():
    olds = [iter(_pipeline(i, 2)) for i in range(2)]
    next(olds[0])
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    del documents[0]["state"]["at"]  # As a chute from before `at` saved it.
    with pytest.raises(ReshardError, match="whose position its state does not name"):
        reshard(documents, 3)


def test_the_resharded_state_restores_in_a_fresh_process_form():
    """A resharded state is plain JSON: it round-trips and restores the same outputs."""
    olds = [iter(_pipeline(i, 2)) for i in range(2)]
    next(olds[0])
    new = reshard([make_document(it, i, 2) for i, it in enumerate(olds)], 1)
    document = json.loads(json.dumps(new[0]))
    it = iter(_pipeline(0, 1))
    apply_document(it, document)
    assert next(it) == (0, 1)


def _in_workers(index, count, workers=1, batch=None):
    ds = chute.MapDataset.range(24).shard(index, count).to_iter_dataset()
    ds = ds.flat_map(lambda x: [(x, k) for k in range(3)])
    ds = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=2)
    return ds if batch is None else ds.batch(batch)


@pytest.mark.parametrize("workers", [0, 1])
def test_an_element_the_workers_split_continues_on_its_new_owner(workers):
    """The workers' state names the element it stopped inside; its new owner's workers
    leave out the outputs delivered before."""
    olds = [iter(_in_workers(i, 2, workers)) for i in range(2)]
    head = [*itertools.islice(olds[0], 8), next(olds[1])]
    assert head[-3:] == [(4, 0), (4, 1), (1, 0)]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    # Local 2 of shard 0 is unit 1's second position: outputs 0 and 1 of it delivered.
    assert documents[0]["state"] == {"position": 2, "offset": 2, "through": 2, "at": [2, 2]}
    assert documents[1]["state"] == {"position": 0, "offset": 1, "through": 0, "at": [0, 1]}
    new = reshard(documents, 3)
    assert new[1]["state"]["skip"] == [[0, 1], [1, 2]]  # Globals 1 and 4, of shard 1 of 3.
    news = [iter(_in_workers(k, 3, workers)) for k in range(3)]
    for it, document in zip(news, new, strict=True):
        apply_document(it, document)
    first = list(itertools.islice(news[1], 3))
    assert first == [(1, 1), (1, 2), (4, 2)]
    # The unit of both elements is done: its skip entries are gone from the state.
    assert {k: v for k, v in news[1].get_state().items() if k != "frontier"} == {
        "position": 2,
        "offset": 0,
    }
    rest = [x for it in news for x in it]
    everything = [(x, k) for x in range(24) for k in range(3)]
    assert sorted([*head, *first, *rest]) == everything


def test_a_resharded_state_of_split_elements_restores_in_the_same_process_exactly():
    olds = [iter(_in_workers(i, 2, 0)) for i in range(2)]
    _ = [*itertools.islice(olds[0], 8), next(olds[1])]
    new = reshard([make_document(it, i, 2) for i, it in enumerate(olds)], 3)

    def make():
        it = iter(_in_workers(1, 3, 0))
        apply_document(it, json.loads(json.dumps(new[1])))
        return it

    expected = list(make())
    assert expected[:3] == [(1, 1), (1, 2), (4, 2)]
    chute.testing.assert_resumes(make, expected=expected)


@pytest.mark.parametrize("workers", [0, 1])
def test_a_batch_the_workers_stack_after_a_flat_map_reshards_its_records(workers):
    def make(index, count):
        return _in_workers(index, count, workers, batch=4)

    run = chute.testing.assert_reshards(make, 3, [2, 5], seed=3, records=chute.testing.rows)
    assert run.records == 72


def test_a_checkpoint_whose_workers_did_not_name_split_elements_is_refused_with_the_reason():
    """Older chutes saved such states with `through` past the element a process stopped
    inside: resharding them would lose its other outputs."""
    olds = [iter(_in_workers(i, 2, 0)) for i in range(2)]
    _ = [*itertools.islice(olds[0], 4), next(olds[1])]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    for document in documents:  # As the chute before this release wrote them.
        document["traits"]["mp_prefetch"].pop("names_splits")
    with pytest.raises(ReshardError) as caught:
        reshard(documents, 3)
    assert str(caught.value).startswith(
        "stage 4 (mp_prefetch) runs the flat_map of stage 3 in its workers"
    )
    assert "(The checkpoint records what mp_prefetch did in the chute that saved it" in str(
        caught.value
    )


def test_a_state_saved_again_right_after_a_restore_still_reshards():
    """Preempted again before the first step: the state keeps what the restored one said
    of the element it stopped inside."""
    olds = [iter(_in_workers(i, 2, 0)) for i in range(2)]
    head = [*itertools.islice(olds[0], 4), next(olds[1])]
    again = []
    for i, it in enumerate(olds):
        restored = iter(_in_workers(i, 2, 0))
        apply_document(restored, json.loads(json.dumps(make_document(it, i, 2))))
        again.append(make_document(restored, i, 2))
    assert again[0]["state"] == {"position": 0, "offset": 4, "through": 1, "at": [1, 1]}
    news = [iter(_in_workers(k, 3, 0)) for k in range(3)]
    for it, document in zip(news, reshard(again, 3), strict=True):
        apply_document(it, document)
    rest = [x for it in news for x in it]
    assert sorted([*head, *rest]) == [(x, k) for x in range(24) for k in range(3)]


def _fails_on_seven(x):
    if x == 7:
        raise ValueError("record 7 is damaged")
    return [x * 10 + k for k in range(3)]


@pytest.mark.parametrize("workers", [0, 1])
def test_a_failing_unit_of_stacked_batches_after_a_reshard_leaves_out_what_was_delivered(
    workers,
):
    """The outputs before the failure are computed again through the resharded state."""

    def make(index, count):
        ds = chute.MapDataset.range(12).shard(index, count).to_iter_dataset()
        ds = ds.flat_map(_fails_on_seven)
        options = chute.MultiprocessingOptions(num_workers=workers)
        return ds.mp_prefetch(options, chunk_size=8).batch(2)

    olds = [iter(make(i, 2)) for i in range(2)]
    assert next(olds[0]).tolist() == [0, 1]
    new = reshard([make_document(it, i, 2) for i, it in enumerate(olds)], 1)
    it = iter(make(0, 1))
    apply_document(it, new[0])
    got = []
    with pytest.raises(ValueError, match="record 7 is damaged"):
        got.extend(b.tolist() for b in it)
    outputs = [2] + [x * 10 + k for x in range(1, 7) for k in range(3)]  # 0, 1 delivered.
    assert [x for batch in got for x in batch] == outputs[:-1]  # The failing batch is lost.
