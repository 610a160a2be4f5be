"""Pipelines over `TFRecordSource`: shuffled, parsed, with 0 or 2 worker processes, and
resumed exactly from states taken anywhere (also into another worker count)."""

from __future__ import annotations

import numpy as np
import pytest

import chute
from chute_sources import TFRecordSource, encode_example, write_tfrecord
from chute_testing import assert_resumes


def summary(example):
    return {"id": int(example["id"][0]), "total": float(example["x"].sum())}


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tfrecord")
    for shard in range(3):
        rows = range(shard * 40, shard * 40 + 40)
        examples = [encode_example({"id": i, "x": np.full(i % 7, i, np.float32)}) for i in rows]
        name = f"train.tfrecord-{shard:05d}-of-00003" + (".gz" if shard == 1 else "")
        write_tfrecord(folder / name, examples)
    return str(folder / "train.tfrecord-*")


def _pipeline(pattern, workers):
    source = TFRecordSource(pattern, parse="example")
    ds = chute.MapDataset.source(source).seed(0).shuffle().map(summary).to_iter_dataset()
    return ds.mp_prefetch(num_workers=workers, chunk_size=8).batch(4)


def test_a_shuffled_tfrecord_pipeline_is_exact_and_resumes_with_any_worker_count(
    shards, tmp_path, monkeypatch
):
    monkeypatch.setenv("CHUTE_CACHE_DIR", str(tmp_path / "cache"))  # The GZIP shard's copy.
    run = [{k: v.tolist() for k, v in batch.items()} for batch in _pipeline(shards, 0)]
    ids = [i for batch in run for i in batch["id"]]
    assert sorted(ids) == list(range(120)) and ids != list(range(120))
    assert [t for batch in run for t in batch["total"]] == [float(i * (i % 7)) for i in ids]
    assert_resumes(
        lambda: iter(_pipeline(shards, 2)),
        every=7,
        make_restored=[lambda: iter(_pipeline(shards, 0))],
    )
    assert_resumes(lambda: iter(_pipeline(shards, 0)), every=5)


def test_tfrecord_read_on_three_processes_continues_on_two_then_five(tmp_path):
    path = str(tmp_path / "data.tfrecord")
    write_tfrecord(path, [f"record {i}".encode() for i in range(45)])
    source = chute.TFRecordSource(path)

    def sharded(index, count):
        return (
            chute.MapDataset.source(source).seed(2).shuffle().shard(index, count).to_iter_dataset()
        )

    run = chute.testing.assert_reshards(sharded, 3, [2, 5], seed=5)
    assert run.records == 45
