"""`chute convert` and `chute inspect` with s3:// inputs and outputs (a local moto server)."""

import io
import json
import uuid

import numpy as np
import pytest

import chute
from chute_cli import main
from chute_cli._common import first_difference
from chute_sources import delete_object, list_objects, object_info, read_object, write_object

PETS = [{"name": name, "legs": legs} for name, legs in [("cat", 4), ("eel", 0), ("ant", 6)]]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUTE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def bucket(s3):
    return s3.create_bucket(f"cli-{uuid.uuid4().hex[:16]}")


def _jsonl(records):
    return "".join(json.dumps(record) + "\n" for record in records).encode()


def _npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _run(capsys, *args):
    code = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _assert_same(expected, actual):
    assert len(expected) == len(actual)
    for index, (a, b) in enumerate(zip(expected, actual, strict=True)):
        assert first_difference(a, b) is None, (index, first_difference(a, b))


def test_convert_jsonl_objects_into_shards_in_the_bucket(s3, bucket, capsys):
    parts = [[{"part": p, "i": i} for i in range(7 + p)] for p in range(3)]
    for number, part in enumerate(parts):
        s3.put(bucket, f"raw/part-{number}.jsonl", _jsonl(part))
    src, dst = f"s3://{bucket}/raw/*.jsonl", f"s3://{bucket}/out/train"
    code, out, err = _run(capsys, "convert", src, dst, "--shards", "4", "-q")
    assert code == 0, err
    shards = [f"{dst}-0000{i}-of-00004.array_record" for i in range(4)]
    listed = [info.url for info in list_objects(f"s3://{bucket}/out/")]
    assert listed == [*shards, f"{dst}.chute-convert.json"]
    assert (
        out.splitlines()[0] == f"chute convert: 24 records of {src} (jsonl) -> 4 ArrayRecord shards"
    )
    _assert_same([r for part in parts for r in part], list(chute.ArrayRecordSource(shards)))
    manifest = json.loads(read_object(f"{dst}.chute-convert.json"))
    assert manifest["complete"] is True
    assert manifest["source"]["path"] == src
    assert [manifest["shards"][str(i)]["bytes"] for i in range(4)] == [
        object_info(shard).size for shard in shards
    ]
    code, out, err = _run(capsys, "convert", src, dst, "--shards", "4", "-q")  # Once more.
    assert code == 0, err
    assert "resumed: 4 finished shards kept, 0 written" in out


def test_a_rerun_writes_only_the_shards_missing_from_the_bucket(s3, bucket, capsys):
    url = s3.put(bucket, "x.npy", _npy(np.arange(40).reshape(20, 2)))
    dst = f"s3://{bucket}/out/"
    assert _run(capsys, "convert", url, dst, "--shards", "2", "-q")[0] == 0
    shard = f"s3://{bucket}/out/x-00001-of-00002.array_record"
    s3.put(bucket, "out/x-00001-of-00002.array_record", b"damaged")
    code, out, err = _run(capsys, "convert", url, dst, "--shards", "2", "-q")
    assert code == 0, err
    assert "resumed: 1 finished shard kept, 1 written" in out
    _assert_same(list(np.arange(40).reshape(20, 2)), list(chute.ArrayRecordSource(dst)))
    assert object_info(shard).size > len(b"damaged")


def test_convert_a_npy_object_to_local_shards_equals_converting_the_file(
    s3, bucket, tmp_path, capsys
):
    array = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", array)
    url = s3.put(bucket, "x.npy", (tmp_path / "x.npy").read_bytes())
    assert _run(capsys, "convert", url, tmp_path / "a", "--shards", "3", "-q")[0] == 0
    assert (
        _run(capsys, "convert", tmp_path / "x.npy", tmp_path / "b", "--shards", "3", "-q")[0] == 0
    )
    from_url = list(chute.ArrayRecordSource(str(tmp_path / "a-*.array_record")))
    _assert_same(list(chute.ArrayRecordSource(str(tmp_path / "b-*.array_record"))), from_url)
    _assert_same(list(array), from_url)


def test_inspect_objects_folders_and_patterns(s3, bucket, capsys):
    s3.put(bucket, "pets.jsonl", _jsonl(PETS))
    url = s3.put(bucket, "a.npy", _npy(np.zeros((5, 2), np.int16)))
    code, out, err = _run(capsys, "inspect", f"s3://{bucket}/pets.jsonl", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["num_records"] == 3 and report["format"] == "jsonl"
    assert report["files"] == [
        {"path": f"s3://{bucket}/pets.jsonl", "bytes": len(_jsonl(PETS)), "records": 3}
    ]
    code, out, err = _run(capsys, "inspect", url, "--records", "1")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:2] == [f"chute inspect: {url} (npy)", "records: 5 in 1 file"]
    assert lines[2].split() == [url, "5", "records", str(object_info(url).size), "bytes"]
    dst = f"s3://{bucket}/ar/d"
    assert _run(capsys, "convert", f"s3://{bucket}/pets.jsonl", dst, "--shards", "2", "-q")[0] == 0
    for path in (f"s3://{bucket}/ar/", f"s3://{bucket}/ar/d-*"):
        code, out, err = _run(capsys, "inspect", path, "--json")
        assert code == 0, err
        report = json.loads(out)
        assert report["format"] == "array_record"  # The manifest is not a shard.
        assert [f["records"] for f in report["files"]] == [1, 2]
        assert report["records"] == [repr(PETS[0]), repr(PETS[1]), repr(PETS[2])]


def test_missing_objects_and_buckets_are_usage_errors_naming_them(bucket, capsys):
    code, _, err = _run(capsys, "inspect", f"s3://{bucket}/nothing.jsonl")
    assert code == 2 and f"s3://{bucket}/nothing.jsonl does not exist" in err
    code, _, err = _run(capsys, "inspect", f"s3://{bucket}/nothing/")
    assert code == 2 and "does not exist" in err
    code, _, err = _run(capsys, "inspect", "s3://no-such-bucket-u1/x.npy")
    assert code == 2 and "the bucket 'no-such-bucket-u1'" in err
    code, _, err = _run(capsys, "inspect", f"s3://{bucket}/*.jsonl")
    assert code == 2 and "matches no object" in err


def test_a_missing_output_bucket_is_named_before_reading(s3, bucket, capsys):
    url = s3.put(bucket, "x.npy", _npy(np.arange(4)))
    code, _, err = _run(capsys, "convert", url, "s3://no-such-bucket-u2/out/x")
    assert code == 2 and "the bucket 'no-such-bucket-u2'" in err


def test_formats_only_read_locally_say_so(s3, bucket, capsys):
    buffer = io.BytesIO()
    np.savez(buffer, x=np.arange(3))
    url = s3.put(bucket, "a.npz", buffer.getvalue())
    code, _, err = _run(capsys, "inspect", url)
    assert code == 1 and "is a .npz archive" in err and "download" in err
    s3.put(bucket, "imgs/cat/0.png", b"png")
    for args in ([f"s3://{bucket}/imgs/"], [f"s3://{bucket}/imgs/", "--format", "images"]):
        code, _, err = _run(capsys, "inspect", *args)
        assert code == 2 and "local folders only" in err and "download" in err


def test_existing_shards_without_a_manifest_are_not_overwritten(s3, bucket, capsys):
    url = s3.put(bucket, "x.npy", _npy(np.arange(4)))
    s3.put(bucket, "out/x.array_record", b"someone else's")
    code, _, err = _run(capsys, "convert", url, f"s3://{bucket}/out/")
    assert code == 2 and f"s3://{bucket}/out/x.array_record' already exists" in err
    code, _, err = _run(capsys, "convert", url, f"s3://{bucket}/out/", "--overwrite", "-q")
    assert code == 0, err
    written = chute.ArrayRecordSource(f"s3://{bucket}/out/x.array_record")
    assert [int(x) for x in written] == [0, 1, 2, 3]


def test_the_command_line_itself_converts_between_buckets(s3, bucket, run_chute):
    s3.put(bucket, "pets.jsonl", _jsonl(PETS))
    result = run_chute("convert", f"s3://{bucket}/pets.jsonl", f"s3://{bucket}/o/pets")
    assert result.returncode == 0, result.stderr
    assert list(chute.ArrayRecordSource(f"s3://{bucket}/o/pets.array_record")) == PETS
    result = run_chute("inspect", f"s3://{bucket}/o/pets.array_record")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == "records: 3 in 1 file"


def test_convert_and_inspect_a_parquet_folder_in_the_bucket(s3, bucket, capsys, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    for number in range(2):
        path = tmp_path / f"part-{number}.parquet"
        rows = range(number * 20, number * 20 + 20)
        pq.write_table(
            pa.table({"i": list(rows), "w": [f"w{i}" for i in rows]}), path, row_group_size=6
        )
        s3.put(bucket, f"table/part-{number}.parquet", path.read_bytes())
    code, out, err = _run(capsys, "inspect", f"s3://{bucket}/table/")
    assert code == 0, err
    assert "records: 40 in 2 files" in out
    dst = f"s3://{bucket}/shards/t"
    code, out, err = _run(capsys, "convert", f"s3://{bucket}/table/", dst, "--shards", "2", "-q")
    assert code == 0, err
    converted = chute.ArrayRecordSource(f"s3://{bucket}/shards/")
    assert sorted(record["i"] for record in converted) == list(range(40))


def test_inspect_refuses_shards_in_a_bucket_whose_manifest_says_unfinished(s3, bucket, capsys):
    url = s3.put(bucket, "x.npy", _npy(np.arange(30)))
    dst = f"s3://{bucket}/out/x"
    assert _run(capsys, "convert", url, dst, "--shards", "3", "-q")[0] == 0
    manifest = json.loads(read_object(dst + ".chute-convert.json"))  # As a kill leaves it:
    del manifest["shards"]["2"]
    manifest["complete"] = False
    write_object(dst + ".chute-convert.json", json.dumps(manifest).encode())
    delete_object(f"{dst}-00002-of-00003.array_record")
    said = (
        f"its manifest '{dst}.chute-convert.json' says the conversion is not complete: 2 of "
        "3 shards written (20 of 30 records)"
    )
    code, out, err = _run(capsys, "inspect", f"s3://{bucket}/out/")
    assert (code, out) == (1, "")
    assert f"chute convert: {said}. Finish it by running the same chute convert" in err
    code, out, err = _run(capsys, "inspect", f"s3://{bucket}/out/", "--allow-incomplete")
    assert code == 0, err
    assert err.endswith(f"(--allow-incomplete): {said}\n")
    assert out.splitlines()[1] == "records: 20 in 2 files (incomplete: an unfinished chute convert)"
    # ArrayRecordSource checks local shards only: objects cost no request more to open.
    assert len(chute.ArrayRecordSource(f"s3://{bucket}/out/")) == 20
