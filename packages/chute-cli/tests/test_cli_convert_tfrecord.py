"""`chute convert` of TFRecord files: to ArrayRecord and back to the very same bytes."""

import contextlib
import io
import os

import numpy as np

import chute
from chute_cli import main
from chute_sources import TFRecordSource, encode_example, parse_example, write_tfrecord


def _records(count, seed):
    rng = np.random.default_rng(seed)
    return [
        encode_example({"id": i, "pixels": rng.integers(0, 255, i % 9), "text": f"row {i}"})
        for i in range(count)
    ]


def test_tfrecord_to_array_record_and_back_gives_the_same_files(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUTE_CACHE_DIR", str(tmp_path / "cache"))  # The GZIP file's copy.
    first, second = _records(70, 0), _records(45, 1)
    os.makedirs(tmp_path / "in")
    write_tfrecord(tmp_path / "in" / "train.tfrecord-00000-of-00002", first)
    write_tfrecord(tmp_path / "in" / "train.tfrecord-00001-of-00002.gz", second)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(
            ["convert", str(tmp_path / "in"), str(tmp_path / "ar" / "train"), "-q", "--shards", "3"]
        )
    assert code == 0
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("(tfrecord) -> 3 ArrayRecord shards")
    shards = sorted(str(path) for path in (tmp_path / "ar").glob("*.array_record"))
    converted = chute.ArrayRecordSource(shards)
    assert list(converted) == first + second  # Bytes in, bytes out.
    write_tfrecord(tmp_path / "back.tfrecord", converted.__getitems__(range(70)))
    write_tfrecord(tmp_path / "back.tfrecord.gz", converted.__getitems__(range(70, 115)))
    original = tmp_path / "in" / "train.tfrecord-00000-of-00002"
    assert (tmp_path / "back.tfrecord").read_bytes() == original.read_bytes()
    assert list(TFRecordSource(tmp_path / "back.tfrecord.gz")) == second
    assert parse_example(converted[114])["text"] == [b"row 44"]
    # The command line writes them back too: the first 70 records make the same file.
    pattern = str(tmp_path / "ar" / "train-*.array_record")
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(["convert", pattern, str(tmp_path / "cli" / "back"), "-q", "--to", "tfrecord"])
    assert code == 0 and out.getvalue().splitlines()[0].endswith("-> 1 TFRecord shard")
    assert list(TFRecordSource(tmp_path / "cli" / "back.tfrecord")) == first + second
    with contextlib.redirect_stdout(io.StringIO()):
        args = [str(original), str(tmp_path / "cli" / "same"), "-q", "--to", "tfrecord"]
        assert main(["convert", *args]) == 0
    assert (tmp_path / "cli" / "same.tfrecord").read_bytes() == original.read_bytes()


def test_dict_records_become_tf_train_examples(tmp_path, capsys):
    rows = [{"id": i, "score": i / 4, "name": f"n{i}", "vec": np.arange(i)} for i in range(6)]
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(f'{{"id": {r["id"]}, "name": "{r["name"]}"}}\n' for r in rows))
    with contextlib.redirect_stdout(io.StringIO()):
        args = [str(source), str(tmp_path / "out" / "rows"), "--shards", "2", "-q"]
        assert main(["convert", *args, "--to", "tfrecord"]) == 0
    shards = sorted(str(p) for p in (tmp_path / "out").glob("rows-*.tfrecord"))
    assert [os.path.basename(p) for p in shards] == [
        "rows-00000-of-00002.tfrecord",
        "rows-00001-of-00002.tfrecord",
    ]
    examples = list(TFRecordSource(shards, parse="example"))
    assert [(int(e["id"][0]), e["name"]) for e in examples] == [
        (i, [f"n{i}".encode()]) for i in range(6)
    ]
    numbers = tmp_path / "numbers.npy"
    np.save(numbers, np.arange(4))
    assert main(["convert", str(numbers), str(tmp_path / "bad"), "-q", "--to", "tfrecord"]) == 1
    error = capsys.readouterr().err
    assert "record 0 of" in error
    assert "--to tfrecord writes bytes records as they are and dicts as tf.train.Example" in error


def test_inspect_names_the_format_and_convert_refuses_a_corrupt_file(tmp_path, capsys):
    path = tmp_path / "data.tfrecord"
    write_tfrecord(path, _records(5, 2))
    assert main(["inspect", str(path)]) == 0
    assert "(tfrecord)" in capsys.readouterr().out
    data = bytearray(path.read_bytes())
    data[8] ^= 1  # The first length's CRC.
    path.write_bytes(bytes(data))
    assert main(["convert", str(path), str(tmp_path / "out"), "-q"]) == 1
    error = capsys.readouterr().err
    assert f"cannot read {str(path)!r} as tfrecord: TFRecord file {str(path)!r} is corrupt" in error
    assert "the length of record 0 (at byte 0)" in error
