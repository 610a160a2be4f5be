"""Elastic restore across process counts: simulated processes are iterators of shards."""

import ast
import json
import operator
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import (
    ReshardError,
    apply_document,
    fingerprint,
    make_document,
    reshard,
    reshard_directory,
    restore,
    save,
)


def _pipeline(index, count, size=60, workers=None):
    ds = chute.MapDataset.range(size).seed(3).shuffle().shard(index, count).to_iter_dataset()
    ds = ds.map(operator.neg)
    if workers is not None:
        ds = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=4)
    return ds


def _global_order(size=60):
    return list(chute.MapDataset.range(size).seed(3).shuffle().to_iter_dataset().map(operator.neg))


def _run_lockstep(iterators, steps):
    """`steps` rounds of one element per process: the global sequence they consume."""
    out = []
    for _ in range(steps):
        out.extend(next(it) for it in iterators)
    return out


def _finish_lockstep(iterators):
    out = []
    while True:
        row = [next(it, None) for it in iterators]
        out.extend(x for x in row if x is not None)
        if all(x is None for x in row):
            return out


def _elastic(old, new, steps, size=60, workers=None):
    olds = [iter(_pipeline(i, old, size, workers)) for i in range(old)]
    head = _run_lockstep(olds, steps)
    documents = [make_document(it, i, old) for i, it in enumerate(olds)]
    news = [iter(_pipeline(k, new, size, workers)) for k in range(new)]
    for k, document in enumerate(reshard(documents, new)):
        assert (document["process_index"], document["process_count"]) == (k, new)
        apply_document(news[k], document)  # The fingerprint matches the new pipeline.
    return head + _finish_lockstep(news)


def test_two_processes_to_one_continue_the_global_sequence():
    assert _elastic(2, 1, steps=7) == _global_order()


def test_one_process_to_two_continue_the_global_sequence():
    assert _elastic(1, 2, steps=10) == _global_order()


def test_worker_states_reshard_too():
    assert _elastic(2, 3, steps=9, workers=0) == _global_order()


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(0, 12), st.integers(0, 40))
def test_any_allowed_reshard_continues_exactly(old, new, steps, size):
    steps = min(steps, size // old)  # All processes still have elements: lockstep.
    if steps * old % new:  # The new processes start unevenly: the same elements, once.
        assert sorted(_elastic(old, new, steps, size)) == sorted(_global_order(size))
    else:
        assert _elastic(old, new, steps, size) == _global_order(size)


def test_files_reshard_and_restore(tmp_path):
    olds = [iter(_pipeline(i, 2)) for i in range(2)]
    head = _run_lockstep(olds, 6)
    for index, it in enumerate(olds):
        save(it, tmp_path / "old", process_index=index, process_count=2)
    written = reshard_directory(tmp_path / "old", tmp_path / "new", 3)
    assert [p.name for p in written] == [f"process_{k}-of-3.json" for k in range(3)]
    news = [
        restore(iter(_pipeline(k, 3)), tmp_path / "new", process_index=k, process_count=3)
        for k in range(3)
    ]
    assert head + _finish_lockstep(news) == _global_order()


def _documents(count=2, steps=(3, 3), pipeline=_pipeline):
    iterators = [iter(pipeline(i, count)) for i in range(count)]
    for it, n in zip(iterators, steps, strict=True):
        for _ in range(n):
            next(it)
    return [make_document(it, i, count) for i, it in enumerate(iterators)]


def _map_batched(index, count):
    return chute.MapDataset.range(60).shard(index, count).batch(3).to_iter_dataset()


def test_indivisible_totals_of_map_batches_are_refused_with_the_arithmetic():
    with pytest.raises(ReshardError) as caught:
        reshard(_documents(steps=(1, 1), pipeline=_map_batched), 4)
    assert str(caught.value) == (
        "2 processes at local position 1 consumed 6 elements together, which 4 processes "
        "cannot split evenly (6 % 4 = 2); restore from a step where the total is divisible "
        "by 4, or use a process count that divides it."
    )


def test_processes_out_of_lockstep_continue_exactly_once():
    documents = _documents(steps=(3, 4))  # Shard 0 read globals 0, 2, 4; shard 1 up to 7.
    news = [iter(_pipeline(k, 3)) for k in range(3)]
    for k, document in enumerate(reshard(documents, 3)):
        apply_document(news[k], document)
    order = _global_order()
    rest = _finish_lockstep(news)
    assert sorted(rest) == sorted(order[6:7] + order[8:])


def test_missing_processes_and_other_pipelines_are_refused():
    documents = _documents()
    with pytest.raises(ReshardError, match="but 1 states were given: pass the states of all"):
        reshard(documents[:1], 1)
    other = _documents(pipeline=lambda i, n: _pipeline(i, n, size=61))
    with pytest.raises(ReshardError, match="state 1 is of a different pipeline than state 0"):
        reshard([documents[0], other[1]], 1)
    with pytest.raises(ReshardError) as caught:
        reshard([documents[0], documents[0] | {"process_index": 1}], 1)
    assert str(caught.value) == (
        "the shard indices [0, 0] (by process) are not each of 0..1 at least once: pass the "
        "states of all processes."
    )
    with pytest.raises(ReshardError) as caught:
        reshard([documents[1], documents[1]], 1)
    assert str(caught.value) == (
        "the states are of the processes [1, 1], not of each of 0..1 once: pass the state of "
        "every process of one step."
    )
    with pytest.raises(ReshardError, match="needs the state documents of all processes, got none"):
        reshard([], 1)
    with pytest.raises(ReshardError, match="process_count must be a positive int, got 0"):
        reshard(documents, 0)


def test_stages_that_move_positions_after_the_shard_are_refused():
    def shuffled(i, n):
        ds = chute.MapDataset.range(20).shard(i, n).to_iter_dataset()
        return ds.window_shuffle(4, seed=0).window_shuffle(2, seed=1)  # One is allowed.

    with pytest.raises(ReshardError) as caught:
        reshard(_documents(pipeline=shuffled), 1)
    message, allowed = str(caught.value).split(" Stages allowed after shard: ")
    assert message == (
        "stage 4 (window_shuffle) follows the shard stage and changes which position of the "
        "shard an element is (or keeps state across elements), so the global sequence cannot "
        "be re-cut; put it before .shard(...), or restore with the same process count."
    )
    # Every op declared to keep positions (a new one too), never the window shuffle.
    listed = ast.literal_eval(allowed.rstrip("."))
    assert listed == sorted(listed)
    assert {"batch", "filter", "map", "mp_prefetch", "prefetch", "to_device"} <= set(listed)
    assert "window_shuffle" not in listed

    def nested(i, n):  # A mixture of sharded streams reshards; a concatenation does not.
        parts = [chute.MapDataset.range(20).shard(i, n).to_iter_dataset()] * 2
        return chute.IterDataset.concatenate(parts)

    with pytest.raises(ReshardError) as caught:
        reshard(_documents(pipeline=nested), 1)
    assert str(caught.value) == (
        "reshard needs a chute.IterDataset pipeline with no shard stage or exactly one "
        "(MapDataset...shard(i, n)...to_iter_dataset()); found 2 shard stages in a IterDataset "
        "pipeline."
    )


def _filtered(i, n):
    ds = chute.MapDataset.range(40).shard(i, n).to_iter_dataset().filter(operator.truth)
    return ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=0), chunk_size=4)


def test_a_filtered_worker_state_inside_a_chunk_says_where_it_read_through():
    documents = _documents(steps=(2, 3), pipeline=_filtered)
    # Shard 0 dropped 0: its 2 outputs 2, 4 are of positions 1 and 2 of unit 0.
    assert documents[0]["state"] == {"position": 0, "offset": 2, "through": 3}
    assert documents[1]["state"] == {"position": 0, "offset": 3, "through": 3}  # 1, 3, 5.
    (document,) = reshard(documents, 1)
    it = iter(_filtered(0, 1))
    apply_document(it, document)
    assert list(it) == list(range(6, 40))


def test_a_filtered_worker_state_inside_a_chunk_without_through_is_refused():
    documents = _documents(steps=(2, 3), pipeline=_filtered)
    del documents[0]["state"]["through"]  # As chute before 0.2.19 wrote it.
    with pytest.raises(ReshardError, match="inside a unit of a filtered stream"):
        reshard(documents, 1)


def test_reshard_directory_refuses_empty_and_mixed_folders(tmp_path):
    with pytest.raises(ReshardError) as caught:
        reshard_directory(tmp_path, tmp_path / "new", 1)
    assert str(caught.value) == f"{tmp_path} holds no process_*-of-*.json state files."
    it = iter(_pipeline(0, 1))
    save(it, tmp_path, process_index=0, process_count=1)
    save(it, tmp_path, process_index=0, process_count=2)
    with pytest.raises(ReshardError) as caught:
        reshard_directory(tmp_path, tmp_path / "new", 1)
    assert str(caught.value) == f"{tmp_path} mixes states of different process counts [1, 2]."


_RESHARD_ALONE = """
import json, sys
from chute_checkpoint import reshard
documents = json.loads(sys.stdin.read())
print(json.dumps([d["state"] for d in reshard(documents, 3)]))
"""


def _with_a_users_op(documents, traits):
    """The documents with a stage of an op that only the saving process declared."""
    edited = []
    for document in documents:
        document = json.loads(json.dumps(document))
        document["pipeline"]["stages"].append({"op": "users_scale", "params": {}})
        document["fingerprint"] = fingerprint(document["pipeline"])
        if traits is None:
            document["version"] = 1  # Written before documents carried traits.
            del document["traits"]
        else:
            document["traits"]["users_scale"] = traits
        edited.append(document)
    return edited


@pytest.mark.parametrize("carried", [True, False])
def test_a_document_reshards_with_the_traits_it_carries_in_a_process_of_its_own(carried):
    # The resharding process imports chute_checkpoint alone: it never saw the op.
    documents = _with_a_users_op(
        _documents(steps=(3, 3)), {"keeps_positions": True} if carried else None
    )
    done = subprocess.run(
        [sys.executable, "-c", _RESHARD_ALONE],
        input=json.dumps(documents),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if carried:
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == [{"parent": {"position": 2}, "index": 2}] * 3
    else:
        assert "stage 6 (users_scale) is of an op whose traits neither the checkpoint " in (
            done.stderr
        )
