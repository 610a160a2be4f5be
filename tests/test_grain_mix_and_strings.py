"""`chute.grain`'s mixtures and string batches behave as Grain 0.2.18's (issue 35, items 3
and 4), while chute's own `MapDataset` keeps its placement and its lists of strings.

The expected sequences are the ones Grain's own tests publish for `MixedMapDataset`
(even and odd numbers mixed at 0.75 : 0.25 and 1 : 2, over one and two epochs); the
lengths follow Grain's rule that no component's element is needed twice.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
import chute.grain as grain
from chute.grain import python as pygrain
from chute.grain._mix import grain_proportions, locate
from chute_testing import assert_resumes

EVEN, ODD = grain.MapDataset.range(0, 10, 2), grain.MapDataset.range(1, 10, 2)


def test_the_issues_mixture_has_grains_length_and_chutes_keeps_its_own() -> None:
    parts = [range(4708), range(60000)]
    assert len(grain.MapDataset.mix(parts, weights=[0.7, 0.3])) == 6728
    assert len(pygrain.MapDataset.mix(parts, weights=[0.7, 0.3])) == 6728
    assert len(chute.MapDataset.mix(parts, weights=[0.7, 0.3])) == 6726


@pytest.mark.parametrize(
    ("weights", "first_epoch", "two_epochs"),
    [
        ([0.75, 0.25], [0, 2, 4, 1, 6, 8], [0, 2, 4, 1, 6, 8, 0, 3, 2, 4, 6, 5]),
        ([1, 2], [0, 1, 3, 2, 5, 7, 4], [0, 1, 3, 2, 5, 7, 4, 9, 1, 6, 3, 5, 8, 7]),
        ([2, 2], list(range(10)), None),
        ([0.5, 0.5], list(range(10)), None),
        (None, list(range(10)), None),
    ],
)
def test_grains_published_sequences(
    weights: list[float] | None, first_epoch: list[int], two_epochs: list[int] | None
) -> None:
    ds = grain.MapDataset.mix([EVEN, ODD], weights)
    assert len(ds) == len(first_epoch)
    assert list(ds) == first_epoch
    assert [ds[i] for i in range(len(ds))] == first_epoch
    if two_epochs is not None:
        # An epoch past the first continues Grain's placement (components wrap around).
        assert list(ds.repeat(2)) == two_epochs
        assert list(ds.repeat(2).to_iter_dataset()) == two_epochs


def test_grains_lengths_for_three_components() -> None:
    parts = [grain.MapDataset.range(10), grain.MapDataset.range(20), grain.MapDataset.range(5)]
    assert len(grain.MapDataset.mix(parts)) == 15
    assert len(grain.MapDataset.mix(parts, weights=[1, 2, 1])) == 5 + 10 + 5


def test_endless_components_mix_endlessly_in_grains_proportions() -> None:
    zeros = grain.MapDataset.range(0, 1).repeat()
    ones = grain.MapDataset.range(1, 2).repeat()
    inner = grain.MapDataset.mix([zeros, ones], weights=[4, 1])
    assert len(inner) == sys.maxsize
    outer = grain.MapDataset.mix([inner, ones], weights=[1, 1])
    assert np.bincount([outer[i] for i in range(1000)]).tolist() == [400, 600]
    assert outer[sys.maxsize - 1] in (0, 1)  # Far positions: Python integers, no overflow.


def test_a_zero_weight_is_refused_as_grain_refuses_it() -> None:
    with pytest.raises(ValueError, match=r"^Must specify all non-zero proportions for mixing\.$"):
        grain.MapDataset.mix([EVEN, ODD], weights=[0, 1])
    with pytest.raises(ValueError, match=r"^MapDataset.mix: got 1 weights for 2 datasets.$"):
        grain.MapDataset.mix([EVEN, ODD], weights=[1])
    with pytest.raises(ValueError, match=r"weights\[1\] must be finite and positive, got -1"):
        grain.MapDataset.mix([EVEN, ODD], weights=[1, -1])
    with pytest.raises(ValueError, match="span too wide a range to scale the smallest to 100"):
        grain.MapDataset.mix([EVEN, ODD], weights=[5e-324, 1.0])


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 60), min_size=1, max_size=4),
    data=st.data(),
)
def test_no_element_of_a_component_is_placed_twice_or_past_its_end(
    lengths: list[int], data: st.DataObject
) -> None:
    weights = data.draw(
        st.lists(
            st.floats(0.01, 100, allow_nan=False), min_size=len(lengths), max_size=len(lengths)
        )
    )
    parts = [grain.MapDataset.range(n).map(lambda x, c=c: (c, x)) for c, n in enumerate(lengths)]
    ds = grain.MapDataset.mix(parts, weights)
    got = list(ds)
    assert len(got) == len(ds)
    assert len(set(got)) == len(got)
    assert all(x < lengths[c] for c, x in got)
    # Each component's elements come in its own order.
    for c in range(len(lengths)):
        mine = [x for k, x in got if k == c]
        assert mine == list(range(len(mine)))
    # The placement is the one the length was computed from.
    components, _ = locate(range(len(ds)), grain_proportions(weights, len(lengths)))
    assert [c for c, _ in got] == components


def test_a_grain_mixture_resumes_exactly_from_any_point() -> None:
    ds = grain.MapDataset.mix([EVEN, ODD], [1, 2]).repeat(2).to_iter_dataset()
    assert_resumes(lambda: iter(ds), expected=[0, 1, 3, 2, 5, 7, 4, 9, 1, 6, 3, 5, 8, 7])


def test_the_grain_mixture_is_named_in_the_pipeline_and_its_fingerprint() -> None:
    grains = grain.MapDataset.mix([EVEN, ODD], [1, 2])
    chutes = chute.MapDataset.mix([EVEN, ODD], [1, 2])
    assert "mix(weights=[1, 2], placement='grain')" in repr(grains)
    assert "placement" not in repr(chutes)


# --- string batches ---------------------------------------------------------------------


def test_strings_batch_into_numpy_arrays_as_in_grain() -> None:
    pairs = grain.MapDataset.source([["a", "dd"], ["b", "ee"]]).batch(2)[0]
    assert isinstance(pairs, list) and len(pairs) == 2
    np.testing.assert_array_equal(pairs[0], np.array(["a", "b"]))
    np.testing.assert_array_equal(pairs[1], np.array(["dd", "ee"]))
    assert pairs[1].dtype == np.dtype("<U2")
    named = grain.MapDataset.source([{"t": "x"}, {"t": "yy"}]).batch(2)[0]
    np.testing.assert_array_equal(named["t"], np.array(["x", "yy"]))
    raw = grain.MapDataset.source([b"a", b"bc", b"d"]).to_iter_dataset().batch(2)
    assert [b.tolist() for b in raw] == [[b"a", b"bc"], [b"d"]]
    assert [b.dtype for b in raw] == [np.dtype("S2"), np.dtype("S1")]


def test_numbers_batch_as_before_under_grain() -> None:
    ds = grain.MapDataset.source([{"x": np.ones(2), "n": 1}, {"x": np.zeros(2), "n": 2}])
    batch = ds.batch(2)[0]
    assert batch["x"].shape == (2, 2)
    assert batch["n"].tolist() == [1, 2]


def test_chutes_own_batches_keep_strings_as_lists() -> None:
    assert chute.MapDataset.source([["a", "dd"], ["b", "ee"]]).batch(2)[0] == [
        ["a", "b"],
        ["dd", "ee"],
    ]
    batches = list(chute.MapDataset.source([b"a\x00", b"b"]).to_iter_dataset().batch(2))
    assert batches == [[b"a\x00", b"b"]]  # A NumPy bytes array would drop the trailing NUL.


def test_a_batch_fn_is_used_as_given_under_grain() -> None:
    ds = grain.MapDataset.source(["a", "b"]).batch(2, batch_fn=lambda xs: "".join(xs))
    assert ds[0] == "ab"


# --- the dialect stays a dialect ----------------------------------------------------------


def test_grain_datasets_stay_grain_datasets_through_every_method() -> None:
    ds = grain.MapDataset.range(6).seed(1).shuffle().map(str).filter(lambda s: s != "3")
    assert type(ds) is grain.MapDataset
    assert type(ds.to_iter_dataset()) is grain.IterDataset
    assert type(ds.to_iter_dataset().map(str.upper).batch(2)) is grain.IterDataset
    assert type(grain.IterDataset.mix([ds.to_iter_dataset()])) is grain.IterDataset


def test_chute_datasets_are_grain_datasets_for_isinstance_but_keep_chutes_behaviour() -> None:
    ours = chute.MapDataset.source(["a", "b"])
    assert isinstance(ours, grain.MapDataset)
    assert isinstance(ours.to_iter_dataset(), grain.IterDataset)
    assert isinstance(grain.MapDataset.range(2), chute.MapDataset)
    assert ours.batch(2)[0] == ["a", "b"]
    assert type(ours.map(str.upper)) is chute.MapDataset
