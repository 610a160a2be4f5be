"""`HuggingFaceStreamSource` against streams made by the real `datasets` package.

Every test builds local Parquet or JSON Lines files, loads them with
`datasets.load_dataset(..., streaming=True)` and compares the source with iterating
that `IterableDataset` itself. Skipped where `datasets` is not installed.
"""

from __future__ import annotations

import gzip
import io
import json
import pickle
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chute_core import CorruptRecordError, InvalidArgumentError, SourceFileNotFoundError
from chute_sources import HuggingFaceStreamSource

OWNER = "HuggingFaceStreamSource"


@pytest.fixture(scope="module")
def hf() -> Any:
    return pytest.importorskip("datasets")


def _rows(start: int, count: int) -> dict[str, list[Any]]:
    ids = range(start, start + count)
    return {
        "text": [f"row {i} é{'x' * (i % 5)}" for i in ids],
        "label": [i % 3 for i in ids],
        "score": [None if i % 11 == 4 else i / 8 for i in ids],
        "tokens": [list(range(i % 6)) for i in ids],
    }


@pytest.fixture(scope="module")
def parquet_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """250 rows in 3 files of several row groups each."""
    folder = tmp_path_factory.mktemp("hf-parquet")
    paths = []
    for number, (start, count) in enumerate([(0, 100), (100, 70), (170, 80)]):
        path = str(folder / f"part-{number}.parquet")
        pq.write_table(pa.table(_rows(start, count)), path, row_group_size=30)
        paths.append(path)
    return paths


def _json_line(i: int) -> str:
    row: dict[str, Any] = {"id": i, "text": f"line {i}"}
    row["score"] = i if i % 2 else i + 0.5  # Integers in a float column become floats.
    if i % 4:  # A missing key becomes None; so does a missing nested key.
        row["meta"] = {"a": i} if i % 3 else {"a": i, "b": "x"}
    return json.dumps(row)


@pytest.fixture(scope="module")
def json_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """90 rows in 2 JSON Lines files, with blank lines and a CRLF line end."""
    folder = tmp_path_factory.mktemp("hf-json")
    first, second = folder / "a.jsonl", folder / "b.jsonl"
    first.write_text("\n".join(_json_line(i) for i in range(50)) + "\n\n", encoding="utf-8")
    lines = [_json_line(i) for i in range(50, 90)]
    second.write_bytes(("\r\n".join(lines[:3]) + "\n\n" + "\n".join(lines[3:])).encode())
    return [str(first), str(second)]


def _load(hf: Any, kind: str, files: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("split", "train")
    return hf.load_dataset(kind, data_files=files, streaming=True, **kwargs)


def _all(source: HuggingFaceStreamSource) -> list[Any]:
    return source.__getitems__(range(len(source)))


def test_parquet_rows_equal_the_stream_in_order(hf: Any, parquet_files: list[str]) -> None:
    stream = _load(hf, "parquet", parquet_files)
    source = HuggingFaceStreamSource(stream)
    expected = list(stream)
    assert len(source) == len(expected) == 250
    assert _all(source) == expected
    assert [source[i] for i in range(len(source))] == expected
    assert source.__getitems__([249, 0, 130]) == [expected[249], expected[0], expected[130]]
    assert source.format == "parquet"
    assert source.files == tuple(parquet_files)
    assert source.file_records == (100, 70, 80)
    assert source.columns == ("text", "label", "score", "tokens")
    assert source.split == "train"


def test_json_lines_rows_equal_the_stream_in_order(hf: Any, json_files: list[str]) -> None:
    stream = _load(hf, "json", json_files)
    source = HuggingFaceStreamSource(stream)
    expected = list(stream)
    assert len(source) == len(expected) == 90
    assert _all(source) == expected
    assert [source[i] for i in range(90)] == expected
    assert source.__getitems__([89, 3, 50]) == [expected[89], expected[3], expected[50]]
    assert expected[1]["score"] == 1.0 and isinstance(expected[1]["score"], float)
    assert expected[0]["meta"] is None and expected[1]["meta"] == {"a": 1, "b": None}
    assert source.format == "json"
    assert source.file_records == (50, 40)


def test_a_dict_of_streams_needs_a_split(hf: Any, parquet_files: list[str]) -> None:
    streams = _load(
        hf, "parquet", {"train": parquet_files[:2], "test": parquet_files[2]}, split=None
    )
    with pytest.raises(InvalidArgumentError) as raised:
        HuggingFaceStreamSource(streams)
    assert str(raised.value) == (
        f"{OWNER}: the IterableDatasetDict holds the splits ['train', 'test']; choose one "
        f"with split=, e.g. {OWNER}(dataset, split='train') (or pass split= to load_dataset)."
    )
    test = HuggingFaceStreamSource(streams, split="test")
    assert test.split == "test"
    assert _all(test) == list(streams["test"])
    with pytest.raises(InvalidArgumentError, match=re.escape("has no split 'valid'; its splits")):
        HuggingFaceStreamSource(streams, split="valid")


def test_a_split_for_a_single_stream_is_refused(hf: Any, parquet_files: list[str]) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        HuggingFaceStreamSource(_load(hf, "parquet", parquet_files), split="test")
    assert str(raised.value) == (
        f"{OWNER}: split='test' was given, but the dataset is one IterableDataset (split "
        "'train'), not an IterableDatasetDict; leave split=None."
    )


def test_features_type_the_rows_as_datasets_does(hf: Any, parquet_files: list[str]) -> None:
    features = hf.Features(
        {
            "text": hf.Value("string"),
            "label": hf.ClassLabel(names=["a", "b", "c"]),
            "score": hf.Value("float32"),
            "tokens": hf.List(hf.Value("int32")),
        }
    )
    stream = _load(hf, "parquet", parquet_files, features=features)
    expected = list(stream)
    assert _all(HuggingFaceStreamSource(stream)) == expected
    assert isinstance(expected[0]["label"], int)


def test_select_columns_is_kept(hf: Any, parquet_files: list[str], json_files: list[str]) -> None:
    for stream in (
        _load(hf, "parquet", parquet_files).select_columns(["tokens", "text"]),
        _load(hf, "json", json_files).select_columns(["text", "id"]),
    ):
        source = HuggingFaceStreamSource(stream)
        assert _all(source) == list(stream)
        assert list(source[0]) == list(next(iter(stream)))


def test_a_pickled_copy_reads_the_same(
    hf: Any, parquet_files: list[str], json_files: list[str]
) -> None:
    for stream in (_load(hf, "parquet", parquet_files), _load(hf, "json", json_files)):
        source = HuggingFaceStreamSource(stream)
        copy = pickle.loads(pickle.dumps(source))
        assert _all(copy) == _all(source)
        assert repr(copy) == repr(source)
        copy.close()


def test_repr_names_the_format_files_and_rows(hf: Any, json_files: list[str]) -> None:
    source = HuggingFaceStreamSource(_load(hf, "json", json_files))
    assert repr(source) == (
        f"{OWNER}(format='json', files={json_files!r}, split='train', "
        "columns=['id', 'text', 'score', 'meta'], num_rows=90)"
    )


def _refusal(operation: str, chute_op: str, name: str = "") -> str:
    where = f" ({name})" if name else ""
    return (
        f"{OWNER}: the dataset has {operation} applied on the Hugging Face side{where}, "
        f"which chute does not replay{' exactly' if name else ''}; load the files without it "
        f"and apply the chute op instead: chute.MapDataset.source(source){chute_op}."
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda s: s.shuffle(seed=0, buffer_size=10),
            _refusal(
                ".shuffle(buffer_size=...)",
                ".seed(...).shuffle() (a global shuffle whose checkpoint is exact)",
                "BufferShuffledExamplesIterable",
            ),
        ),
        (
            lambda s: s.map(lambda row: row),
            _refusal(
                ".map() (also .remove_columns(), .rename_column(), .cast(), .add_column())",
                ".map(...)",
                "MappedExamplesIterable",
            ),
        ),
        (
            lambda s: s.filter(lambda row: True),
            _refusal(".filter()", ".filter(...)", "FilteredExamplesIterable"),
        ),
        (
            lambda s: s.skip(3),
            _refusal(".skip(n)", ".slice(slice(n, None))", "SkipExamplesIterable"),
        ),
        (
            lambda s: s.take(3),
            _refusal(".take(n)", ".slice(slice(None, n)) or .limit(n)", "TakeExamplesIterable"),
        ),
        (
            lambda s: s.with_format("numpy"),
            _refusal(".with_format('numpy')", ".batch(...) for arrays"),
        ),
    ],
    ids=["shuffle", "map", "filter", "skip", "take", "with_format"],
)
def test_operations_applied_by_datasets_are_refused(
    hf: Any, parquet_files: list[str], change: Any, message: str
) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        HuggingFaceStreamSource(change(_load(hf, "parquet", parquet_files)))
    assert str(raised.value) == message


def test_other_inputs_are_refused(hf: Any, parquet_files: list[str], tmp_path: Path) -> None:
    with pytest.raises(TypeError) as raised:
        HuggingFaceStreamSource([1, 2])
    assert str(raised.value) == (
        f"{OWNER}: expected a datasets.IterableDataset, as load_dataset(..., streaming=True) "
        "returns, or an IterableDatasetDict; got list."
    )
    with pytest.raises(TypeError, match=re.escape("got a Dataset (not streaming); read a")):
        HuggingFaceStreamSource(hf.Dataset.from_dict({"x": [1]}))
    csv = tmp_path / "rows.csv"
    csv.write_text("x,y\n1,2\n")
    with pytest.raises(InvalidArgumentError) as raised:
        HuggingFaceStreamSource(_load(hf, "csv", str(csv)))
    assert str(raised.value) == (
        f"{OWNER}: the dataset reads 'csv' files; chute reads Hugging Face streams of "
        "Parquet and JSON Lines files (load_dataset('parquet' or 'json', data_files=..., "
        "streaming=True)). Convert the files, or use the chute source of the format "
        "(e.g. TFRecordSource, WebDatasetSource)."
    )
    with pytest.raises(InvalidArgumentError) as raised:
        HuggingFaceStreamSource(_load(hf, "parquet", parquet_files, filters=[("label", "==", 1)]))
    assert str(raised.value) == (
        f"{OWNER}: load_dataset was given filters=[('label', '==', 1)], which chute does not "
        "replay; load the files without filters and apply "
        "chute.MapDataset.source(source).filter(...) instead."
    )


def test_files_not_on_local_disk_are_refused(hf: Any, parquet_files: list[str]) -> None:
    stream = _load(hf, "parquet", parquet_files[0])
    hub = "hf://datasets/someone/data@main/train.parquet"
    stream._ex_iterable.kwargs = {"files": [hub], "row_groups_list": [None]}  # A Hub stream.
    with pytest.raises(InvalidArgumentError) as raised:
        HuggingFaceStreamSource(stream)
    assert str(raised.value) == (
        f"{OWNER}: the data file {hub!r} is not a local file; chute reads Hugging Face "
        "streams of local files only (the Hub is not read). Download the files (e.g. "
        "huggingface_hub.snapshot_download) and call load_dataset(..., data_files=<local "
        "files>, streaming=True), or read files in buckets with ParquetSource or "
        "JsonLinesSource."
    )
    missing = parquet_files[0] + ".gone"
    stream._ex_iterable.kwargs = {"files": [missing], "row_groups_list": [None]}
    with pytest.raises(SourceFileNotFoundError, match=re.escape(f"{missing!r} does not exist")):
        HuggingFaceStreamSource(stream)


def test_compressed_and_array_json_files_are_refused(hf: Any, tmp_path: Path) -> None:
    packed = tmp_path / "rows.jsonl.gz"
    packed.write_bytes(gzip.compress(b'{"x": 1}\n'))
    with pytest.raises(InvalidArgumentError) as raised:
        HuggingFaceStreamSource(_load(hf, "json", str(packed)))
    assert str(raised.value) == (
        f"{OWNER}: the data file {str(packed)!r} is compressed or an archive, which chute "
        "does not read by position; decompress it first."
    )
    array = tmp_path / "rows.json"
    array.write_text('[{"x": 1}, {"x": 2}]')
    with pytest.raises(InvalidArgumentError) as raised:
        HuggingFaceStreamSource(_load(hf, "json", str(array)))
    assert str(raised.value) == (  # datasets infers no features for a JSON array.
        f"{OWNER}: the data set does not know its features (datasets could not infer them "
        "from the first rows), so chute cannot type the rows as datasets would; pass "
        "features=datasets.Features({...}) to load_dataset."
    )
    features = hf.Features({"x": hf.Value("int64")})
    with pytest.raises(InvalidArgumentError) as raised:
        HuggingFaceStreamSource(_load(hf, "json", str(array), features=features))
    assert str(raised.value) == (
        f"{OWNER}: {str(array)!r} holds a JSON array, not JSON Lines (one object a line); "
        "chute reads JSON Lines files. Write one object a line."
    )


def test_a_line_that_does_not_parse_names_its_file_and_line(hf: Any, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"x": 1}\n{"x": 2}\n\n{"x": oops}\n')
    # datasets infers the features from the first block, which holds the bad line too;
    # give them, as a stream whose bad line is far into the file would have them.
    stream = _load(hf, "json", str(path), features=hf.Features({"x": hf.Value("int64")}))
    source = HuggingFaceStreamSource(stream)
    assert source.__getitems__([1, 0]) == [{"x": 2}, {"x": 1}]
    with pytest.raises(CorruptRecordError, match=re.escape(f"{str(path)!r} line 4 does not parse")):
        source.__getitems__([0, 2])


def test_features_that_datasets_decodes_are_decoded(hf: Any, tmp_path: Path) -> None:
    image = pytest.importorskip("PIL.Image")
    pictures = []
    for size in (3, 5):
        buffer = io.BytesIO()
        image.new("RGB", (size, 2), (size, 0, 0)).save(buffer, format="PNG")
        pictures.append({"bytes": buffer.getvalue(), "path": None})
    features = hf.Features({"image": hf.Image(), "label": hf.Value("int64")})
    path = str(tmp_path / "images.parquet")
    hf.Dataset.from_dict({"image": pictures, "label": [0, 1]}, features=features).to_parquet(path)
    stream = _load(hf, "parquet", path)
    source = HuggingFaceStreamSource(pickle.loads(pickle.dumps(stream)))
    ours, theirs = source.__getitems__([1, 0]), list(stream)[::-1]
    assert [row["image"].size for row in ours] == [row["image"].size for row in theirs]
    assert [row["image"].tobytes() for row in ours] == [row["image"].tobytes() for row in theirs]
    assert [row["label"] for row in ours] == [1, 0]
    copy = pickle.loads(pickle.dumps(source))
    assert copy[0]["image"].size == (3, 2)
