"""`chute convert` and WebDataset: tar shards in, tar shards out (`--to webdataset`).

WebDataset -> ArrayRecord -> WebDataset gives back the same samples, in order, keys and
fields byte for byte (only `__url__`, the shard a sample was read from, differs).
"""

import json
import os

import pytest

import chute
from chute_sources import WebDatasetSource, write_webdataset


def without_url(samples):
    return [{k: v for k, v in s.items() if k != "__url__"} for s in samples]


@pytest.fixture
def shards(tmp_path):
    samples = [
        {
            "__key__": f"train/{i:05d}",
            "jpg": os.urandom(50 + 13 * i),
            "cls": i % 5,
            "meta.json": {"i": i, "tags": ["a", "b"][: i % 3]},
        }
        for i in range(37)
    ]
    folder = tmp_path / "wds"
    return write_webdataset(samples, str(folder / "shard-%03d.tar"), max_count=10)


def test_webdataset_round_trips_through_array_record(run_chute, shards, tmp_path):
    original = list(WebDatasetSource(shards))
    first = run_chute("convert", tmp_path / "wds", tmp_path / "ar" / "train", "--shards", "3")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[0] == (
        f"chute convert: 37 records of {tmp_path / 'wds'} (webdataset) -> 3 ArrayRecord shards"
    )
    records = list(chute.ArrayRecordSource(str(tmp_path / "ar" / "train-*.array_record")))
    assert records == original  # The samples as they were read, __url__ included.

    second = run_chute(
        "convert",
        str(tmp_path / "ar" / "train-*.array_record"),
        tmp_path / "back" / "train",
        "--records-per-shard",
        "16",
        "--to",
        "webdataset",
    )
    assert second.returncode == 0, second.stderr
    lines = second.stdout.splitlines()
    assert lines[0].endswith("(array_record) -> 3 WebDataset shards")
    assert lines[-1] == (
        "  verified: record count of all 3 shards, and 37 sampled records decoded equal to SRC"
    )
    names = [f"train-0000{i}-of-00003.tar" for i in range(3)]
    assert sorted(os.listdir(tmp_path / "back")) == [*names, "train.chute-convert.json"]
    back = WebDatasetSource(str(tmp_path / "back" / "train-{00000..00002}-of-00003.tar"))
    assert back.shard_samples == (16, 16, 5)
    assert without_url(back) == without_url(original)
    manifest = json.loads((tmp_path / "back" / "train.chute-convert.json").read_text())
    assert manifest["complete"] is True
    assert manifest["layout"] == {"shard_records": [16, 16, 5], "to": "webdataset"}

    again = run_chute(  # Run again: every shard is finished, checked and kept.
        "convert",
        str(tmp_path / "ar" / "train-*.array_record"),
        tmp_path / "back" / "train",
        "--records-per-shard",
        "16",
        "--to",
        "webdataset",
    )
    assert again.returncode == 0, again.stderr
    assert "resumed: 3 finished shards kept, 0 written" in again.stdout


def test_webdataset_straight_to_webdataset_and_other_records(run_chute, shards, tmp_path):
    result = run_chute(
        "convert",
        str(tmp_path / "wds" / "shard-*.tar"),
        tmp_path / "one",
        "--to",
        "webdataset",
        "--shards",
        "1",
    )
    assert result.returncode == 0, result.stderr
    assert without_url(WebDatasetSource(str(tmp_path / "one.tar"))) == without_url(
        WebDatasetSource(shards)
    )
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"name": "cat", "legs": 4}\n{"name": "eel", "legs": 0}\n')
    result = run_chute("convert", rows, tmp_path / "pets", "--to", "webdataset", "--shards", "1")
    assert result.returncode == 0, result.stderr
    assert without_url(WebDatasetSource(str(tmp_path / "pets.tar"), decode={"legs": int})) == [
        {"__key__": "000000000", "name": b"cat", "legs": 4},
        {"__key__": "000000001", "name": b"eel", "legs": 0},
    ]
    lists = tmp_path / "lists.jsonl"
    lists.write_text("[1, 2]\n")
    result = run_chute("convert", lists, tmp_path / "bad", "--to", "webdataset")
    assert result.returncode == 1
    assert "record 0 of" in result.stderr and "--to webdataset writes records that are dicts" in (
        result.stderr
    )


def test_a_broken_shard_is_a_one_line_data_error(run_chute, tmp_path):
    (tmp_path / "broken.tar").write_bytes(b"not a tar file at all" * 40)
    result = run_chute("convert", tmp_path / "broken.tar", tmp_path / "out")
    assert result.returncode == 1
    assert "is not a tar file: no valid tar header at byte 0" in result.stderr
    assert result.stderr.count("\n") == 1
