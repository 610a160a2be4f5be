"""Describing a source costs O(1) in its size: its elements are never `repr`-ed."""

from __future__ import annotations

import chute
from chute_checkpoint import describe_pipeline, fingerprint


class _Record:
    """An element whose `repr` counts its calls (a 10,000-element list must not call it)."""

    calls = 0

    def __init__(self, value: int) -> None:
        self.value = value

    def __repr__(self) -> str:
        _Record.calls += 1
        raise AssertionError("an element's repr was computed")


def test_source_of_a_long_list_is_described_without_repr_of_its_elements() -> None:
    records = [_Record(i) for i in range(10_000)]
    ds = chute.MapDataset.source(records).map(lambda r: r.value)
    assert repr(ds) == (
        "MapDataset\n  source(SequenceSource(type='list', len=10000))\n  .map(fn=<lambda>)"
    )
    assert ds[9_999] == 9_999
    assert _Record.calls == 0


def test_two_long_lists_of_numbers_keep_different_fingerprints() -> None:
    first = iter(chute.MapDataset.source(list(range(1_000))).to_iter_dataset())
    second = iter(chute.MapDataset.source(list(range(1, 1_001))).to_iter_dataset())
    assert fingerprint(describe_pipeline(first)) != fingerprint(describe_pipeline(second))
