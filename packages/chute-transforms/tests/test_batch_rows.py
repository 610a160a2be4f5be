"""`BatchMap(rows=...)`: one host's rows of every global batch."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chute_core import DROPPED
from chute_transforms import BatchMap


@given(
    length=st.integers(1, 60),
    per_part=st.integers(1, 5),
    parts=st.integers(1, 4),
    mode=st.sampled_from(["drop", "pad", "plain"]),
)
def test_parts_put_together_are_the_whole_batches(length, per_part, parts, mode):
    size = per_part * parts
    options = {"drop_remainder": mode == "drop", "pad": mode == "pad"}
    whole = list(BatchMap(range(length), size, **options))
    pieces = [
        BatchMap(range(length), size, rows=(p * per_part, (p + 1) * per_part), **options)
        for p in range(parts)
    ]
    # Every part has as many batches as the whole (positions past the end: padding or
    # nothing), and the parts of batch b concatenated are batch b.
    assert all(len(piece) == len(whole) for piece in pieces)
    for b, batch in enumerate(whole):
        got = [piece[b] for piece in pieces]
        if mode == "pad":
            values = np.concatenate([g[0] for g in got])
            mask = np.concatenate([g[1] for g in got])
            np.testing.assert_array_equal(values, batch[0])
            np.testing.assert_array_equal(mask, batch[1])
        else:
            real = [g for g in got if g is not DROPPED]
            assert np.concatenate(real).tolist() == batch.tolist()


def test_a_part_past_the_end_is_all_padding_shaped_like_the_rest():
    ds = BatchMap([{"x": np.ones(3, np.float32), "n": "a"}] * 5, 4, pad=True, rows=(2, 4))
    batch, mask = ds[1]
    assert mask.tolist() == [False, False]
    assert batch["x"].dtype == np.float32
    assert batch["x"].tolist() == [[0.0] * 3, [0.0] * 3]
    assert batch["n"] == ["", ""]


def test_bad_rows_are_refused():
    with pytest.raises(ValueError, match=r"0 <= start < stop <= batch_size=4, got rows=\(2, 5\)"):
        BatchMap(range(8), 4, rows=(2, 5))
    with pytest.raises(ValueError, match="got rows=\\(2, 2\\)"):
        BatchMap(range(8), 4, rows=(2, 2))
    with pytest.raises(TypeError, match="rows must be a \\(start, stop\\) tuple of ints"):
        BatchMap(range(8), 4, rows=[0, 2])  # type: ignore[arg-type]
    assert "rows=(0, 2)" in repr(BatchMap(range(8), 4, rows=(0, 2)))
