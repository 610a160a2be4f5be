"""`chute convert`: what each format converts to, and bad inputs refused with one-line errors
(test_cli_convert_again.py runs a conversion again: finished, killed, into other files)."""

import contextlib
import io
import itertools
import json
import os
import shutil
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute_cli import main
from chute_cli._convert import shard_bounds

SHARDS = [f"train-0000{i}-of-00004.array_record" for i in range(4)]


def test_convert_parquet_into_shards_equal_to_the_source_record_for_record(
    read_shards, assert_same_records, run_chute, parquet_file, tmp_path
):
    result = run_chute("convert", parquet_file, tmp_path / "out" / "train", "--shards", "4")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # No progress bar when stderr is not a terminal.
    lines = result.stdout.splitlines()
    assert (
        lines[0]
        == f"chute convert: 2,000 records of {parquet_file} (parquet) -> 4 ArrayRecord shards"
    )
    assert sum("500 records" in line and line.endswith("written") for line in lines) == 4
    assert lines[-1] == (
        "  verified: record count of all 4 shards, and 64 sampled records decoded equal to SRC"
    )
    out = tmp_path / "out"
    assert sorted(os.listdir(out)) == [*SHARDS, "train.chute-convert.json"]
    source = chute.ParquetSource(str(parquet_file))
    assert_same_records(list(source), read_shards(out / name for name in SHARDS))
    assert [len(chute.ArrayRecordSource(str(out / name))) for name in SHARDS] == [500] * 4
    manifest = json.loads((out / "train.chute-convert.json").read_text())
    assert manifest["complete"] is True
    assert manifest["layout"] == {"shard_records": [500] * 4}
    assert sorted(manifest["shards"]) == ["0", "1", "2", "3"]


def test_convert_npy_rows_with_records_per_shard(
    read_shards, assert_same_records, run_chute, tmp_path
):
    data = np.arange(250 * 3, dtype=np.float32).reshape(250, 3)
    np.save(tmp_path / "x.npy", data)
    result = run_chute("convert", tmp_path / "x.npy", tmp_path, "--records-per-shard", "100")
    assert result.returncode == 0, result.stderr
    paths = [tmp_path / f"x-0000{i}-of-00003.array_record" for i in range(3)]
    assert [len(chute.ArrayRecordSource(str(p))) for p in paths] == [100, 100, 50]
    assert_same_records(list(data), read_shards(paths))


def test_convert_npz_gives_dict_records_of_all_arrays(
    read_shards, assert_same_records, run_chute, tmp_path
):
    arrays = {"a": np.arange(40), "b": np.ones((40, 2, 2), np.uint8), "c": np.arange(40.0) / 3}
    np.savez(tmp_path / "d.npz", **arrays)
    result = run_chute("convert", tmp_path / "d.npz", tmp_path / "d")
    assert result.returncode == 0, result.stderr
    expected = [{k: v[i] for k, v in arrays.items()} for i in range(40)]
    assert_same_records(expected, read_shards([tmp_path / "d.array_record"]))


def test_convert_jsonl_skips_blank_lines(read_shards, run_chute, tmp_path):
    objects = [{"i": i, "s": "x" * i, "l": list(range(i % 4)), "f": i / 7} for i in range(30)]
    text = (
        "\n".join(json.dumps(o) for o in objects[:10])
        + "\n\n"
        + "\n".join(json.dumps(o) for o in objects[10:])
    )
    (tmp_path / "r.jsonl").write_text(text)  # No final newline.
    result = run_chute("convert", tmp_path / "r.jsonl", tmp_path / "r", "--shards", "2")
    assert result.returncode == 0, result.stderr
    paths = [tmp_path / f"r-0000{i}-of-00002.array_record" for i in range(2)]
    assert read_shards(paths) == objects


def test_convert_image_folder_stores_encoded_bytes_and_class_labels(
    read_shards, run_chute, image_folder, tmp_path
):
    result = run_chute("convert", image_folder, tmp_path / "img")
    assert result.returncode == 0, result.stderr
    assert "  labels: 0=cat, 1=dog, 2=eel" in result.stdout.splitlines()
    records = read_shards([tmp_path / "img.array_record"])
    expected_paths = [
        "cat/0.png",
        "cat/1.png",
        "cat/sub/2.png",
        "dog/0.png",
        "dog/1.png",
        "eel/0.png",
    ]
    assert [r["path"] for r in records] == expected_paths
    assert [r["label"] for r in records] == [0, 0, 0, 1, 1, 2]
    for record in records:
        assert record["image"] == (image_folder / record["path"]).read_bytes()


def test_convert_a_save_to_disk_folder_gives_every_row_of_load_from_disk(
    read_shards, assert_same_records, run_chute, tmp_path
):
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    columns = {
        "text": [f"doc {i} " + "é" * (i % 4) for i in range(2500)],
        "id": [None if i % 11 == 0 else i for i in range(2500)],
        "tokens": [list(range(i % 6)) for i in range(2500)],
        "score": [i / 9 for i in range(2500)],
    }
    saved = tmp_path / "saved"
    datasets.Dataset.from_dict(columns).save_to_disk(str(saved), num_shards=3)
    result = run_chute("convert", saved, tmp_path / "out", "--shards", "4")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"chute convert: 2,500 records of {saved} (huggingface) -> 4 ArrayRecord shards"
    )
    assert lines[-1] == (
        "  verified: record count of all 4 shards, and 64 sampled records decoded equal to SRC"
    )
    paths = [tmp_path / f"out-0000{i}-of-00004.array_record" for i in range(4)]
    expected = datasets.load_from_disk(str(saved))
    assert_same_records([expected[i] for i in range(2500)], read_shards(paths))
    manifest = json.loads((tmp_path / "out.chute-convert.json").read_text())
    assert manifest["source"]["format"] == "huggingface"
    rerun = run_chute("convert", saved, tmp_path / "out", "--shards", "4")
    assert rerun.returncode == 0, rerun.stderr
    assert sum(line.endswith("kept (finished before)") for line in rerun.stdout.splitlines()) == 4


def test_convert_a_dataset_dict_folder_asks_for_one_split(read_shards, run_chute, tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    splits = {"train": {"x": [1, 2, 3]}, "test": {"x": [4]}}
    datasets.DatasetDict(
        {name: datasets.Dataset.from_dict(data) for name, data in splits.items()}
    ).save_to_disk(str(tmp_path / "dd"))
    result = run_chute("convert", "dd", "out", cwd=tmp_path)
    assert _error(result) == (
        2,
        "chute convert: error: 'dd' holds a DatasetDict with the splits train, test; pass "
        "the folder of one split, e.g. 'dd/train'\n",
    )
    result = run_chute("convert", "dd/test", "test", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert read_shards([tmp_path / "test.array_record"]) == [{"x": 4}]


def test_a_folder_without_state_json_given_as_huggingface_is_a_data_error(run_chute, tmp_path):
    (tmp_path / "empty").mkdir()
    result = run_chute("convert", "empty", "out", "--format", "huggingface", cwd=tmp_path)
    assert _error(result) == (
        1,
        f"chute convert: error: cannot read 'empty' as a datasets save_to_disk folder: "
        f"HuggingFaceDiskSource: '{tmp_path / 'empty'}' is not a folder written by "
        "Dataset.save_to_disk: it has no state.json (such a folder holds state.json, "
        "dataset_info.json and data-*.arrow files).\n",
    )


def _error(result):
    return result.returncode, result.stderr


def test_missing_source_is_a_usage_error(run_chute, tmp_path):
    result = run_chute("convert", "nothere.parquet", "out", cwd=tmp_path)
    assert _error(result) == (
        2,
        f"chute convert: error: 'nothere.parquet' does not exist (working directory "
        f"'{tmp_path}')\n",
    )
    assert result.stdout == ""


def test_unknown_format_is_a_usage_error(run_chute, tmp_path):
    (tmp_path / "a.csv").write_text("a,b\n1,2\n")
    result = run_chute("convert", "a.csv", "out", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(
        "chute convert: error: unknown format of 'a.csv' (suffix '.csv')"
    )
    assert result.stderr.count("\n") == 1
    bad_choice = run_chute("convert", "a.csv", "out", "--format", "csv", cwd=tmp_path)
    assert bad_choice.returncode == 2
    assert "argument --format: invalid choice: 'csv'" in bad_choice.stderr


def test_corrupt_parquet_is_a_data_error(run_chute, tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not parquet")
    result = run_chute("convert", "bad.parquet", "out", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("chute convert: error: cannot read 'bad.parquet' as parquet: ")
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_invalid_json_line_is_a_data_error_naming_the_line(run_chute, tmp_path):
    (tmp_path / "r.jsonl").write_text('{"a": 1}\n{"a": 2}\n{"a": \n')
    result = run_chute("convert", "r.jsonl", "out", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("chute convert: error: 'r.jsonl' line 3 is not valid JSON: ")
    assert not os.path.exists(tmp_path / "out.array_record")


def test_a_json_line_nested_too_deeply_is_a_data_error_naming_the_line(tmp_path):
    # json.loads raises RecursionError here, which is no ValueError (found by fuzzing);
    # chute-sources' test_json_lines.py checks the source's own error.
    deep = b"[" * 100_000 + b"]" * 100_000
    (tmp_path / "r.jsonl").write_bytes(b'{"a": 1}\n' + deep + b"\n")
    with contextlib.redirect_stderr(io.StringIO()) as stderr:
        code = main(["convert", str(tmp_path / "r.jsonl"), str(tmp_path / "out"), "-q"])
    assert code == 1
    assert "line 2 nests arrays or objects too deeply" in stderr.getvalue()


def test_a_symbolic_link_loop_in_an_image_folder_is_a_data_error(image_folder, tmp_path, capsys):
    # os.walk(followlinks=True) would list the images again and again, under the wrong
    # class, until the path no longer resolves (found by fuzzing). chute-sources'
    # test_image_folder.py checks the source's own error for every kind of loop.
    (image_folder / "cat" / "sub" / "loop").symlink_to(image_folder)
    assert main(["inspect", str(image_folder)]) == 1
    assert capsys.readouterr().err == (
        f"chute inspect: error: '{image_folder / 'cat' / 'sub' / 'loop'}' is a symbolic link "
        f"to '{image_folder}', which holds it: following it would loop; remove the link or "
        "point it elsewhere\n"
    )


def test_corrupt_image_is_a_data_error(run_chute, image_folder, tmp_path):
    (image_folder / "dog" / "9.png").write_bytes(b"GIF89a not a png")
    result = run_chute("convert", image_folder, tmp_path / "img")
    assert _error(result) == (
        1,
        f"chute convert: error: '{image_folder / 'dog' / '9.png'}' is not a PNG or JPEG image "
        "(it starts with b'GIF89a n')\n",
    )


def test_unencodable_record_is_a_data_error(run_chute, tmp_path):
    np.save(tmp_path / "o.npy", np.zeros((3, 2), dtype=[("a", "i4"), ("b", "f4")]))
    result = run_chute("convert", tmp_path / "o.npy", tmp_path / "o")
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"chute convert: error: record 0 of '{tmp_path / 'o.npy'}' cannot be stored: "
    )


def _permissions_apply():
    """A command prefix under which file permissions apply, also to root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root ignores file permissions, and setpriv is missing to drop that")
    # Root without these capabilities is refused like any other user.
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps=-all"]


@pytest.mark.parametrize("kind", ["npy", "jsonl", "parquet", "image class folder"])
def test_unreadable_input_is_a_data_error_saying_permission_denied(
    run_chute, tmp_path, image_folder, kind
):
    if kind == "image class folder":
        src, denied = image_folder, image_folder / "dog"
    else:
        src = denied = tmp_path / f"data.{kind}"
        if kind == "npy":
            np.save(src, np.arange(10))
        elif kind == "jsonl":
            src.write_text('{"a": 1}\n')
        else:
            pq.write_table(pa.table({"a": [1, 2]}), src)
    denied.chmod(0)
    try:
        result = run_chute("convert", src, tmp_path / "out", prefix=_permissions_apply())
    finally:
        denied.chmod(0o755)
    assert _error(result) == (
        1,
        f"chute convert: error: cannot read '{src}': permission denied for '{denied}'; give "
        "the user running chute read access to it (see its owner and mode with ls -l)\n",
    )
    assert result.stdout == ""
    assert not os.path.exists(tmp_path / "out.chute-convert.json")


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--shards", "0"], "--shards must be at least 1, got 0"),
        (["--records-per-shard", "-1"], "--records-per-shard must be at least 1, got -1"),
        (["--shards", "6"], "--shards 6 is more than the 5 records of 'x.npy'"),
    ],
)
def test_bad_shard_options_are_usage_errors(tmp_path, capsys, monkeypatch, option, message):
    np.save(tmp_path / "x.npy", np.arange(5))
    monkeypatch.chdir(tmp_path)
    assert main(["convert", "x.npy", "out", *option]) == 2
    assert capsys.readouterr().err == f"chute convert: error: {message}\n"


@given(
    total=st.integers(1, 10_000),
    shards=st.one_of(st.none(), st.integers(1, 50)),
    per=st.integers(1, 5000),
)
def test_shard_bounds_are_consecutive_and_cover_every_record(total, shards, per):
    shards = None if shards is None else min(shards, total)
    bounds = shard_bounds(total, shards=shards, records_per_shard=per)
    assert bounds[0][0] == 0
    assert bounds[-1][1] == total
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    sizes = [stop - start for start, stop in bounds]
    if shards is not None:
        assert len(bounds) == shards
        assert max(sizes) - min(sizes) <= 1
    else:
        assert all(size == per for size in sizes[:-1])
        assert 1 <= sizes[-1] <= per


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=15, deadline=None)
@given(objects=st.lists(_VALUES, min_size=1, max_size=30), shards=st.integers(1, 4))
def test_jsonl_conversion_gives_back_every_object(assert_same_records, objects, shards):
    shards = min(shards, len(objects))
    with tempfile.TemporaryDirectory() as folder:
        src = os.path.join(folder, "r.jsonl")
        with open(src, "w") as file:
            file.writelines(json.dumps(o) + "\n" for o in objects)
        dst = os.path.join(folder, "out", "r")
        assert main(["convert", src, dst, "--shards", str(shards), "--quiet"]) == 0
        written = list(chute.ArrayRecordSource(os.path.join(folder, "out", "*.array_record")))
        expected = [json.loads(json.dumps(o)) for o in objects]
        assert_same_records(expected, written)


def test_png_helper_makes_a_png(png_bytes):
    assert png_bytes(2, 2, 0).startswith(b"\x89PNG")


def test_a_convert_manifest_nested_too_deeply_is_a_usage_error(tmp_path):
    from chute_cli._common import CliError
    from chute_cli._manifest import load_manifest

    path = tmp_path / "manifest.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CliError, match=r"^cannot read the manifest .* pass --overwrite$"):
        load_manifest(str(path))
