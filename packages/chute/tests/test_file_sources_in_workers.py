"""File sources in pipelines (JSON Lines, image folders, save_to_disk folders): worker
processes read what this one does."""

import json
import os

import pytest

import chute
import chute_sources

WORKERS = chute.MultiprocessingOptions(num_workers=2)


@pytest.fixture
def json_lines(tmp_path):
    path = tmp_path / "records.jsonl"
    lines = [json.dumps({"id": i, "text": f"line {i}", "x": [i, i / 2]}) for i in range(50)]
    path.write_text("\n".join(lines[:20]) + "\n\n" + "\n".join(lines[20:]) + "\n")
    return path


@pytest.fixture
def image_folder(tmp_path, png_bytes):  # png_bytes: see conftest.py
    root = tmp_path / "images"
    for label, name in enumerate(["cat", "dog", "eel"]):
        (root / name).mkdir(parents=True)
        for i in range(4 + label):
            (root / name / f"{i}.png").write_bytes(png_bytes(2 + i, 2, 10 * label + i))
    return root


def _summary(record):
    return record["path"], record["label"], len(record["image"])


def test_the_meta_package_exports_the_sources():
    assert chute.JsonLinesSource is chute_sources.JsonLinesSource
    assert chute.ImageFolderSource is chute_sources.ImageFolderSource
    assert chute.HuggingFaceDiskSource is chute_sources.HuggingFaceDiskSource


def test_json_lines_through_workers_give_the_source_s_records(json_lines):
    source = chute.JsonLinesSource(json_lines)
    expected = [{"id": i, "text": f"line {i}", "x": [i, i / 2]} for i in range(50)]
    assert list(source) == expected
    ds = chute.MapDataset.source(source)
    assert list(ds.to_iter_dataset().mp_prefetch(WORKERS)) == expected
    shuffled = ds.shuffle(seed=7).map(lambda record: record["id"]).to_iter_dataset()
    in_workers = list(shuffled.mp_prefetch(WORKERS))
    assert in_workers == list(shuffled)
    assert sorted(in_workers) == list(range(50))
    readers = ds.map(lambda record: os.getpid()).to_iter_dataset().mp_prefetch(WORKERS)
    assert os.getpid() not in set(readers)  # The records were read in the workers.


def test_image_folder_through_workers_gives_the_source_s_records(image_folder):
    source = chute.ImageFolderSource(image_folder)
    expected = [
        {"image": (image_folder / path).read_bytes(), "label": label, "path": path}
        for path, label in source.samples
    ]
    assert len(expected) == 15
    ds = chute.MapDataset.source(source)
    assert list(ds.to_iter_dataset().mp_prefetch(WORKERS)) == expected
    shuffled = ds.shuffle(seed=3).map(_summary).to_iter_dataset()
    assert list(shuffled.mp_prefetch(WORKERS)) == list(shuffled)


@pytest.fixture
def saved_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    columns = {
        "text": [f"document {i}" for i in range(3000)],
        "tokens": [list(range(i % 5)) for i in range(3000)],
        "id": list(range(3000)),
    }
    path = tmp_path / "saved"
    datasets.Dataset.from_dict(columns).save_to_disk(str(path), num_shards=3)
    return path, datasets.load_from_disk(str(path))


def test_save_to_disk_folder_through_workers_gives_load_from_disk_rows(saved_dataset):
    path, expected = saved_dataset
    source = chute.HuggingFaceDiskSource(path)
    rows = [expected[i] for i in range(len(expected))]
    ds = chute.MapDataset.source(source)
    assert list(ds) == rows
    assert list(ds.to_iter_dataset().mp_prefetch(WORKERS)) == rows
    shuffled = ds.shuffle(seed=5).map(lambda row: (row["id"], len(row["tokens"]))).batch(64)
    one_process = [(ids.tolist(), sizes.tolist()) for ids, sizes in shuffled.to_iter_dataset()]
    in_workers = [
        (ids.tolist(), sizes.tolist())
        for ids, sizes in shuffled.to_iter_dataset().mp_prefetch(WORKERS)
    ]
    assert in_workers == one_process
    assert sorted(i for ids, _ in in_workers for i in ids) == list(range(3000))
    readers = ds.map(lambda row: os.getpid()).to_iter_dataset().mp_prefetch(WORKERS)
    assert os.getpid() not in set(readers)  # The rows were read in the workers.


def test_text_column_of_a_save_to_disk_folder_in_workers(saved_dataset):
    path, expected = saved_dataset
    source = chute.HuggingFaceDiskSource(path, columns=["text"])
    texts = chute.MapDataset.source(source).map(lambda row: row["text"]).to_iter_dataset()
    assert list(texts.mp_prefetch(WORKERS)) == expected["text"]
