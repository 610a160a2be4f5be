"""`ReadOptions`' buffer counts elements of what it reads, and is bounded in bytes."""

from __future__ import annotations

import numpy as np
import pytest

import chute


def test_reading_batches_ahead_is_capped_by_the_byte_budget_with_a_warning():
    images = chute.MapDataset.source(np.zeros((512, 64, 64), np.float32))  # 16 KiB each.
    batches = images.batch(128).to_iter_dataset(
        chute.ReadOptions(num_threads=2, prefetch_buffer_size=500, prefetch_buffer_bytes=2**22)
    )
    with pytest.warns(chute.ReadAheadWarning) as caught:
        shapes = [batch.shape for batch in batches]
    assert shapes == [(128, 64, 64)] * 4
    assert [str(w.message) for w in caught] == [
        "ReadOptions: prefetch_buffer_size=500 counts elements of the dataset read (batches "
        "after MapDataset.batch), measured at ~2.0 MiB each, so the read-ahead would hold "
        "~1000.0 MiB, more than prefetch_buffer_bytes=4.0 MiB: reading 2 elements ahead "
        "instead. Pass ReadOptions(prefetch_buffer_size=2) to choose it, or a larger "
        "prefetch_buffer_bytes (None: no bound in bytes)."
    ]
