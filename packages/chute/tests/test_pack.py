"""`IterDataset.pack`: the three packers on the fluent API, after workers, with stats."""

from __future__ import annotations

import numpy as np
import pytest

import chute
from chute_testing import ListIterator, assert_resumes, assert_trees_equal
from chute_transforms import BestFitPackIter, ConcatSplitIter, FirstFitPackIter, PackingError

LENGTHS = np.clip(np.random.default_rng(7).lognormal(np.log(12), 0.8, 120).astype(int), 0, 70)


def make_document(index: int) -> dict[str, np.ndarray]:
    """Document `index`: tokens 1000 * (index + 1) + position, of a log-normal length."""
    return {"tokens": (1000 * (index + 1) + np.arange(LENGTHS[index])).astype(np.int32)}


def _documents() -> chute.IterDataset:
    return chute.MapDataset.range(len(LENGTHS)).map(make_document).to_iter_dataset()


METHODS = {
    "first_fit": (
        {"num_packing_bins": 3, "max_sequences_per_bin": 4},
        lambda parent: FirstFitPackIter(parent, 64, 3, max_sequences_per_bin=4),
    ),
    "best_fit": (
        {"num_packing_bins": 3},
        lambda parent: BestFitPackIter(parent, 64, 3),
    ),
    "concat_split": (
        {"drop_remainder": True},
        lambda parent: ConcatSplitIter(parent, 64, drop_remainder=True),
    ),
}


@pytest.mark.parametrize("method", sorted(METHODS))
def test_pack_after_workers_gives_the_packers_rows_for_0_and_2_workers(method):
    options, packer = METHODS[method]
    expected = list(packer(ListIterator([make_document(i) for i in range(len(LENGTHS))])))
    assert len(expected) > 20

    def packed(workers: int) -> chute.IterDataset:
        prefetched = _documents().mp_prefetch(num_workers=workers, chunk_size=8)
        return prefetched.pack(64, method=method, **options)

    for workers in (0, 2):
        rows = list(packed(workers))
        assert len(rows) == len(expected)
        for row, wanted in zip(rows, expected, strict=True):
            assert_trees_equal(row, wanted)
    # A state saved with 0 workers restores with 2, and the other way round.
    assert_resumes(lambda: packed(0).iter(), every=None, make_restored=[lambda: packed(2).iter()])
    assert_resumes(lambda: packed(2).iter(), every=None, make_restored=[lambda: packed(0).iter()])


def test_pack_before_workers_runs_after_them_on_the_merged_stream():
    packed = _documents().pack(64, method="best_fit", num_packing_bins=3)
    expected = list(packed)
    rows = list(packed.mp_prefetch(num_workers=2, chunk_size=8))
    assert len(rows) == len(expected)
    for row, wanted in zip(rows, expected, strict=True):
        assert_trees_equal(row, wanted)


def test_the_iterator_reports_its_padding_also_with_stats():
    ds = _documents().pack(64, method="best_fit", num_packing_bins=3)
    it = ds.iter(stats=True)
    rows = list(it)
    real = sum(int(np.count_nonzero(row["tokens_segment_ids"])) for row in rows)
    assert (it.tokens_emitted, it.slots_emitted) == (real, 64 * len(rows))
    assert it.padding_fraction == (64 * len(rows) - real) / (64 * len(rows)) == 0.025
    names = [stage.name for stage in it.stats().stages]
    assert names[-1] == "pack(length=64, method='best_fit', num_packing_bins=3)"
    assert it.stats().stages[-1].elements == len(rows)
    assert it.stats().stages[-1].padding == 0.025


def test_stats_report_the_padding_of_a_pack_stage_before_a_batch():
    ds = _documents().pack(64, method="best_fit", num_packing_bins=3).batch(4)
    it = ds.iter(stats=True)
    list(it)
    stats = it.stats()
    padded = [(stage.name, stage.padding) for stage in stats.stages if stage.padding is not None]
    assert padded == [("pack(length=64, method='best_fit', num_packing_bins=3)", 0.025)]
    assert "padding: 2.50% of the rows of pack(length=64, method='best_fit', num_pa" in str(stats)


def test_pack_is_described_and_declared_as_a_stage_that_regroups_elements():
    ds = _documents().pack({"tokens": 64}, method="first_fit", max_sequences_per_bin=2)
    assert repr(ds).splitlines()[-1] == (
        "  .pack(length={'tokens': 64}, method='first_fit', num_packing_bins=16, "
        "max_sequences_per_bin=2)"
    )
    (stage,) = [s for s in ds._stages if s.op == "pack"]
    traits = stage.traits
    assert not traits.elementwise and not traits.keeps_positions and traits.groups is None
    assert repr(_documents().pack(8, method="concat_split")).splitlines()[-1] == (
        "  .pack(length=8, method='concat_split', drop_remainder=False)"
    )


@pytest.mark.parametrize(
    ("options", "kind", "message"),
    [
        (
            {"method": "next_fit"},
            chute.InvalidArgumentError,
            "IterDataset.pack: method must be one of ['best_fit', 'concat_split', 'first_fit'], "
            "got 'next_fit'.",
        ),
        (
            {"method": "concat_split", "num_packing_bins": 4},
            chute.InvalidArgumentError,
            "IterDataset.pack: num_packing_bins apply to method='first_fit' or 'best_fit', "
            "not 'concat_split', which keeps no open rows; leave them out.",
        ),
        (
            {"drop_remainder": True},
            chute.InvalidArgumentError,
            "IterDataset.pack: drop_remainder applies to method='concat_split'; the fit "
            "methods emit every open row at the end.",
        ),
        (
            {"drop_remainder": 1, "method": "concat_split"},
            chute.ArgumentTypeError,
            "IterDataset.pack: drop_remainder must be a bool, got int 1.",
        ),
    ],
)
def test_bad_pack_options_are_refused_when_declared(options, kind, message):
    with pytest.raises(kind) as caught:
        _documents().pack(8, **options)
    assert type(caught.value) is kind
    assert str(caught.value) == message


def test_bad_lengths_are_refused_when_declared():
    with pytest.raises(chute.ArgumentTypeError) as caught:
        _documents().pack({"tokens": 8}, method="concat_split")
    assert str(caught.value) == (
        "IterDataset.pack: method='concat_split' cuts every key at the same place, so length "
        "must be one int, got dict {'tokens': 8}."
    )
    with pytest.raises(chute.InvalidArgumentError, match="length must name at least one key"):
        _documents().pack({})
    with pytest.raises(chute.InvalidArgumentError, match=r"length\['tokens'\] must be >= 1"):
        _documents().pack({"tokens": 0})
    with pytest.raises(PackingError, match="would be written twice"):
        _documents().pack({"t": 4, "t_positions": 4})


def test_concat_split_writes_bos_over_the_first_token_of_every_segment():
    sequences = [
        {"t": np.arange(1, 6) * 10},
        {"t": np.arange(1, 4) * 100},
        {"t": np.arange(1, 8) * 1000},
    ]
    ds = (
        chute.MapDataset.source(sequences)
        .to_iter_dataset()
        .pack(6, method="concat_split", bos_id=7)
    )
    rows = list(ds)
    # What Grain 0.2.18's ConcatThenSplitIterDataset gives with
    # REPLACE_FIRST_TOKEN_WITH_BOS on these sequences (run side by side).
    assert [row["t"].tolist() for row in rows] == [
        [7, 20, 30, 40, 50, 7],
        [7, 300, 7, 2000, 3000, 4000],
        [7, 6000, 7000, 0, 0, 0],
    ]
    assert [row["t_positions"].tolist() for row in rows][1] == [0, 1, 0, 1, 2, 3]
    assert "bos_id=7" in repr(ds)
    assert_resumes(lambda: iter(ds), expected=rows)


def test_bos_applies_to_the_keys_named_and_only_to_concat_split():
    two = [{"t": np.arange(1, 4), "m": np.arange(1, 4)}]
    ds = chute.MapDataset.source(two).to_iter_dataset()
    (row,) = list(ds.pack(4, method="concat_split", bos_id=0, bos_keys=["t"]))
    assert row["t"].tolist() == [0, 2, 3, 0] and row["m"].tolist() == [1, 2, 3, 0]
    with pytest.raises(
        chute.InvalidArgumentError,
        match=r"bos_id and bos_keys apply to method='concat_split', not 'best_fit'",
    ):
        ds.pack(4, method="best_fit", bos_id=1)
    with pytest.raises(PackingError, match=r"bos_keys names 'x', which the elements do not have"):
        list(ds.pack(4, method="concat_split", bos_id=1, bos_keys=["x"]))
