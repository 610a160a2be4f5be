"""`ConcatThenSplitIterDataset` with Grain's meta features and full-length rows.

Grain 0.2.18 documents both options: meta features are carried whole with their
sequence, and with `split_full_length_features=False` an element that already fills a
row is a row of its own, waiting for its turn. The rows are compared with Grain's own
(a test-only peer), and restored from every point with chute's resume check.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chute
import chute.grain as cgrain

grain = pytest.importorskip("grain")

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_GRAIN_READ = grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)


def _documents(sizes, meta_sizes):
    return [
        {
            "tokens": np.arange(1, n + 1, dtype=np.int32) + 100 * number,
            "targets": np.arange(1, n + 1, dtype=np.int32) * -1,
            "doc": np.full(m, number, dtype=np.int64) if m else np.int64(number),
        }
        for number, (n, m) in enumerate(zip(sizes, meta_sizes, strict=True))
    ]


def _packed(lib, docs, **options):
    read = {"read_options": _GRAIN_READ} if lib is grain else {}
    ds = lib.MapDataset.source(docs).to_iter_dataset(**read)
    return lib.experimental.ConcatThenSplitIterDataset(ds, **options)


def _rows(ds):
    return [{key: value.tolist() for key, value in row.items()} for row in ds]


@SETTINGS
@given(
    data=st.data(),
    length=st.integers(1, 8),
    meta_length=st.integers(1, 4),
    split_full=st.booleans(),
    bos=st.booleans(),
)
def test_rows_are_grains_with_meta_features_and_full_length_rows(
    data, length, meta_length, split_full, bos
):
    # (Grain writes BOS past the end of a row for an empty sequence: none with BOS.)
    smallest = 1 if bos else 0
    sizes = data.draw(st.lists(st.integers(smallest, 2 * length), max_size=12), label="sizes")
    scalar = data.draw(st.booleans(), label="scalar meta")
    meta_sizes = [0 if scalar else data.draw(st.integers(1, meta_length)) for _ in sizes]
    docs = _documents(sizes, meta_sizes)
    options = {
        "length_struct": {"tokens": length, "targets": length, "doc": meta_length},
        "meta_features": ["doc"],
        "split_full_length_features": split_full,
    }
    if bos:
        options |= {
            "bos_handling": cgrain.experimental.BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS,
            "bos_features": ["tokens"],
            "bos_token_id": 7,
        }
    ours = _packed(cgrain, docs, **options)
    if bos:
        options["bos_handling"] = grain.experimental.BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS
    assert _rows(ours) == _rows(_packed(grain, docs, **options))
    chute.testing.assert_resumes(lambda: iter(ours), every=1)


@SETTINGS
@given(sizes=st.lists(st.integers(0, 12), max_size=12), length=st.integers(1, 6))
def test_full_length_rows_without_meta_features_are_grains(sizes, length):
    docs = [{"tokens": np.arange(1, n + 1)} for n in sizes]
    options = {"length_struct": {"tokens": length}, "split_full_length_features": False}
    ours = _packed(cgrain, docs, **options)
    assert _rows(ours) == _rows(_packed(grain, docs, **options))
    chute.testing.assert_resumes(lambda: iter(ours), every=1)


def test_a_full_length_element_waits_for_the_row_being_filled():
    docs = [{"t": np.arange(1, n + 1)} for n in (2, 4, 1)]
    rows = cgrain.experimental.ConcatThenSplitIterDataset(
        cgrain.MapDataset.source(docs).to_iter_dataset(),
        length_struct={"t": 4},
        split_full_length_features=False,
    )
    assert [row["t"].tolist() for row in rows] == [[1, 2, 1, 0], [1, 2, 3, 4]]


def test_meta_features_are_checked_and_a_meta_feature_too_long_is_named():
    ds = cgrain.MapDataset.source([{"t": np.arange(3), "id": np.arange(5)}]).to_iter_dataset()
    ctsd = cgrain.experimental.ConcatThenSplitIterDataset
    with pytest.raises(ValueError, match=r"meta_features \['x'\] are not keys of length_struct"):
        ctsd(ds, length_struct={"t": 4, "id": 2}, meta_features=["x"])
    with pytest.raises(ValueError, match=r"bos_features and meta_features overlap: \['id'\]"):
        ctsd(
            ds,
            length_struct={"t": 4, "id": 2},
            meta_features=["id"],
            bos_handling=cgrain.experimental.BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS,
            bos_features=["id"],
            bos_token_id=1,
        )
    with pytest.raises(TypeError, match="split_full_length_features must be a bool, got 0"):
        ctsd(ds, length_struct={"t": 4}, split_full_length_features=0)
    rows = ctsd(ds, length_struct={"t": 4, "id": 2}, meta_features=["id"])
    with pytest.raises(ValueError, match="meta feature 'id' holds 5 values, more than its"):
        list(rows)
    assert "meta_features=['id']" in repr(rows)
