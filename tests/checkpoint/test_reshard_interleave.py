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
from chute_testing import ListIterator

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
    some = draw(st.booleans())  # The list of files filtered before the shard.
    inner_filter = draw(st.booleans())  # A filter inside each file's stream.
    after = draw(st.sampled_from(["none", "map", "filter", "prefetch"]))
    window = draw(st.sampled_from([None, None, 1, 2, 7]))  # A window shuffle: hierarchical.
    batch = draw(st.sampled_from([None, 1, 3]))

    def make(index, count):
        listing = chute.MapDataset.range(files)
        if shuffled:
            listing = listing.seed(7).shuffle()
        if some:  # Positions whose file is dropped have no stream; they keep their numbers.
            listing = listing.filter(_not_threes)
        streams = listing.shard(index, count).map(_filtered_file if inner_filter else _file)
        ds = chute.IterDataset.interleave(streams, cycle_length=cycle)
        if after == "map":
            ds = ds.map(_negated)
        elif after == "filter":
            ds = ds.filter(_not_threes)
        elif after == "prefetch":
            ds = ds.prefetch(2)
        if window is not None:
            ds = ds.window_shuffle(window, seed=5)
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


_EIGHT_FILES = [x for f in range(8) for x in range(f * 100, f * 100 + f % 6)]


def _run_out(make, documents):
    """What the processes of `documents` read to the end (their states through JSON)."""
    rest = []
    for k, document in enumerate(documents):
        it = iter(make(k, len(documents)))
        apply_document(it, json.loads(json.dumps(document)))
        rest += list(it)
    return rest


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
    assert sorted(head + _run_out(_files, news)) == _EIGHT_FILES


@pytest.mark.parametrize("stop", range(7))
def test_a_reshard_to_the_same_count_keeps_each_state(stop):
    it = iter(_files(1, 2))
    head = list(itertools.islice(it, stop))
    document = make_document(it, 1, 2)
    (same,) = [d for d in reshard([make_document(iter(_files(0, 2)), 0, 2), document], 2)][1:]
    assert same["state"] == document["state"]
    fresh = iter(_files(1, 2))
    apply_document(fresh, same)
    assert head + list(fresh) == list(_files(1, 2))


def test_a_state_stays_small_after_many_reshards():
    def make(index, count):
        listing = chute.MapDataset.range(3000).shard(index, count).map(_file)
        return chute.IterDataset.interleave(listing, cycle_length=4)

    counts = [3, 8, 1, 5, 2, 7, 4, 6, 1, 8]
    largest = max(
        chute.testing.assert_reshards(make, 4, counts, seed=seed).largest_state for seed in range(3)
    )
    # The open streams (4 per process at most, 8 processes) and a level per reshard
    # whose stops overlap, never the list of files read: a few hundred bytes (308 when
    # measured for the guide).
    assert largest < 1500, largest


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


def test_only_an_interleave_of_a_sharded_map_dataset_is_described_by_its_stages():
    listed = chute.IterDataset.interleave([_file(1), _file(2)], cycle_length=2)
    unsharded = chute.IterDataset.interleave(chute.MapDataset.range(1, 3).map(_file), 2)
    sharded = chute.IterDataset.interleave(chute.MapDataset.range(1, 3).shard(0, 1).map(_file), 2)
    for kept in (listed, unsharded):  # As before: its streams, one by one.
        stages = describe_pipeline(iter(kept))["stages"]
        assert [s["op"] for s in stages] == ["interleave"]
        assert len(stages[0]["inputs"]) == 2
    stages = describe_pipeline(iter(sharded))["stages"]
    assert [s["op"] for s in stages] == ["source", "shard", "map", "interleave"]
    assert "inputs" not in stages[-1]
    assert list(listed) == list(unsharded) == list(sharded)


def _sharded_parts(index, count):
    def open_part(f):
        return chute.MapDataset.range(f * 100, f * 100 + 6).shard(index, count).to_iter_dataset()

    return chute.IterDataset.interleave(chute.MapDataset.range(4).shard(0, 1).map(open_part), 2)


def test_streams_that_take_a_shard_keep_their_description_and_are_refused():
    # Every process opens every file and reads its own stride of each: the streams'
    # shards are listed, so resharding sees them (and refuses, as before).
    stages = describe_pipeline(iter(_sharded_parts(0, 2)))["stages"]
    assert [s["op"] for s in stages] == ["interleave"]
    with pytest.raises(ReshardError, match="found 4 shard stages"):
        chute.checkpoint.check_reshardable(iter(_sharded_parts(0, 2)))


def _indexed_file(index, number):
    return chute.MapDataset.range(number * 100, number * 100 + 6).seed(index).shuffle()


@pytest.mark.parametrize(
    ("numbered", "op"),
    [
        (lambda files: files.map_with_index(_indexed_file), "map_with_index"),
        (lambda files: files.random_map(lambda f, rng: _file(f), seed=1), "random_map"),
    ],
)
def test_streams_made_from_the_number_a_process_gives_are_refused(numbered, op):
    files = chute.MapDataset.range(12).shard(0, 2)
    it = iter(chute.IterDataset.interleave(numbered(files), cycle_length=2))
    with pytest.raises(ReshardError, match=r"before it makes that element from the number"):
        chute.checkpoint.check_reshardable(it)


def test_files_sharded_with_drop_remainder_are_refused():
    files = chute.MapDataset.range(5).shard(0, 2, drop_remainder=True).map(_file)
    it = iter(chute.IterDataset.interleave(files, cycle_length=2))
    with pytest.raises(ReshardError, match="taken with drop_remainder=True"):
        chute.checkpoint.check_reshardable(it)


def test_files_a_filter_dropped_are_skipped_without_taking_a_turn():
    listing = chute.MapDataset.range(12).filter(_not_threes).shard(0, 1)
    by_position = chute.IterDataset.interleave(listing.map(_file), cycle_length=2)
    kept = [_file(f) for f in range(12) if _not_threes(f)]
    assert list(by_position) == list(chute.IterDataset.interleave(kept, cycle_length=2))
    state = make_document(iter(by_position))["state"]
    assert state["next_input"] == 0  # Positions, not kept files: 12 of them.
    it = iter(by_position)
    list(it)
    assert it.get_state()["next_input"] == 12


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
    files = chute.MapDataset.range(8).shard(0, 1).map(_file)
    now = chute.IterDataset.interleave(files, cycle_length=2)
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


def test_a_window_over_the_interleave_goes_back_without_what_it_yielded():
    def make(index, count):
        return _files(index, count).window_shuffle(4, seed=1)

    olds = [iter(make(i, 2)) for i in range(2)]
    head = [*itertools.islice(olds[0], 2), *itertools.islice(olds[1], 5)]
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    window = documents[0]["state"]
    assert window["offset"] == 2 and window["window_start"]["next_input"] == 0
    assert "reads" in window  # By the file's position in the shard and the record's.
    news = reshard(documents, 3)
    skips = {k: d["state"]["window_start"].get("skips") for k, d in enumerate(news)}
    named = [
        (g, p)
        for k, entries in skips.items()
        for local, span in entries or []
        for g in [k + 3 * local]
        for p in range(span[0], span[0] + span[1])
    ]
    # What each host yielded of its current window (host 0 two elements, host 1 its fifth
    # after a whole window), by file and position: each to the file's new owner.
    assert sorted(named) == sorted((x // 100, x % 100) for x in [*head[:2], head[6]])
    assert sorted(head + _run_out(make, news)) == _EIGHT_FILES


def test_a_billion_files_are_listed_lazily():
    opened = []

    def open_file(number):
        opened.append(number)
        return _file(number)

    files = chute.MapDataset.range(10**9).shard(1, 4).map(open_file)
    it = iter(chute.IterDataset.interleave(files, cycle_length=2))
    assert list(itertools.islice(it, 6)) == [100, 500, 501, 900, 502, 901]
    # Only the files opened, and the first once more when the pipeline was built (its
    # stages say whether the streams take a shard themselves).
    assert opened == [1, 1, 5, 9]
    assert it.get_state()["next_input"] == 3


def _own_reader(number):
    return chute.IterDataset.source(
        lambda: ListIterator(range(number * 100, number * 100 + 3), origins=False)
    )


@pytest.mark.parametrize(
    "open_file",
    [
        _own_reader,
        lambda f: _file(f).flat_map(lambda x: [x, x + 50]),
        lambda f: _file(f).repeat(2),
    ],
    ids=["own_reader", "flat_map_inside", "repeat_inside"],
)
def test_a_window_over_streams_without_positions_is_refused_when_checked(open_file):
    files = chute.MapDataset.range(6).shard(0, 2).map(open_file)
    it = iter(chute.IterDataset.interleave(files, cycle_length=2).window_shuffle(4, seed=0))
    with pytest.raises(ReshardError, match="whose streams do not number their elements"):
        chute.checkpoint.check_reshardable(it)
    # Without the window, such streams reshard: each continues from its own state.
    plain = iter(chute.IterDataset.interleave(files, cycle_length=2))
    chute.checkpoint.check_reshardable(plain)


def test_records_another_host_delivered_are_not_read_again():
    read = []

    def counted(x):
        read.append(x)
        return x

    def make(index, count):
        def open_file(number):
            return chute.MapDataset.range(number * 100, number * 100 + 50).map(counted)

        files = (
            chute.MapDataset.range(12)
            .shard(index, count)
            .map(lambda f: open_file(f).to_iter_dataset())
        )
        return chute.IterDataset.interleave(files, cycle_length=2).window_shuffle(40, seed=1)

    olds = [iter(make(i, 2)) for i in range(2)]
    head = [x for it in olds for x in itertools.islice(it, 30)]  # Inside each first window.
    documents = [make_document(it, i, 2) for i, it in enumerate(olds)]
    read.clear()
    news = [iter(make(k, 3)) for k in range(3)]
    for it, document in zip(news, reshard(documents, 3), strict=True):
        apply_document(it, document)
    rest = [x for it in news for x in it]
    assert sorted(head + rest) == [x for f in range(12) for x in range(f * 100, f * 100 + 50)]
    # Of the 60 records delivered, those that begin where a file's reader stands are
    # skipped by moving the reader past them, not read again (the others are read and
    # left out); every record not delivered is read once.
    assert 540 <= len(read) < 600
