import json
import os

import numpy as np
import pytest

import chute
from chute_cli._schema import infer_schema


@pytest.fixture
def shards(tmp_path):
    records = [
        {"tokens": np.arange(i % 3 + 1, dtype=np.int32), "label": i % 10, "meta": {"id": f"r{i}"}}
        for i in range(30)
    ]
    return chute.write_array_record(records, tmp_path / "data" / "train", num_shards=3)


def test_inspect_array_record_folder_shows_files_schema_and_first_records(
    run_chute, shards, tmp_path
):
    result = run_chute("inspect", "data", "--records", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["chute inspect: data (array_record)", "records: 30 in 3 files"]
    for number, line in enumerate(lines[2:5]):
        name, count, _, size, _ = line.split()
        assert name == f"data/train-0000{number}-of-00003.array_record"
        assert count == "10"
        assert int(size.replace(",", "")) == os.path.getsize(shards[number])
    assert lines[5:] == [
        "schema (from 30 records spread over the data set):",
        "  field    type     dtype  shape",
        "  tokens   ndarray  int32  varies: (1,), (2,), (3,)",
        "  label    int",
        "  meta.id  str",
        "first 2 records:",
        "  [0] {'tokens': array([0], dtype=int32), 'label': 0, 'meta': {'id': 'r0'}}",
        "  [1] {'tokens': array([0, 1], dtype=int32), 'label': 1, 'meta': {'id': 'r1'}}",
    ]


def test_inspect_json_of_a_glob(run_chute, shards, tmp_path):
    result = run_chute("inspect", "data/train-*.array_record", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["format"] == "array_record"
    assert report["num_records"] == 30
    assert [f["records"] for f in report["files"]] == [10, 10, 10]
    assert [f["path"] for f in report["files"]] == shards
    assert report["schema"]["tokens"] == {
        "type": "ndarray",
        "dtype": "int32",
        "shape": "varies",
        "shapes": [[1], [2], [3]],
    }
    assert report["schema"]["label"] == {"type": "int"}
    assert len(report["records"]) == 3


def test_inspect_parquet_and_numpy_inputs(run_chute, parquet_file, tmp_path):
    report = json.loads(run_chute("inspect", parquet_file, "--json").stdout)
    assert report["format"] == "parquet"
    assert report["num_records"] == 2000
    assert report["schema"]["maybe"]["type"] == "None | float"
    assert report["schema"]["vec"]["shape"] == "varies"
    np.savez(tmp_path / "d.npz", x=np.zeros((7, 2, 3), np.float16), y=np.arange(7))
    report = json.loads(run_chute("inspect", tmp_path / "d.npz", "--json").stdout)
    assert report["format"] == "npz"
    assert report["num_records"] == 7
    assert report["schema"] == {
        "x": {"type": "ndarray", "dtype": "float16", "shape": [2, 3]},
        "y": {"type": "numpy scalar", "dtype": "int64"},
    }


def test_inspect_a_save_to_disk_folder(run_chute, tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    data = {"text": ["a", "bb", "ccc"], "tokens": [[1], [2, 3], []], "label": [0, 1, 0]}
    datasets.Dataset.from_dict(data).save_to_disk(str(tmp_path / "saved"), num_shards=2)
    report = json.loads(run_chute("inspect", tmp_path / "saved", "--json").stdout)
    assert report["format"] == "huggingface"
    assert report["num_records"] == 3
    assert [(os.path.basename(f["path"]), f["records"]) for f in report["files"]] == [
        ("data-00000-of-00002.arrow", 2),
        ("data-00001-of-00002.arrow", 1),
    ]
    assert report["schema"] == {
        "text": {"type": "str"},
        "tokens": {"type": "list", "shape": "varies", "shapes": [[1], [2], [0]]},
        "label": {"type": "int"},
    }
    assert report["records"] == [
        "{'text': 'a', 'tokens': [1], 'label': 0}",
        "{'text': 'bb', 'tokens': [2, 3], 'label': 1}",
        "{'text': 'ccc', 'tokens': [], 'label': 0}",
    ]


def test_inspect_missing_path_is_a_usage_error(run_chute, tmp_path):
    result = run_chute("inspect", "no/such.array_record", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (
        2,
        f"chute inspect: error: 'no/such.array_record' does not exist (working directory "
        f"'{tmp_path}')\n",
    )
    result = run_chute("inspect", "no/*.array_record", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("chute inspect: error: the pattern 'no/*.array_record' matches")


def test_inspect_unknown_format_is_a_usage_error(run_chute, tmp_path):
    (tmp_path / "x.avro").write_bytes(b"...")
    result = run_chute("inspect", "x.avro", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(
        "chute inspect: error: unknown format of 'x.avro' (suffix '.avro')"
    )


def test_inspect_corrupt_array_record_is_a_data_error(run_chute, shards, tmp_path):
    with open(shards[1], "r+b") as file:
        file.truncate(100)
    result = run_chute("inspect", "data", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("chute inspect: error: cannot read 'data' as ArrayRecord: ")
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_inspect_corrupt_record_is_a_data_error(run_chute, tmp_path):
    good = chute.encode_record({"x": np.arange(4)})
    chute.write_array_record([good, good[:20]], tmp_path / "r", encode=False)
    result = run_chute("inspect", "r.array_record", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("chute inspect: error: cannot read records 0..1 of ")
    assert "corrupt chute record" in result.stderr or "truncated" in result.stderr


def test_infer_schema_names_every_type_seen_and_missing_fields():
    schema = infer_schema([{"a": 1, "b": "x"}, {"a": None}, {"a": np.float32(2)}])
    assert schema == {
        "a": {"type": "int | None | numpy scalar", "dtype": "float32"},
        "b": {"type": "str | missing"},
    }
    assert infer_schema([b"raw", b"bytes"]) == {"(record)": {"type": "bytes"}}


def _zeros_npz(path, rows, row_bytes):
    """A compressed .npz of zeros, `rows` x `row_bytes` (written in pieces: little memory)."""
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, shape, dtype in [("image", (rows, row_bytes), "|u1"), ("label", (rows,), "<i8")]:
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                header = {"descr": dtype, "fortran_order": False, "shape": shape}
                np.lib.format.write_array_header_1_0(member, header)
                left = int(np.prod(shape)) * np.dtype(dtype).itemsize
                while left:
                    member.write(bytes(min(left, 2**22)))
                    left -= min(left, 2**22)


_PEAK_RSS = """
import resource, subprocess, sys
done = subprocess.run([sys.executable, "-m", "chute_cli", *sys.argv[1:]], capture_output=True)
assert done.returncode == 0, done.stderr
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)  # KiB, the one child's peak.
"""


def _peak_rss_kib(*args):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_inspect_of_a_large_compressed_npz_decompresses_only_its_first_rows(run_chute, tmp_path):
    _zeros_npz(tmp_path / "big.npz", rows=100_000, row_bytes=4096)  # 410 MB of data.
    _zeros_npz(tmp_path / "small.npz", rows=10, row_bytes=4096)
    assert (tmp_path / "big.npz").stat().st_size < 2_000_000
    result = run_chute("inspect", tmp_path / "big.npz", "--records", "1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "records: 100,000 in 1 file"
    assert lines[3:6] == [
        "schema (from the first 100 rows of the arrays):",
        "  field  type          dtype  shape",
        "  image  ndarray       uint8  (4096,)",
    ]
    assert lines[-1] == (
        "  [0] {'image': array(shape=(4096,), dtype=uint8, [0, 0, 0, 0, ...]), "
        "'label': np.int64(0)}"
    )
    big = _peak_rss_kib("inspect", tmp_path / "big.npz")
    small = _peak_rss_kib("inspect", tmp_path / "small.npz")
    assert big - small < 64 * 1024, (big, small)  # Well below the 410 MB the arrays hold.
