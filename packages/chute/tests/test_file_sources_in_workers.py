"""JSON Lines and image-folder sources in pipelines: worker processes read what this one does."""

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
