"""`ds.select_keys(keys)`: the same elements with any workers, exact resume, in checkpoints."""

from __future__ import annotations

import pytest

import chute
from chute_checkpoint import PipelineMismatchError, apply_document, make_document
from chute_testing import assert_resumes

RECORDS = [{"image": i, "label": i % 3, "path": f"{i}.png"} for i in range(40)]


def _stream(workers, keys=("label", "image")):
    ds = chute.MapDataset.source(RECORDS).seed(1).shuffle().to_iter_dataset().select_keys(keys)
    if workers is not None:
        ds = ds.mp_prefetch(num_workers=workers, chunk_size=4)
    return ds.batch(3)


def _plain(batches):
    return [{key: value.tolist() for key, value in batch.items()} for batch in batches]


def test_the_elements_are_those_of_a_map_and_the_same_with_any_workers():
    expected = _plain(
        chute.MapDataset.source(RECORDS)
        .seed(1)
        .shuffle()
        .map(lambda r: {"label": r["label"], "image": r["image"]})
        .to_iter_dataset()
        .batch(3)
    )
    for workers in (None, 0, 2):
        assert _plain(_stream(workers)) == expected


@pytest.mark.parametrize("workers", [None, 0, 2])
def test_it_resumes_exactly_at_the_start_middle_boundaries_and_end(workers):
    assert_resumes(lambda: iter(_stream(workers)), every=5)


def test_a_map_dataset_selects_by_position_and_shows_the_stage():
    ds = chute.MapDataset.source(RECORDS).select_keys(["path"])
    assert len(ds) == 40 and ds[7] == {"path": "7.png"}
    assert str(ds).splitlines()[-1] == "  .select_keys(keys=['path'])"


def test_the_keys_are_part_of_the_checkpoints_pipeline():
    it = iter(_stream(None))
    next(it)
    document = make_document(it)
    assert {"op": "select_keys", "params": {"keys": ["label", "image"]}} in (
        document["pipeline"]["stages"]
    )
    assert document["traits"]["select_keys"] == {"elementwise": True, "keeps_positions": True}
    with pytest.raises(PipelineMismatchError, match=r"stage 4 \(select_keys\): parameter 'keys'"):
        apply_document(iter(_stream(None, keys=("image",))), document)


def test_bad_keys_are_refused_where_the_pipeline_is_declared():
    stream = chute.MapDataset.source(RECORDS).to_iter_dataset()
    with pytest.raises(chute.ArgumentTypeError, match="keys must be a list of keys"):
        stream.select_keys("label")
    with pytest.raises(TypeError, match=r"IterDataset.select_keys: .*argument"):
        stream.select_keys(["label"], ["image"])
