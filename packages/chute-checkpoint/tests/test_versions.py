"""Format versions and process positions: the checkpoint layer on its own.

Pipelines here come from the layers below (a `SequentialIter`, the execution layer's
`DataLoader`), so these tests run where only chute-checkpoint is installed.
"""

from __future__ import annotations

import sys
import types

from chute_checkpoint import _format, apply_document, make_document, read_document, save
from chute_checkpoint._format import process_position
from chute_execution import DataLoader
from chute_samplers import IndexSampler, NoSharding, SequentialIter
from chute_sources import RangeSource


def _loader() -> DataLoader:
    sampler = IndexSampler(40, shard_options=NoSharding(), shuffle=True, seed=3, num_epochs=1)
    return DataLoader(data_source=RangeSource(40), sampler=sampler, worker_count=0)


def test_a_future_format_version_upgrades_todays_files(tmp_path, monkeypatch):
    it = iter(_loader())
    for _ in range(7):
        next(it)
    path = save(it, tmp_path, process_index=0, process_count=1)
    expected = list(it)

    today = _format.FORMAT_VERSION

    def to_next_version(document):
        return {**document, "version": today + 1, "created_by": "an upgrade"}

    monkeypatch.setattr(_format, "FORMAT_VERSION", today + 1)
    monkeypatch.setitem(_format._UPGRADES, today, to_next_version)
    document = read_document(path)
    assert (document["version"], document["created_by"]) == (today + 1, "an upgrade")
    restored = iter(_loader())
    apply_document(restored, document)
    assert list(restored) == expected


def test_the_process_comes_from_jax_when_it_is_imported(monkeypatch):
    fake = types.SimpleNamespace(process_index=lambda: 3, process_count=lambda: 4)
    monkeypatch.setitem(sys.modules, "jax", fake)
    assert process_position() == (3, 4)
    assert process_position(1, None) == (1, 4)
    it = SequentialIter(range(3))
    assert make_document(it)["process_index"] == 3
    monkeypatch.delitem(sys.modules, "jax")
    assert process_position() == (0, 1)
