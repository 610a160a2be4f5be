"""Orbax integration: CheckpointManager, Composite args, async saves, errors."""

import json
import operator

import numpy as np
import orbax.checkpoint as ocp
import pytest

import chute
from chute_checkpoint import (
    CheckpointFormatError,
    CheckpointHandler,
    CheckpointNotFoundError,
    CheckpointRestore,
    CheckpointSave,
    PipelineMismatchError,
    fingerprint,
    reshard_directory,
)


def _dataset(size=100, workers=None):
    ds = chute.MapDataset.range(size).seed(2).shuffle().to_iter_dataset().map(operator.neg)
    if workers is not None:
        ds = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=8)
    return ds


class _Recording:
    """Forwards to an iterator and counts `get_state` calls."""

    def __init__(self, inner):
        self.inner, self.get_state_calls = inner, 0
        self.chute_pipeline = inner.chute_pipeline

    def __next__(self):
        return next(self.inner)

    def get_state(self):
        self.get_state_calls += 1
        return self.inner.get_state()

    def set_state(self, state):
        self.inner.set_state(state)


def test_an_async_save_takes_the_state_when_save_is_called(tmp_path):
    ds = _dataset()
    it = _Recording(iter(ds))
    expected = list(ds)
    head = [next(it) for _ in range(10)]
    options = ocp.CheckpointManagerOptions(enable_async_checkpointing=True)
    with ocp.CheckpointManager(tmp_path, options=options) as manager:
        manager.save(1, args=CheckpointSave(it))
        assert it.get_state_calls == 1  # Taken before save() returned...
        moved_on = [next(it) for _ in range(20)]  # ...so this cannot leak into the file.
        manager.wait_until_finished()
        fresh = iter(ds)
        assert manager.restore(1, args=CheckpointRestore(fresh)) is fresh
    assert head + moved_on == expected[:30]
    assert head + list(fresh) == expected


def test_composite_args_save_model_and_data_together(tmp_path):
    ds = _dataset()
    it = iter(ds)
    head = [next(it) for _ in range(7)]
    params = {"w": np.arange(6.0).reshape(2, 3), "b": np.ones(3)}
    with ocp.CheckpointManager(tmp_path) as manager:
        manager.save(
            3,
            args=ocp.args.Composite(params=ocp.args.StandardSave(params), data=CheckpointSave(it)),
        )
        manager.wait_until_finished()
        fresh = iter(ds)
        restored = manager.restore(
            3,
            args=ocp.args.Composite(
                params=ocp.args.StandardRestore(params), data=CheckpointRestore(fresh)
            ),
        )
    np.testing.assert_array_equal(restored["params"]["w"], params["w"])
    assert restored["data"] is fresh
    assert head + list(fresh) == list(ds)
    assert sorted(p.name for p in (tmp_path / "3" / "data").glob("*.json")) == [
        "process_0-of-1.json"
    ]


def test_workers_two_then_three_through_orbax(tmp_path):
    expected = list(_dataset())
    it = iter(_dataset(workers=2))
    head = [next(it) for _ in range(37)]
    with ocp.CheckpointManager(tmp_path) as manager:
        manager.save(37, args=CheckpointSave(it))
        manager.wait_until_finished()
        del it
        fresh = manager.restore(37, args=CheckpointRestore(iter(_dataset(workers=3))))
        assert head + list(fresh) == expected


def test_latest_step_restores_after_several_saves(tmp_path):
    ds = _dataset()
    it = iter(ds)
    with ocp.CheckpointManager(tmp_path) as manager:
        for step in range(1, 4):
            next(it)
            manager.save(step, args=CheckpointSave(it))
        manager.wait_until_finished()
        rest = list(it)
        step = manager.latest_step()
        assert step == 3
        assert list(manager.restore(step, args=CheckpointRestore(iter(ds)))) == rest


def test_a_different_pipeline_is_refused_through_orbax(tmp_path):
    with ocp.CheckpointManager(tmp_path) as manager:
        manager.save(1, args=CheckpointSave(iter(_dataset(100))))
        manager.wait_until_finished()
        with pytest.raises(PipelineMismatchError, match=r"stage 0 \(source\)"):
            manager.restore(1, args=CheckpointRestore(iter(_dataset(99))))
        it = manager.restore(1, args=CheckpointRestore(iter(_dataset(99)), check_pipeline=False))
        assert next(it) is not None


def test_a_handler_of_another_process_count_needs_every_processs_state(tmp_path):
    it = iter(_dataset())
    next(it)
    saver = ocp.Checkpointer(CheckpointHandler(process_index=1, process_count=2))
    saver.save(tmp_path / "ckpt", args=CheckpointSave(it))
    restorer = ocp.Checkpointer(CheckpointHandler())
    with pytest.raises(CheckpointNotFoundError) as caught:
        restorer.restore(tmp_path / "ckpt", args=CheckpointRestore(iter(_dataset())))
    assert str(caught.value) == (
        f"{tmp_path / 'ckpt'} has no process_0-of-1.json: it holds the states of processes "
        "[1] of 2, and this is process 0 of 1; continuing on another number of processes "
        "needs the states of all 2."
    )
    same = ocp.Checkpointer(CheckpointHandler(process_index=1, process_count=2))
    fresh = same.restore(tmp_path / "ckpt", args=CheckpointRestore(iter(_dataset())))
    assert list(fresh) == list(_dataset())[1:]


def test_a_global_pipeline_restores_on_another_process_count_through_orbax(tmp_path):
    # No shard stage: both processes walk the same positions (as with batch(sharding=)).
    ds = chute.MapDataset.range(40).seed(1).shuffle().batch(4).to_iter_dataset()
    expected = [b.tolist() for b in ds]
    for index in range(2):
        it = iter(ds)
        for _ in range(3):
            next(it)
        saver = ocp.Checkpointer(CheckpointHandler(process_index=index, process_count=2))
        saver.save(tmp_path / f"part{index}", args=CheckpointSave(it))
    # (Each process of a real run writes into the same step folder; gather them here.)
    step = tmp_path / "step"
    step.mkdir()
    for index in range(2):
        name = f"process_{index}-of-2.json"
        (step / name).write_bytes((tmp_path / f"part{index}" / name).read_bytes())
    for index, count in [(0, 1), (2, 3)]:
        restorer = ocp.Checkpointer(CheckpointHandler(process_index=index, process_count=count))
        fresh = restorer.restore(step, args=CheckpointRestore(iter(ds)))
        assert [b.tolist() for b in fresh] == expected[3:]


def test_an_orbax_step_reshards_in_place_for_more_processes(tmp_path):
    def sharded(index, count):
        return chute.MapDataset.range(40).seed(1).shuffle().shard(index, count).to_iter_dataset()

    it = iter(sharded(0, 1))
    head = [next(it) for _ in range(6)]
    with ocp.CheckpointManager(tmp_path) as manager:
        manager.save(6, args=CheckpointSave(it))
        manager.wait_until_finished()
    item = tmp_path / "6" / "default"
    reshard_directory(item, item, 2)
    hosts = []
    for index in range(2):
        restorer = ocp.Checkpointer(CheckpointHandler(process_index=index, process_count=2))
        hosts.append(restorer.restore(item, args=CheckpointRestore(iter(sharded(index, 2)))))
    rest = [x for pair in zip(*hosts, strict=True) for x in pair]
    assert head + rest == list(sharded(0, 1))


def test_a_crafted_or_misplaced_state_in_an_orbax_checkpoint_is_a_format_error(tmp_path):
    it = iter(_dataset())
    next(it)
    ocp.Checkpointer(CheckpointHandler()).save(tmp_path / "ckpt", args=CheckpointSave(it))
    path = tmp_path / "ckpt" / "process_0-of-1.json"
    document = json.loads(path.read_text())
    document["pipeline"]["stages"][0] = 1  # With a fingerprint that matches it.
    document["fingerprint"] = fingerprint(document["pipeline"])
    path.write_text(json.dumps(document))
    restorer = ocp.Checkpointer(CheckpointHandler())
    with pytest.raises(CheckpointFormatError) as caught:
        restorer.restore(tmp_path / "ckpt", args=CheckpointRestore(iter(_dataset())))
    assert str(caught.value) == (
        f"{path}: pipeline stage 0 must be an object with 'op' and 'params', got 1."
    )
    path.unlink()
    path.mkdir()
    with pytest.raises(CheckpointFormatError) as caught:
        restorer.restore(tmp_path / "ckpt", args=CheckpointRestore(iter(_dataset())))
    assert str(caught.value) == (
        f"{path}: a folder, not a state file; restore from the folder that holds the "
        "process_<i>-of-<n>.json files."
    )
