"""`save` / `restore` without Orbax: atomic files, exact resume, clear errors."""

import json
import operator
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_checkpoint import (
    CheckpointFormatError,
    CheckpointNotFoundError,
    PipelineMismatchError,
    read_document,
    restore,
    save,
    write_atomic,
)


def _pipeline(workers=None, size=200):
    ds = (
        chute.MapDataset.range(size)
        .seed(5)
        .shuffle()
        .to_iter_dataset()
        .map(operator.neg)
        .filter(operator.truth)
    )
    if workers is not None:
        ds = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=8)
    return ds.batch(3)


def _as_lists(batches):
    return [b.tolist() for b in batches]


def test_restore_continues_with_the_next_element(tmp_path):
    it = iter(_pipeline())
    head = _as_lists(next(it) for _ in range(7))
    path = save(it, tmp_path)
    assert path == tmp_path / "process_0-of-1.json"
    rest = _as_lists(it)
    resumed = restore(iter(_pipeline()), tmp_path)
    assert _as_lists(resumed) == rest
    assert head + rest == _as_lists(iter(_pipeline()))


def test_a_worker_state_restores_with_another_worker_count(tmp_path):
    expected = _as_lists(iter(_pipeline()))
    it = iter(_pipeline(workers=2))
    head = _as_lists(next(it) for _ in range(11))
    save(it, tmp_path)
    del it
    resumed = restore(iter(_pipeline(workers=3)), tmp_path)
    assert head + _as_lists(resumed) == expected
    in_process = restore(iter(_pipeline(workers=0)), tmp_path)
    assert head + _as_lists(in_process) == expected


def test_each_process_writes_and_reads_its_own_file(tmp_path):
    ds = chute.MapDataset.range(20)
    iterators = [iter(ds.shard(i, 2).to_iter_dataset()) for i in range(2)]
    for index, it in enumerate(iterators):
        for _ in range(index + 1):
            next(it)
        save(it, tmp_path, process_index=index, process_count=2)
    assert sorted(os.listdir(tmp_path)) == ["process_0-of-2.json", "process_1-of-2.json"]
    fresh = [iter(ds.shard(i, 2).to_iter_dataset()) for i in range(2)]
    for index, it in enumerate(fresh):
        restore(it, tmp_path, process_index=index, process_count=2)
    assert [next(it) for it in fresh] == [2, 5]


def test_saving_replaces_the_file_atomically_and_leaves_no_temporary_files(tmp_path):
    it = iter(_pipeline())
    for _ in range(5):
        next(it)
        save(it, tmp_path)
    assert os.listdir(tmp_path) == ["process_0-of-1.json"]
    assert read_document(tmp_path / "process_0-of-1.json")["state"] == it.get_state()


def test_a_write_that_fails_midway_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "state.json"
    write_atomic(target, "old")

    def broken_fsync(fd):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk gone"):
        write_atomic(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["state.json"]


def test_a_missing_folder_or_file_says_what_is_there(tmp_path):
    it = iter(_pipeline())
    with pytest.raises(CheckpointNotFoundError) as caught:
        restore(it, tmp_path / "nothing")
    assert str(caught.value) == (
        f"no checkpoint at {tmp_path / 'nothing'}: the folder does not exist."
    )
    with pytest.raises(CheckpointNotFoundError) as caught:
        restore(it, tmp_path)
    assert (
        str(caught.value) == f"{tmp_path} has no process_0-of-1.json (no chute state files at all)."
    )
    save(it, tmp_path, process_index=1, process_count=2)
    with pytest.raises(CheckpointNotFoundError) as caught:
        restore(it, tmp_path)
    assert str(caught.value) == (
        f"{tmp_path} has no process_0-of-1.json: it holds the states of processes [1] of 2, "
        "and this is process 0 of 1; continuing on another number of processes needs the "
        "states of all 2."
    )
    save(it, tmp_path, process_index=0, process_count=3)
    with pytest.raises(CheckpointNotFoundError) as caught:
        restore(it, tmp_path)
    assert str(caught.value) == (
        f"{tmp_path} has no process_0-of-1.json, and holds the states of several process "
        "counts [2, 3]: it is unclear which to continue from; keep one step's states in a "
        "folder (or reshard_directory the right ones into a new folder)."
    )
    with pytest.raises(CheckpointNotFoundError, match=r"^no checkpoint file at "):
        read_document(tmp_path / "absent.json")


@pytest.mark.parametrize(
    ("content", "start"),
    [
        (None, "not valid JSON (truncated or corrupt?)"),  # Truncated.
        (b"", "not valid JSON (truncated or corrupt?)"),
        (b"\x00\x01garbage", "not valid JSON (truncated or corrupt?)"),
        (b"[1, 2]", "a chute checkpoint is a JSON object, got a list."),
        (
            b'{"version": 2, "last_seen_indices": {"0": 4}, "worker_count": 0}',
            'not a chute checkpoint: expected "format": "chute-iterator-state"',
        ),
        (
            b"[" * 100_000 + b"]" * 100_000,
            "the JSON is nested too deeply to be a chute checkpoint",
        ),
        (
            b'{"format": "chute-iterator-state", "state": ' + b"[" * 100_000,
            "the JSON is nested too deeply to be a chute checkpoint",
        ),
    ],
)
def test_corrupt_truncated_and_foreign_files_are_refused(tmp_path, content, start):
    it = iter(_pipeline())
    path = save(it, tmp_path)
    if content is None:
        content = path.read_bytes()[:-40]
    path.write_bytes(content)
    with pytest.raises(CheckpointFormatError) as caught:
        restore(iter(_pipeline()), tmp_path)
    assert str(caught.value).startswith(f"{path}: {start}")


def test_a_file_of_another_pipeline_is_refused_naming_the_difference(tmp_path):
    save(iter(_pipeline(size=200)), tmp_path)
    with pytest.raises(PipelineMismatchError, match=r"stage 0 \(source\): parameter 'source'"):
        restore(iter(_pipeline(size=201)), tmp_path)


def test_a_hand_edited_state_is_refused(tmp_path):
    path = save(iter(_pipeline()), tmp_path)
    document = json.loads(path.read_text())
    document["pipeline"]["stages"][1]["params"]["seed"] = 6
    path.write_text(json.dumps(document))
    with pytest.raises(CheckpointFormatError, match="the file was edited or is corrupt"):
        restore(iter(_pipeline()), tmp_path)


@settings(max_examples=25, deadline=None)
@given(
    size=st.integers(0, 60),
    seed=st.integers(0, 2**32),
    batch=st.integers(1, 5),
    steps=st.integers(0, 30),
)
def test_save_then_restore_equals_the_uninterrupted_run(tmp_path_factory, size, seed, batch, steps):
    ds = (
        chute.MapDataset.range(size)
        .seed(seed)
        .shuffle()
        .to_iter_dataset()
        .filter(lambda x: x % 3)
        .batch(batch)
    )
    expected = _as_lists(iter(ds))
    it = iter(ds)
    head = [b.tolist() for b in (next(it, None) for _ in range(steps)) if b is not None]
    folder = tmp_path_factory.mktemp("ckpt")
    save(it, folder)
    assert head + _as_lists(restore(iter(ds), folder)) == expected


@settings(max_examples=6, deadline=None)
@given(
    before=st.integers(0, 2),
    after=st.integers(0, 3),
    steps=st.integers(0, 40),
    chunk=st.sampled_from([1, 4, 16]),
)
def test_a_saved_worker_state_resumes_exactly_with_any_worker_count(
    tmp_path_factory, before, after, steps, chunk
):
    def pipeline(workers):
        ds = chute.MapDataset.range(120).seed(9).shuffle().to_iter_dataset()
        ds = ds.map(operator.neg).filter(operator.truth)
        options = chute.MultiprocessingOptions(num_workers=workers)
        return ds.mp_prefetch(options, chunk_size=chunk)

    expected = list(pipeline(0))
    it = iter(pipeline(before))
    head = [x for x in (next(it, None) for _ in range(steps)) if x is not None]
    folder = tmp_path_factory.mktemp("workers")
    save(it, folder)
    del it
    assert head + list(restore(iter(pipeline(after)), folder)) == expected


def test_a_data_loader_state_restores_with_another_worker_count(tmp_path):
    def loader(workers):
        sampler = chute.IndexSampler(
            50, num_epochs=2, shard_options=chute.NoSharding(), shuffle=True, seed=4
        )
        return chute.DataLoader(
            data_source=chute.RangeSource(50),
            sampler=sampler,
            operations=[chute.BatchTransform(4)],
            worker_count=workers,
            chunk_size=8,
        )

    expected = _as_lists(loader(0))
    it = iter(loader(2))
    head = _as_lists(next(it) for _ in range(9))
    save(it, tmp_path)
    del it
    assert head + _as_lists(restore(iter(loader(0)), tmp_path)) == expected
