"""A window shuffle after the shard reshards: the window a process stopped inside goes back
to be read, and the elements it already yielded are skipped by their new owners (issue 30)."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import (
    CheckpointFormatError,
    ReshardError,
    apply_document,
    make_document,
    reshard,
)
from chute_core import InvalidStateError
from chute_samplers.internal import Frontier

COUNTS = st.integers(1, 8)


def _kept(x):
    return x % 5 != 2


def _pair(x):
    return [(x, k) for k in range(x % 3)]


@st.composite
def pipelines(draw):
    """A window shuffle after the shard, with filters, workers, a flat map and a batch."""
    size = draw(st.integers(0, 60))
    seed = draw(st.integers(0, 5))
    window = draw(st.integers(1, 9))
    before = draw(st.booleans())  # A filter between the reader and the window shuffle.
    workers = draw(st.sampled_from([None, 0, 1]))  # mp_prefetch before the window shuffle.
    chunk = draw(st.integers(1, 5))
    flat = draw(st.booleans())  # A flat map of the window shuffle's elements.
    batch = draw(st.sampled_from([None, 1, 3]))

    def make(index, count):
        ds = chute.MapDataset.range(size).seed(seed).shuffle().shard(index, count)
        it = ds.to_iter_dataset()
        if before:
            it = it.filter(_kept)
        if workers is not None:
            options = chute.MultiprocessingOptions(num_workers=workers)
            it = it.mp_prefetch(options, chunk_size=chunk)
        it = it.window_shuffle(window, seed=seed + 1)
        if flat:
            it = it.flat_map(_pair)
        return it if batch is None else it.batch(batch)

    return make, batch is not None


@settings(max_examples=60, deadline=None)
@given(pipelines(), COUNTS, st.lists(COUNTS, min_size=1, max_size=3), st.integers(0, 2**16))
def test_every_element_comes_once_on_any_counts(pipeline, old, news, seed):
    make, batched = pipeline
    chute.checkpoint.check_reshardable(iter(make(0, old)))
    records = chute.testing.rows if batched else None
    run = chute.testing.assert_reshards(make, old, news, seed=seed, records=records)
    assert run.counts == (old, *news)


def _pipeline(index, count):
    ds = chute.MapDataset.range(24).shard(index, count).to_iter_dataset()
    return ds.window_shuffle(4, seed=3)


def test_a_window_stopped_inside_goes_back_without_what_it_yielded():
    olds = [iter(_pipeline(i, 2)) for i in range(2)]
    # Process 0 stops after 2 of its first window (globals 0, 2, 4, 6), process 1 after 5.
    head = [*itertools.islice(olds[0], 2), *itertools.islice(olds[1], 5)]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    assert documents[0]["state"]["span"] == [0, 4]
    new = reshard(documents, 3)
    # Shard 0 goes back to its window's start (global 0), shard 1 to its second window's
    # (global 9); the 3 elements they yielded past them are skipped where they fall.
    taken = [Frontier.from_json(d["state"]["window_start"]["frontier"], "test").taken for d in new]
    assert sorted(itertools.chain(*taken)) == sorted(head[:2] + head[-1:])
    assert all(g % 3 == k for k, shard in enumerate(taken) for g in shard)
    news = [iter(_pipeline(k, 3)) for k in range(3)]
    for it, document in zip(news, new, strict=True):
        apply_document(it, document)
    rest = [x for it in news for x in it]
    assert sorted([*head, *rest]) == list(range(24))


def test_the_new_order_is_a_function_of_the_saved_states():
    olds = [iter(_pipeline(i, 3)) for i in range(3)]
    for it, stop in zip(olds, (1, 6, 3), strict=True):
        list(itertools.islice(it, stop))
    documents = [make_document(it, i, 3) for i, it in enumerate(olds)]

    def continued():
        out = []
        for k, document in enumerate(reshard(documents, 2)):
            it = iter(_pipeline(k, 2))
            apply_document(it, document)
            out.append(list(it))
        return out

    assert continued() == continued()


def test_taken_positions_stay_few_over_ten_reshards():
    def make(index, count):
        ds = chute.MapDataset.range(3000).seed(1).shuffle().shard(index, count)
        return ds.to_iter_dataset().window_shuffle(16, seed=2)

    counts = [4, 7, 2, 8, 5, 1, 3, 6, 8, 3, 5]
    run = chute.testing.assert_reshards(make, counts[0], counts[1:], seed=11)
    assert run.records == 3000
    # Each process yields at most 15 of its window ahead of its start: at most 8 * 15
    # taken positions, spread over the new processes, plus the levels and the span.
    assert run.largest_state < 1600, run.largest_state


@pytest.mark.parametrize(
    ("tail", "stage", "reason"),
    [
        (
            lambda ds: ds.window_shuffle(3, seed=0).mp_prefetch(
                chute.MultiprocessingOptions(num_workers=0)
            ),
            "stage 4 (mp_prefetch) runs the window_shuffle of stage 3 in its workers",
            "apply the window_shuffle after mp_prefetch(...)",
        ),
        (
            lambda ds: ds.window_shuffle(3, seed=0).window_shuffle(2, seed=1),
            "stage 4 (window_shuffle) follows the shard stage",
            "put it before .shard(...)",
        ),
        (
            lambda ds: ds.flat_map(_pair).window_shuffle(3, seed=0),
            "stage 4 (window_shuffle) follows the shard stage",
            "put it before .shard(...)",
        ),
        (
            lambda ds: ds.batch(2).window_shuffle(3, seed=0),
            "stage 4 (window_shuffle) follows the shard stage",
            "put it before .shard(...)",
        ),
        (  # The failures of held elements would count again when they are read again.
            lambda ds: ds.window_shuffle(3, seed=0).skip_errors(5),
            "stage 4 (skip_errors) counts the failures of elements that the window_shuffle",
            "put it before window_shuffle(...)",
        ),
    ],
    ids=["inside_workers", "two_window_shuffles", "after_a_flat_map", "of_batches", "budget"],
)
def test_window_shuffles_that_cannot_continue_elsewhere_are_refused_when_built(
    tail, stage, reason, refused_alike
):
    message = refused_alike(
        lambda i, n: tail(chute.MapDataset.range(9).shard(i, n).to_iter_dataset())
    )
    assert message.startswith(stage) and reason in message


def test_a_state_saved_inside_a_window_without_its_span_is_refused_with_the_reason():
    olds = [iter(_pipeline(i, 2)) for i in range(2)]
    next(olds[0])
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    del documents[0]["state"]["span"]  # As a chute from before `span` saved it.
    with pytest.raises(ReshardError, match="whose positions its state does not name"):
        reshard(documents, 3)
    # Restoring it on the same count still works: the span is for resharding only.
    it = iter(_pipeline(0, 2))
    apply_document(it, documents[0])
    assert len(list(it)) == 11


@pytest.mark.parametrize(
    ("span", "message"),
    [
        ([0, 5], r"count <= 4,"),  # More positions than the window holds.
        ([0, 4, "not base64!"], r"state\['span'\] is"),
        ([0, 3, "Dw=="], r"state\['span'\] is"),  # 4 bits set, 3 named.
        (["0", 4], r"state\['span'\] is"),
    ],
)
def test_damaged_spans_are_refused(span, message):
    olds = [iter(_pipeline(i, 2)) for i in range(2)]
    next(olds[0])
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    documents[0]["state"]["span"] = span
    with pytest.raises(ReshardError, match=message):
        reshard(documents, 3)


def test_a_span_that_does_not_match_the_window_read_again_is_refused_on_restore():
    it = iter(_pipeline(0, 1))
    next(it)
    state = it.get_state()
    state["span"] = [1, 4]
    fresh = iter(_pipeline(0, 1))
    fresh.set_state(state)
    with pytest.raises(InvalidStateError, match="reading it again gave"):
        next(fresh)


@pytest.mark.parametrize(
    "taken",
    [[[5, 1], [3, 1]], [[0, 2, "!!"]], [[-2, 1]], [[0, 2, "Bw=="]], "2", [], [[0, 1 << 40]]],
)
def test_damaged_taken_lists_are_refused(taken):
    olds = [iter(_pipeline(i, 2)) for i in range(2)]
    next(olds[0])
    new = reshard([make_document(it, i, 2) for i, it in enumerate(olds)], 2)
    frontier = new[0]["state"]["window_start"]["frontier"]
    assert frontier["taken"][0][1] == 1  # The element process 0 yielded: one run of 1.
    frontier["taken"] = taken
    it = iter(_pipeline(0, 2))
    with pytest.raises(CheckpointFormatError, match="the frontier's taken positions"):
        apply_document(it, new[0])


def test_window_shuffles_inside_a_mixture_reshard_per_component():
    """Each component of a mixture of sharded streams holds its own window."""

    def make(index, count):
        web = chute.MapDataset.range(0, 80).shard(index, count).to_iter_dataset()
        code = chute.MapDataset.range(1000, 1090).shard(index, count).to_iter_dataset()
        code = code.filter(_kept).window_shuffle(5, seed=4)
        return chute.IterDataset.mix([web.window_shuffle(7, seed=3), code], [2, 1])

    chute.checkpoint.check_reshardable(iter(make(0, 3)))
    for seed in range(4):
        run = chute.testing.assert_reshards(make, 3, [2, 5], seed=seed, complete=False)
        assert run.records > 0


def test_a_span_naming_more_positions_than_the_window_is_refused_before_any_is_made():
    it = iter(_pipeline(0, 1))
    next(it)
    state = it.get_state()
    state["span"] = [0, 1 << 40]  # Would be terabytes of positions if made.
    with pytest.raises(InvalidStateError, match=r"count <= 4,"):
        iter(_pipeline(0, 1)).set_state(state)
