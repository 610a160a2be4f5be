"""Text in, packed token rows out: tokenize in workers, pack, batch; exact at every position."""

from __future__ import annotations

import json

import numpy as np
import pytest

import chute
from chute_testing import assert_resumes, assert_trees_equal

tokenizers = pytest.importorskip("tokenizers")  # An extra: `chute-transforms[text]`.

TEXTS = [
    " ".join(f"w{(i * 7 + j) % 23}" for j in range(int(n)))
    for i, n in enumerate(np.random.default_rng(3).integers(1, 40, 60))
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The texts as JSON Lines, and a word-level tokenizer file of their 23 words."""
    folder = tmp_path_factory.mktemp("text")
    path = folder / "texts.jsonl"
    path.write_text("".join(json.dumps({"text": t, "id": i}) + "\n" for i, t in enumerate(TEXTS)))
    vocab = {"<eos>": 0, "<unk>": 1, **{f"w{k}": k + 2 for k in range(23)}}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return str(path), str(folder / "tokenizer.json")


def _texts(corpus, workers, method="best_fit"):
    path, tokenizer = corpus
    ds = (
        chute.MapDataset.source(chute.JsonLinesSource(path))
        .seed(5)
        .shuffle()
        .to_iter_dataset()
        .map(chute.Tokenize(tokenizer, eos_id=0))
        .map(lambda record: {"text": record["text"]})
    )
    if workers is not None:
        ds = ds.mp_prefetch(num_workers=workers, chunk_size=8)
    return ds.pack(48, method=method).batch(2)


def _expected_ids(text):
    return [int(word[1:]) + 2 for word in text.split()] + [0]


def test_every_token_of_every_text_is_in_the_rows_once_in_order(corpus):
    rows = [row for batch in _texts(corpus, None) for row in _rows(batch)]
    segments = []
    for row in rows:
        ids = row["text_segment_ids"]
        for number in range(1, int(ids.max()) + 1):
            where = ids == number
            assert row["text_positions"][where].tolist() == list(range(int(where.sum())))
            segments.append(row["text"][where].tolist())
    assert sorted(segments) == sorted(_expected_ids(t) for t in TEXTS)


def _rows(batch):
    return [{key: value[i] for key, value in batch.items()} for i in range(len(batch["text"]))]


@pytest.mark.parametrize("method", ["best_fit", "concat_split"])
def test_packed_batches_are_the_same_with_0_and_2_workers(corpus, method):
    expected = list(_texts(corpus, None, method))
    for workers in (0, 2):
        got = list(_texts(corpus, workers, method))
        assert len(got) == len(expected)
        for batch, wanted in zip(got, expected, strict=True):
            assert_trees_equal(batch, wanted)


def test_resume_is_exact_at_every_position_with_0_and_2_workers(corpus):
    expected = list(_texts(corpus, None))
    assert_resumes(
        lambda: iter(_texts(corpus, 2)),
        every=1,
        make_restored=[lambda: iter(_texts(corpus, 0))],
        expected=expected,
    )


def _rows_of(source, tokenizer):
    ds = (
        chute.MapDataset.source(source)
        .seed(5)
        .shuffle()
        .to_iter_dataset()
        .map(chute.Tokenize(tokenizer, eos_id=0))
        .map(lambda record: {"text": record["text"]})
        .mp_prefetch(num_workers=2, chunk_size=8)
    )
    return list(ds.pack(48, method="best_fit").batch(2))


def test_parquet_and_saved_hugging_face_text_give_the_rows_of_json_lines(corpus, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    datasets = pytest.importorskip("datasets")
    _, tokenizer = corpus
    expected = list(_texts(corpus, None))
    table = pa.table({"text": TEXTS, "id": list(range(len(TEXTS)))})
    pq.write_table(table, tmp_path / "texts.parquet", row_group_size=16)
    datasets.Dataset.from_dict({"text": TEXTS}).save_to_disk(str(tmp_path / "hf"), num_shards=3)
    sources = {
        "parquet": chute.ParquetSource(str(tmp_path / "texts.parquet")),
        "save_to_disk": chute.HuggingFaceDiskSource(str(tmp_path / "hf"), columns=["text"]),
    }
    for name, source in sources.items():
        got = _rows_of(source, tokenizer)
        assert len(got) == len(expected), name
        for batch, wanted in zip(got, expected, strict=True):
            assert_trees_equal(batch, wanted)
