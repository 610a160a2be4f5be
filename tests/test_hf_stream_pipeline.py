"""A Hugging Face stream behind chute's shuffle and worker processes resumes exactly.

`HuggingFaceStreamSource` reads the local Parquet / JSON Lines files behind
`datasets.load_dataset(..., streaming=True)` by position, so a shuffled pipeline's
checkpoint is a position, not a shuffle buffer: restored anywhere, with 0 or 2 worker
processes, it continues with exactly the rest of the epoch.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import chute


@pytest.fixture(scope="module")
def hf() -> Any:
    return pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def streams(hf: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same 60 rows as a Parquet stream (2 files) and a JSON Lines stream (2 files)."""
    folder = tmp_path_factory.mktemp("hf-streams")
    rows = [{"id": i, "text": f"row {i}", "label": i % 4} for i in range(60)]
    parquet, lines = [], []
    for number, part in enumerate((rows[:25], rows[25:])):
        path = folder / f"part-{number}.parquet"
        pq.write_table(pa.Table.from_pylist(part), path, row_group_size=8)
        parquet.append(str(path))
        path = folder / f"part-{number}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in part))
        lines.append(str(path))
    load = hf.load_dataset
    return {
        "parquet": load("parquet", data_files=parquet, split="train", streaming=True),
        "json": load("json", data_files=lines, split="train", streaming=True),
    }


def key(row: dict[str, Any]) -> tuple[int, str, int]:
    return row["id"], row["text"], row["label"]


def pipeline(source: chute.HuggingFaceStreamSource, workers: int) -> Any:
    dataset = chute.MapDataset.source(source).seed(0).shuffle().map(key)
    options = chute.MultiprocessingOptions(num_workers=workers)
    return dataset.to_iter_dataset().mp_prefetch(options, chunk_size=4)


@pytest.mark.parametrize("form", ["parquet", "json"])
def test_two_workers_resume_exactly(streams: dict[str, Any], form: str) -> None:
    source = chute.HuggingFaceStreamSource(streams[form])
    elements = chute.testing.assert_resumes(
        lambda: iter(pipeline(source, 2)),
        every=7,
        make_restored=[lambda: iter(pipeline(source, 0))],
    )
    expected = [key(row) for row in streams[form]]
    assert sorted(elements) == sorted(expected)
    assert elements != expected  # Shuffled.


def test_restored_mid_epoch_a_shuffled_stream_gives_exactly_the_rest(
    streams: dict[str, Any],
) -> None:
    # What a shuffle buffer cannot promise on resume: nothing lost, nothing repeated.
    source = chute.HuggingFaceStreamSource(streams["parquet"])
    dataset = chute.MapDataset.source(source).seed(3).shuffle().map(key).to_iter_dataset()
    full = list(dataset)
    iterator = iter(dataset)
    seen = [next(iterator) for _ in range(23)]
    state = json.loads(json.dumps(iterator.get_state()))
    restored = iter(dataset)
    restored.set_state(state)
    rest = list(restored)
    assert seen + rest == full
    assert sorted(seen + rest) == sorted(key(row) for row in streams["parquet"])


@pytest.mark.parametrize("form", ["parquet", "json"])
def test_a_stream_read_on_three_processes_continues_on_two_then_five(
    streams: dict[str, Any], form: str
) -> None:
    source = chute.HuggingFaceStreamSource(streams[form])

    def sharded(index: int, count: int) -> Any:
        ds = chute.MapDataset.source(source).seed(0).shuffle().shard(index, count)
        return ds.to_iter_dataset().map(key)

    run = chute.testing.assert_reshards(sharded, 3, [2, 5], seed=4)
    assert run.records == 60
