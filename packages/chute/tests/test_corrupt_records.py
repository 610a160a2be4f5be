"""A corrupt record's error names the file, its index there, the stage and the position.

Two ArrayRecord shards of 8 chute records; record key 10 (record 2 of the second shard)
is 4 bytes of junk. Reading it fails the same way by key, by batch of keys and while
iterating, on 0 workers, on read threads and on worker processes.
"""

from __future__ import annotations

import pytest
from array_record.python.array_record_module import ArrayRecordWriter

import chute
from chute_sources import encode_record


@pytest.fixture
def junk_paths(tmp_path):
    paths = []
    for shard in range(2):
        path = str(tmp_path / f"j-{shard}.array_record")
        writer = ArrayRecordWriter(path, "group_size:1")
        for index in range(8):
            key = shard * 8 + index
            writer.write(b"junk" if key == 10 else encode_record({"x": key}))
        writer.close()
        paths.append(path)
    return paths


@pytest.mark.parametrize(
    "make",
    [
        lambda ds: ds.to_iter_dataset(),
        lambda ds: ds.to_iter_dataset(chute.ReadOptions(num_threads=2, prefetch_buffer_size=4)),
        lambda ds: ds.to_iter_dataset().mp_prefetch(
            chute.MultiprocessingOptions(num_workers=2), chunk_size=3
        ),
    ],
    ids=["0 workers", "read threads", "2 workers"],
)
def test_iterating_past_a_corrupt_record_names_file_index_stage_and_position(junk_paths, make):
    source = chute.ArrayRecordSource(junk_paths, decode=True)
    it = iter(make(chute.MapDataset.source(source)))
    assert [next(it)["x"] for _ in range(10)] == list(range(10))
    with pytest.raises(chute.CorruptRecordError) as caught:
        next(it)
    assert str(caught.value).endswith(
        f"; in record 2 of the ArrayRecord file {junk_paths[1]!r} (record key 10 of the source)"
    )
    assert "chute: raised by reading ArrayRecordSource on the element at position 10" in (
        caught.value.__notes__
    )
