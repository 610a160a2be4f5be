"""The checkpoint examples of Grain's guides (seeds 000 and 003) with `import chute`.

Both save an iterator with Orbax's `CheckpointManager` after a few steps, read on,
restore, and print the same elements again. The sources here are local and in memory
(MNIST-like records with a label, ImageNet-like records with a file name), so the
printed continuation is compared exactly with the uninterrupted run.
"""

import json
import os

import numpy as np
import orbax.checkpoint as ocp
import pytest

import chute


def _mnist_like(size=300):
    rng = np.random.default_rng(0)
    return [{"label": int(rng.integers(10)), "number": n} for n in range(size)]


def _imagenet_like(size=5):
    names = [
        f"{n:06d}_{animal}.jpg".encode()
        for n, animal in enumerate(["bee", "agama", "lemon", "wine", "nail"])
    ]
    return [{"file_name": names[n], "label": 100 + n} for n in range(size)]


def test_seed_003_dataset_iterator_with_orbax(tmp_path, capsys):
    ds = chute.MapDataset.source(_mnist_like()).seed(seed=45).shuffle().to_iter_dataset()

    num_steps = 4
    ds_iter = iter(ds)

    # Read some elements.
    for i in range(num_steps):
        x = next(ds_iter)
        print(i, x["label"])

    mngr = ocp.CheckpointManager(str(tmp_path / "orbax"))

    # Save the checkpoint.
    assert mngr.save(step=num_steps, args=chute.checkpoint.CheckpointSave(ds_iter), force=True)
    # Checkpoint saving in Orbax is asynchronous by default, so we'll wait until
    # finished before examining checkpoint.
    mngr.wait_until_finished()

    files = sorted(
        f for f in os.listdir(tmp_path / "orbax" / "4" / "default") if f.endswith(".json")
    )
    assert files == ["process_0-of-1.json"]
    saved = json.loads((tmp_path / "orbax" / "4" / "default" / files[0]).read_text())
    assert (saved["version"], saved["state"]) == (2, {"position": 4})
    # Format 2: the document says what each op does to positions (resharding reads it).
    assert saved["traits"]["shuffle"] == {"random": True}

    # Read more elements and advance the iterator.
    for i in range(4, 8):
        x = next(ds_iter)
        print(i, x["label"])

    # Restore iterator from the previously saved checkpoint.
    mngr.restore(num_steps, args=chute.checkpoint.CheckpointRestore(ds_iter))
    # Iterator should be set back to start from 4.
    for i in range(4, 8):
        x = next(ds_iter)
        print(i, x["label"])
    mngr.close()

    lines = capsys.readouterr().out.splitlines()
    uninterrupted = [f"{i} {x['label']}" for i, x in zip(range(8), iter(ds), strict=False)]
    assert lines == uninterrupted + uninterrupted[4:]


@pytest.mark.parametrize("worker_count", [0, 2])
def test_seed_000_data_loader_with_orbax(tmp_path, capsys, worker_count):
    source = _imagenet_like()
    index_sampler = chute.IndexSampler(
        num_records=5,
        num_epochs=2,
        shard_options=chute.ShardOptions(shard_index=0, shard_count=1, drop_remainder=True),
        shuffle=True,
        seed=0,
    )
    data_loader = chute.DataLoader(
        data_source=chute.InMemoryDataSource(source) if worker_count else source,
        operations=[],
        sampler=index_sampler,
        worker_count=worker_count,
    )

    data_iter = iter(data_loader)
    num_steps = 5

    # Read some elements.
    for i in range(num_steps):
        x = next(data_iter)
        print(i, x["file_name"], x["label"])

    mngr = ocp.CheckpointManager(str(tmp_path / "orbax"))

    # Save the checkpoint
    assert mngr.save(step=num_steps, args=chute.PyGrainCheckpointSave(data_iter), force=True)
    # Checkpoint saving in Orbax is asynchronous by default, so we'll wait until
    # finished before examining checkpoint.
    mngr.wait_until_finished()
    folder = tmp_path / "orbax" / "5" / "default"
    assert [f for f in os.listdir(folder) if f.endswith(".json")] == ["process_0-of-1.json"]
    saved = json.loads((folder / "process_0-of-1.json").read_text())
    assert saved["pipeline"]["kind"] == "DataLoader"
    assert saved["pipeline"]["stages"][1]["params"]["seed"] == 0

    # Read more elements and advance the iterator
    for i in range(5, 10):
        x = next(data_iter)
        print(i, x["file_name"], x["label"])

    # Restore iterator from previously saved checkpoint
    mngr.restore(num_steps, args=chute.PyGrainCheckpointRestore(data_iter))
    # Iterator should be set back to start from 5.
    for i in range(5, 10):
        x = next(data_iter)
        print(i, x["file_name"], x["label"])
    mngr.close()

    lines = capsys.readouterr().out.splitlines()
    uninterrupted = [f"{i} {x['file_name']} {x['label']}" for i, x in enumerate(data_loader)]
    assert len(uninterrupted) == 10
    assert lines == uninterrupted + uninterrupted[5:]
