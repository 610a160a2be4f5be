"""Credentials never leave memory: not in checkpoints, descriptions, reprs, traces, stats.

A pipeline reads four formats from the loopback S3 server with explicit keys and a
session token; everything chute writes or shows about it is searched for them. The
fingerprint keeps what identifies the data (the objects' URLs, sizes and ETags), so a
checkpoint restores after the temporary credentials rotate, and not after an object
is replaced.
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import chute
from chute_checkpoint import PipelineMismatchError, describe_pipeline, restore, save

SECRET = "chute-testing-secret"  # The loopback server's secret key (its env).
TOKEN = "FwoGZXIvYXdzEJr-session-token-0123456789"
FORMATS = ["array_record", "parquet", "npy", "jsonl"]


@pytest.fixture(scope="module")
def bucket(loopback_s3, tmp_path_factory):
    folder = tmp_path_factory.mktemp("credentials")
    paths = chute.write_array_record(
        [{"i": i} for i in range(40)], str(folder / "rec"), num_shards=2
    )
    pq.write_table(pa.table({"i": np.arange(40)}), folder / "rows.parquet", row_group_size=8)
    np.save(folder / "rows.npy", np.arange(40))
    (folder / "rows.jsonl").write_text("".join(json.dumps({"i": i}) + "\n" for i in range(40)))
    loopback_s3.create_bucket("credentials")
    files = [*paths, *(str(folder / f"rows.{kind}") for kind in ("parquet", "npy", "jsonl"))]
    for path in files:
        loopback_s3.put_file("credentials", os.path.basename(path), path)
    return loopback_s3


def _options(server, tmp_path, token=TOKEN):
    env = server.env
    return chute.StorageOptions(
        endpoint=server.endpoint,
        region=env["AWS_REGION"],
        access_key_id=env["AWS_ACCESS_KEY_ID"],
        secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        session_token=token,
        cache_dir=str(tmp_path / f"cache-{token[-4:]}"),
    )


def _source(kind, options):
    url = {
        "array_record": "s3://credentials/rec-*",
        "parquet": "s3://credentials/rows.parquet",
        "npy": "s3://credentials/rows.npy",
        "jsonl": "s3://credentials/rows.jsonl",
    }[kind]
    maker = {
        "array_record": chute.ArrayRecordSource,
        "parquet": chute.ParquetSource,
        "npy": chute.NumpySource,
        "jsonl": chute.JsonLinesSource,
    }[kind]
    return maker(url, storage_options=options)


def _dataset(kind, options):
    return chute.MapDataset.source(_source(kind, options)).seed(3).shuffle().to_iter_dataset()


def _leaks(text, server):
    words = (SECRET, TOKEN, server.env["AWS_ACCESS_KEY_ID"])
    return [word for word in words if word in text]


def test_storage_options_repr_shows_no_credentials():
    options = chute.StorageOptions(
        access_key_id="AKIAEXAMPLEKEYID", secret_access_key=SECRET, session_token=TOKEN
    )
    shown = repr(options) + str(options)
    assert SECRET not in shown and TOKEN not in shown and "AKIAEXAMPLEKEYID" not in shown
    assert "max_attempts=6" in shown  # The rest is still shown.


@pytest.mark.parametrize("kind", FORMATS)
def test_checkpoints_descriptions_traces_and_stats_hold_no_credentials(bucket, tmp_path, kind):
    options = _options(bucket, tmp_path)
    ds = _dataset(kind, options)
    trace = tmp_path / "trace.json"
    it = ds.iter(stats=True, trace=str(trace))
    head = [next(it) for _ in range(5)]
    assert len(head) == 5
    written = save(it, tmp_path / "checkpoint")
    shown = {
        "checkpoint file": written.read_text(),
        "describe_pipeline": json.dumps(describe_pipeline(it)),
        "repr of the dataset": repr(ds) + str(ds),
        "repr of the source": repr(_source(kind, options)),
        "stats": str(it.stats()),
    }
    it.close()
    shown["trace"] = trace.read_text()
    assert {where: _leaks(text, bucket) for where, text in shown.items()} == {
        where: [] for where in shown
    }
    # What identifies the data is there: the objects' URLs and versions.
    document = json.loads(shown["checkpoint file"])
    assert "s3://credentials/" in json.dumps(document["pipeline"])
    assert '"version"' in json.dumps(document["pipeline"])


@pytest.mark.parametrize("kind", FORMATS)
def test_a_checkpoint_restores_after_the_credentials_rotate(bucket, tmp_path, kind):
    before = _options(bucket, tmp_path)
    expected = list(_dataset(kind, before))
    it = iter(_dataset(kind, before))
    head = [next(it) for _ in range(13)]
    save(it, tmp_path / "checkpoint")
    # New temporary credentials, another cache folder, other retry settings.
    rotated = dataclasses.replace(
        _options(bucket, tmp_path, token="IQoJb3JpZ2luX2VjEAYa-rotated-9876"), max_attempts=3
    )
    resumed = restore(iter(_dataset(kind, rotated)), tmp_path / "checkpoint")
    assert head + list(resumed) == expected


def test_a_checkpoint_does_not_restore_over_a_replaced_object(loopback_s3, tmp_path):
    loopback_s3.create_bucket("replaced")
    first = chute.write_array_record([{"i": i} for i in range(20)], str(tmp_path / "a"))
    loopback_s3.put_file("replaced", "rec.array_record", first[0])
    options = _options(loopback_s3, tmp_path)
    ds = chute.MapDataset.source(
        chute.ArrayRecordSource("s3://replaced/rec.array_record", storage_options=options)
    ).to_iter_dataset()
    it = iter(ds)
    next(it)
    save(it, tmp_path / "checkpoint")
    # The same name and size, other records: another version (ETag) of the object.
    other = chute.write_array_record([{"i": -i} for i in range(20)], str(tmp_path / "b"))
    assert os.path.getsize(other[0]) == os.path.getsize(first[0])
    loopback_s3.put_file("replaced", "rec.array_record", other[0])
    replaced = chute.MapDataset.source(
        chute.ArrayRecordSource("s3://replaced/rec.array_record", storage_options=options)
    ).to_iter_dataset()
    with pytest.raises(PipelineMismatchError, match=r"stage 0 \(source\): .* at \S*version"):
        restore(iter(replaced), tmp_path / "checkpoint")
