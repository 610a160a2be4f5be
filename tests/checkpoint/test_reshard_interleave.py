"""An interleave of the shard's streams reshards: each stream a process left open goes, with
its state, to the new process whose shard holds it, and the ones read are skipped (issue 30).

The pipeline users write for a data set of files: the list of files is sharded by
process, each file read as a stream, a few open at a time
(`IterDataset.interleave(files.shard(i, n).map(open_stream), cycle_length)`).
"""

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import (
    CheckpointFormatError,
    PipelineMismatchError,
    ReshardError,
    apply_document,
    describe_pipeline,
    make_document,
    reshard,
)

COUNTS = st.integers(1, 8)


def _file(number):
    """File `number`'s records: `number * 100 + k` for k below `number % 6` (some empty)."""
    return chute.MapDataset.range(number * 100, number * 100 + number % 6).to_iter_dataset()


def _filtered_file(number):
    return _file(number).filter(_not_threes)


def _not_threes(x):
    return x % 3 != 0


@st.composite
def pipelines(draw):
    """An interleave of a sharded list of files, with the stages that may follow it."""
    files = draw(st.integers(0, 40))
    cycle = draw(st.integers(1, 5))
    shuffled = draw(st.booleans())  # The list of files shuffled before the shard.
    inner_filter = draw(st.booleans())  # A filter inside each file's stream.
    after = draw(st.sampled_from(["none", "map", "filter", "prefetch"]))
    batch = draw(st.sampled_from([None, 1, 3]))

    def make(index, count):
        listing = chute.MapDataset.range(files)
        if shuffled:
            listing = listing.seed(7).shuffle()
        streams = listing.shard(index, count).map(_filtered_file if inner_filter else _file)
        ds = chute.IterDataset.interleave(streams, cycle_length=cycle)
        if after == "map":
            ds = ds.map(_negated)
        elif after == "filter":
            ds = ds.filter(_not_threes)
        elif after == "prefetch":
            ds = ds.prefetch(2)
        return ds if batch is None else ds.batch(batch)

    return make, batch is not None


def _negated(x):
    return -x


@settings(max_examples=80, deadline=None)
@given(pipelines(), COUNTS, st.lists(COUNTS, min_size=1, max_size=3), st.integers(0, 2**16))
def test_every_record_of_every_file_comes_once_on_any_counts(pipeline, old, news, seed):
    make, batched = pipeline
    chute.checkpoint.check_reshardable(iter(make(0, old)))
    records = chute.testing.rows if batched else None
    run = chute.testing.assert_reshards(make, old, news, seed=seed, records=records)
    assert run.counts == (old, *news)


def _files(index, count, cycle=2):
    return chute.IterDataset.interleave(
        chute.MapDataset.range(8).shard(index, count).map(_file), cycle_length=cycle
    )


def test_a_stream_left_open_continues_on_its_new_owner_where_it_stopped():
    olds = [iter(_files(i, 2)) for i in range(2)]
    # Shard 0 reads files 0, 2, 4, 6 (lengths 0, 2, 4, 0); shard 1 files 1, 3, 5, 7.
    head = [*itertools.islice(olds[0], 3), *itertools.islice(olds[1], 2)]
    assert head == [200, 400, 201, 100, 300]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    # Shard 0 opened files 0, 2, 4 (position 3 next): files 2 and 4 are open, after 2
    # and 1 records. Shard 1 has files 1 and 3 open after 1 record each (it has not yet
    # found that file 1 ended).
    assert documents[0]["state"]["next_input"] == 3
    news = reshard(documents, 3)
    states = [d["state"] for d in news]
    # Each open file goes to the shard of 3 that holds it, at its own position there,
    # to be continued before any new file: file 3 to shard 0 (position 1), files 1 and 4
    # to shard 1 (positions 0 and 1), file 2 to shard 2 (position 0).
    assert states[0]["pending"] == [[1, {"position": 1}]]
    assert states[1]["pending"] == [[0, {"position": 1}], [1, {"position": 1}]]
    assert states[2]["pending"] == [[0, {"position": 2}]]
    # Files 0 to 4 were opened, so the new shards start at files 6, 7 and 5, past all
    # of them: no frontier is needed.
    assert [s["next_input"] for s in states] == [2, 2, 1]
    assert not any("frontier" in s for s in states)
    rest = []
    for k, document in enumerate(news):
        it = iter(_files(k, 3))
        apply_document(it, json.loads(json.dumps(document)))
        rest += list(it)
    everything = [x for f in range(8) for x in range(f * 100, f * 100 + f % 6)]
    assert sorted(head + rest) == everything


def test_a_restore_on_the_same_count_is_unchanged():
    it = iter(_files(1, 2))
    head = list(itertools.islice(it, 4))
    document = make_document(it, 1, 2)
    (same,) = [d for d in reshard([make_document(iter(_files(0, 2)), 0, 2), document], 2)][1:]
    fresh = iter(_files(1, 2))
    apply_document(fresh, same)
    assert head + list(fresh) == list(_files(1, 2))


def test_a_state_stays_small_after_many_reshards():
    def make(index, count):
        listing = chute.MapDataset.range(3000).shard(index, count).map(_file)
        return chute.IterDataset.interleave(listing, cycle_length=4)

    counts = [3, 8, 1, 5, 2, 7, 4, 6, 1, 8]
    run = chute.testing.assert_reshards(make, 4, counts, seed=3)
    # The open streams of each old process (4 at most) and a level per reshard whose
    # stops overlap, never the list of files read: a few hundred bytes.
    assert run.largest_state < 1500, run.largest_state


@pytest.mark.parametrize(
    ("stage", "op"),
    [
        (lambda ds: ds.window_shuffle(4, seed=0), "window_shuffle"),
        (lambda ds: ds.flat_map(lambda x: [x, x]), "flat_map"),
        (lambda ds: ds.pack(4, method="first_fit"), "pack"),
    ],
)
def test_stages_that_hold_or_split_its_elements_are_refused_when_built(stage, op):
    it = iter(stage(_files(0, 2)))
    with pytest.raises(
        ReshardError, match=rf"\({op}\) holds or splits the elements of the interleave"
    ):
        chute.checkpoint.check_reshardable(it)


def test_a_damaged_pending_stream_is_named():
    olds = [iter(_files(i, 2)) for i in range(2)]
    _ = [next(olds[0]), next(olds[1])]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    documents[0]["state"]["slots"][1]["state"] = "not a state"  # File 2, its position 1.
    with pytest.raises(ReshardError, match="shard 0: the state of open stream 1 must be a dict"):
        reshard(documents, 3)


def test_a_pending_entry_of_the_wrong_shape_is_refused_on_restore():
    olds = [iter(_files(i, 2)) for i in range(2)]
    _ = [next(olds[0]), next(olds[1]), next(olds[1])]
    news = reshard([make_document(it, i, 2) for i, it in enumerate(olds)], 3)
    (document,) = [d for d in news if "pending" in d["state"]][:1]
    document["state"]["pending"] = [[1]]
    with pytest.raises(CheckpointFormatError, match=r"a pending stream is \[input, state\]"):
        apply_document(iter(_files(document["process_index"], 3)), document, check_pipeline=False)


def test_an_interleave_over_a_list_keeps_its_inputs_in_the_description():
    listed = chute.IterDataset.interleave([_file(1), _file(2)], cycle_length=2)
    from_map = chute.IterDataset.interleave(chute.MapDataset.range(1, 3).map(_file), 2)
    listed_stages = describe_pipeline(iter(listed))["stages"]
    assert [s["op"] for s in listed_stages] == ["interleave"]
    assert len(listed_stages[0]["inputs"]) == 2
    stages = describe_pipeline(iter(from_map))["stages"]
    assert [s["op"] for s in stages] == ["source", "map", "interleave"]
    assert "inputs" not in stages[-1]
    assert list(listed) == list(from_map)


def test_a_checkpoint_of_another_file_list_is_a_mismatch():
    it = iter(_files(0, 1))
    next(it)
    document = make_document(it)
    files = chute.MapDataset.range(9).shard(0, 1).map(_file)
    other = chute.IterDataset.interleave(files, cycle_length=2)
    with pytest.raises(PipelineMismatchError, match="the checkpoint has 8, this pipeline has 9"):
        apply_document(iter(other), document)


def test_a_checkpoint_that_lists_the_inputs_says_how_to_restore_it():
    # Before this release, an interleave over a MapDataset listed its inputs' stages, as
    # one over a list still does; the state is the same.
    older = chute.IterDataset.interleave([_file(f) for f in range(8)], cycle_length=2)
    it = iter(older)
    head = list(itertools.islice(it, 5))
    document = make_document(it)
    now = chute.IterDataset.interleave(chute.MapDataset.range(8).map(_file), cycle_length=2)
    with pytest.raises(PipelineMismatchError, match="pass check_pipeline=False to restore it"):
        apply_document(iter(now), document)
    resumed = iter(now)
    apply_document(resumed, document, check_pipeline=False)
    assert head + list(resumed) == list(now)


def _web(index, count):
    return chute.MapDataset.range(5000, 5060).shard(index, count).to_iter_dataset()


@settings(max_examples=25, deadline=None)
@given(COUNTS, st.lists(COUNTS, min_size=1, max_size=2), st.integers(0, 2**16))
def test_a_mixture_with_an_interleave_of_files_reshards_per_component(old, news, seed):
    def make(index, count):
        files = chute.IterDataset.interleave(
            chute.MapDataset.range(30).shard(index, count).map(_file), cycle_length=3
        )
        return chute.IterDataset.mix([files, _web(index, count)], [2, 1])

    chute.checkpoint.check_reshardable(iter(make(0, old)))
    run = chute.testing.assert_reshards(make, old, news, seed=seed, complete=False)
    assert run.counts == (old, *news)


@settings(max_examples=20, deadline=None)
@given(COUNTS, COUNTS, st.integers(0, 2**16))
def test_grains_spelling_of_an_interleave_of_sharded_files_reshards(old, new, seed):
    import chute.grain as grain

    def make(index, count):
        files = grain.MapDataset.range(20).shard(index, count).map(_file)
        return grain.experimental.InterleaveIterDataset(files, cycle_length=2)

    run = chute.testing.assert_reshards(make, old, new, seed=seed)
    assert run.counts == (old, new)
