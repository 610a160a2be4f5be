"""First-fit, best-fit and concat-split packing: rows, segment ids, positions, resume."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_core import InvalidStateError
from chute_testing import ListIterator, assert_resumes, assert_trees_equal
from chute_transforms import BestFitPackIter, ConcatSplitIter, FirstFitPackIter, PackingError


def _docs(lengths, key="t", start=0):
    """Documents whose tokens encode (document, position): 1000 * (doc + 1) + position."""
    return [
        {key: (1000 * (i + start + 1) + np.arange(n)).astype(np.int32)}
        for i, n in enumerate(lengths)
    ]


def _segments(row, key):
    """The token arrays of each segment of a row, in order, checking ids and positions."""
    ids, positions, values = row[f"{key}_segment_ids"], row[f"{key}_positions"], row[key]
    assert ids.dtype == positions.dtype == np.int32
    assert len(ids) == len(positions) == len(values)
    real = ids > 0
    assert np.all(values[~real] == 0) and np.all(positions[~real] == 0)
    assert np.all(np.diff(ids[real]) >= 0), "segment ids must not decrease"
    assert not np.any(real[1:] & ~real[:-1]), "padding only at the end"
    out = []
    for number in np.unique(ids[real]):
        where = np.flatnonzero(ids == number)
        assert np.array_equal(where, np.arange(where[0], where[-1] + 1)), "contiguous"
        assert np.array_equal(positions[where], np.arange(len(where)))
        out.append(values[where])
    return out


_lengths = st.lists(st.integers(0, 12), max_size=14)
_most = st.none() | st.integers(1, 4)
BIN_PACKERS = [FirstFitPackIter, BestFitPackIter]


@pytest.mark.parametrize("packer", BIN_PACKERS)
@settings(max_examples=60, deadline=None)
@given(lengths=_lengths, length=st.integers(1, 9), bins=st.integers(1, 4), most=_most)
def test_bin_packing_keeps_every_token_in_order_within_its_segment(
    packer, lengths, length, bins, most
):
    docs = _docs(lengths)
    it = packer(ListIterator(docs), length, bins, max_sequences_per_bin=most)
    rows = list(it)
    segments = [segment for row in rows for segment in _segments(row, "t")]
    expected = [doc["t"][:length] for doc in docs if len(doc["t"])]
    assert all(len(row["t"]) == length for row in rows)
    assert all(len(_segments(row, "t")) <= (most or length) for row in rows)
    assert it.tokens_emitted == sum(len(doc) for doc in expected)
    assert it.slots_emitted == len(rows) * length
    # Every non-empty document appears exactly once, truncated to the row length.
    by_doc = {int(s[0]) // 1000: s for s in segments}
    assert len(by_doc) == len(segments) == len(expected)
    for doc in expected:
        assert_trees_equal(by_doc[int(doc[0]) // 1000], doc)
    # Within a row, documents keep their stream order.
    for row in rows:
        firsts = [int(s[0]) for s in _segments(row, "t")]
        assert firsts == sorted(firsts)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), length=st.integers(1, 9), bins=st.integers(1, 4), most=_most)
def test_best_fit_without_truncation_places_every_token_exactly_once(data, length, bins, most):
    lengths = data.draw(st.lists(st.integers(0, length), max_size=20))
    docs = _docs(lengths)
    rows = list(BestFitPackIter(ListIterator(docs), length, bins, max_sequences_per_bin=most))
    placed = [int(v) for row in rows for v in row["t"][row["t_segment_ids"] > 0]]
    assert sorted(placed) == sorted(int(v) for doc in docs for v in doc["t"])
    for row in rows:  # Each segment is one whole document, numbered 1, 2, ... in order.
        segments = _segments(row, "t")
        assert [len(s) for s in segments] == [lengths[int(s[0]) // 1000 - 1] for s in segments]
        ids = row["t_segment_ids"]
        assert sorted(set(ids[ids > 0].tolist())) == list(range(1, len(segments) + 1))


@pytest.mark.parametrize("packer", BIN_PACKERS)
@settings(max_examples=25, deadline=None)
@given(lengths=_lengths, length=st.integers(1, 9), bins=st.integers(1, 3), most=_most)
def test_bin_packing_resumes_at_every_position(packer, lengths, length, bins, most):
    def make():
        return packer(ListIterator(_docs(lengths)), length, bins, max_sequences_per_bin=most)

    assert_resumes(make)


def test_first_fit_emits_full_rows_at_once_and_the_oldest_row_when_nothing_fits():
    rows = list(FirstFitPackIter(ListIterator(_docs([3, 4, 1, 3, 2, 3, 1])), 4, 2))
    docs = [[int(s[0]) // 1000 for s in _segments(row, "t")] for row in rows]
    # 1 opens A; 2 opens B, full: emitted; 3 fills A: emitted; 4 opens C; 5 opens D;
    # 6 fits nowhere with 2 rows open: C (oldest) is emitted, 6 opens E; 7 joins D
    # (first fit); at the end D, then E.
    assert docs == [[2], [1, 3], [4], [5, 7], [6]]


def test_first_fit_with_one_length_per_key_packs_keys_together():
    sizes = [(3, 1), (2, 0), (4, 2), (1, 1), (0, 3), (0, 0), (5, 9)]
    docs = [
        {"inputs": 100 * (i + 1) + np.arange(n), "targets": 100 * (i + 1) + np.arange(m)}
        for i, (n, m) in enumerate(sizes)
    ]

    def make():
        return FirstFitPackIter(ListIterator(docs), {"inputs": 5, "targets": 3}, 2)

    rows = assert_resumes(make)
    assert list(rows[0]) == [
        "inputs",
        "inputs_segment_ids",
        "inputs_positions",
        "targets",
        "targets_segment_ids",
        "targets_positions",
    ]
    assert all(len(r["inputs"]) == 5 and len(r["targets"]) == 3 for r in rows)
    tokens = {key: sum(np.count_nonzero(r[f"{key}_segment_ids"]) for r in rows) for key in docs[0]}
    assert tokens == {"inputs": 3 + 2 + 4 + 1 + 5, "targets": 1 + 2 + 1 + 3 + 3}  # Truncated.
    for row in rows:  # A segment id names the same element in both keys.
        owners = {}
        for key in ("inputs", "targets"):
            ids = row[f"{key}_segment_ids"]
            for number in np.unique(ids[ids > 0]):
                owner = int(row[key][ids == number][0]) // 100
                assert owners.setdefault(int(number), owner) == owner


def test_first_fit_state_is_small_json_without_tokens():
    lengths = np.random.default_rng(1).integers(1, 200, 400)
    it = FirstFitPackIter(ListIterator(_docs(lengths)), 512, 8)
    biggest = 0
    for _ in it:
        state = it.get_state()
        biggest = max(biggest, len(json.dumps(state)))
        # The positions of the elements read since (for resharding): two ints, no gaps.
        assert set(state) <= {"parent", "read", "bins", "span"} and len(state["bins"]) <= 8
        assert len(state.get("span", [0, 0])) == 2
    assert biggest < 400, biggest


def test_first_fit_efficiency_on_a_skewed_length_distribution():
    """Log-normal lengths (median 200, long tail), rows of 2048, 16 open rows.

    Measured: 99.4% of the row slots hold tokens (1.7% of tokens are truncated, from
    documents longer than a row); with one open row it drops to ~84%.
    """
    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(np.log(200), 1.0, 3000).astype(int), 1, None)
    docs = [{"tokens": np.ones(n, np.int32)} for n in lengths]
    rows = list(FirstFitPackIter(ListIterator(docs), 2048, 16))
    real = sum(int(np.count_nonzero(row["tokens_segment_ids"])) for row in rows)
    assert real == int(np.minimum(lengths, 2048).sum())
    efficiency = real / (len(rows) * 2048)
    assert efficiency > 0.97, efficiency


@settings(max_examples=60, deadline=None)
@given(_lengths, st.integers(1, 9), st.booleans())
def test_concat_split_keeps_every_token_in_order(lengths, length, drop_remainder):
    docs = _docs(lengths)
    rows = list(ConcatSplitIter(ListIterator(docs), length, drop_remainder=drop_remainder))
    everything = np.concatenate([*(d["t"] for d in docs), np.zeros(0, np.int32)])
    kept = len(everything) - len(everything) % length if drop_remainder else len(everything)
    assert len(rows) == -(-kept // length)
    flat = [s for row in rows for s in _segments(row, "t")]
    assert_trees_equal(np.concatenate([*flat, np.zeros(0, np.int32)]), everything[:kept])
    for row in rows[:-1] if rows else []:
        assert np.count_nonzero(row["t_segment_ids"]) == length  # Only the last is padded.
    for segment in flat:  # Each segment is a run of one document.
        assert len({int(token) // 1000 for token in segment}) == 1


@settings(max_examples=25, deadline=None)
@given(_lengths, st.integers(1, 9), st.booleans())
def test_concat_split_resumes_at_every_position(lengths, length, drop_remainder):
    def make():
        return ConcatSplitIter(ListIterator(_docs(lengths)), length, drop_remainder=drop_remainder)

    assert_resumes(make)


def test_concat_split_positions_restart_in_each_row_and_keys_stay_aligned():
    docs = [{"a": np.arange(5, dtype=np.int16), "b": np.arange(5) * 10}]
    rows = list(ConcatSplitIter(ListIterator(docs), 3))
    assert_trees_equal(rows[1]["a"], np.array([3, 4, 0], np.int16))
    assert_trees_equal(rows[1]["b"], np.array([30, 40, 0]))
    assert_trees_equal(rows[1]["a_positions"], np.array([0, 1, 0], np.int32))
    assert_trees_equal(rows[1]["b_segment_ids"], rows[1]["a_segment_ids"])
    assert ConcatSplitIter(ListIterator(docs), 3).get_state()["read"] == 0


def test_concat_split_state_holds_a_token_offset_not_tokens():
    it = ConcatSplitIter(ListIterator(_docs([10])), 4)
    next(it)
    # The element's position (`at`) too, for resharding.
    assert it.get_state() == {"parent": {"index": 0}, "skip": 4, "read": 1, "at": 0}


@pytest.mark.parametrize(
    ("element", "message"),
    [
        (np.arange(3), "packing needs elements that are dicts of 1-D arrays"),
        (
            {"t": np.zeros((2, 2), np.int32)},
            r"element\['t'\] must be a 1-D array of numbers, got dtype int32 with shape \(2, 2\)",
        ),
        ({"t": np.array(["a"], object)}, r"element\['t'\] must be a 1-D array of numbers"),
        (
            {"u": np.zeros(2, np.int32)},
            r"element has keys \['u'\] .* \(missing \['t'\], extra \['u'\]\)",
        ),
        (
            {"t": np.zeros(2, np.float64)},
            r"the elements packed into one row have dtypes \['float64', 'int32'\] under 't'",
        ),
    ],
)
@pytest.mark.parametrize("packer", BIN_PACKERS)
def test_bin_packing_rejects_bad_elements_clearly(packer, element, message):
    docs = [{"t": np.ones(2, np.int32)}, element]
    name = packer.__name__
    with pytest.raises(PackingError, match=rf"^{name}\(length=8, num_packing_bins=2\): {message}"):
        list(packer(ListIterator(docs), 8, 2))


def test_a_bad_element_is_not_consumed_so_the_state_stays_consistent():
    docs = [{"t": np.ones(2, np.int32)}, {"t": np.ones((1, 1), np.int32)}]
    for it in (
        FirstFitPackIter(ListIterator(docs), 8, 2),
        BestFitPackIter(ListIterator(docs), 8, 2),
        ConcatSplitIter(ListIterator(docs), 1),
    ):
        with pytest.raises(PackingError):
            list(it)
        state = it.get_state()
        with pytest.raises(PackingError):
            next(it)
        assert it.get_state() == state


def test_packers_reject_colliding_output_keys_and_unaligned_keys():
    with pytest.raises(PackingError, match="written twice"):
        FirstFitPackIter(ListIterator([]), {"t": 4, "t_positions": 4}, 1)
    docs = [{"a": np.ones(2), "b": np.ones(3)}]
    with pytest.raises(PackingError, match="same length"):
        next(ConcatSplitIter(ListIterator(docs), 4))


@pytest.mark.parametrize(
    "state",
    [
        {"parent": {"index": 0}, "read": 2, "bins": [[0], [1], [1]]},
        {"parent": {"index": 0}, "read": 2, "bins": [[0], [1], [2]]},
        {"parent": {"index": 0}, "read": 3, "bins": [[1], [0]]},
        {"parent": {"index": 0}, "read": 3, "bins": [[0, 0]]},
        {"parent": {"index": 0}, "read": 3, "bins": [[0], [1], [2]]},
        {"parent": {"index": 0}, "read": 1, "bins": [[]]},
        {"parent": {"index": 0}, "read": 1, "bins": "x"},
        {"parent": {"index": 0}, "read": -1, "bins": []},
    ],
)
@pytest.mark.parametrize("packer", BIN_PACKERS)
def test_bin_packing_rejects_malformed_states(packer, state):
    with pytest.raises(InvalidStateError):
        packer(ListIterator(_docs([1, 1, 1])), 4, 2).set_state(state)


@pytest.mark.parametrize("packer", BIN_PACKERS)
def test_a_state_with_more_elements_in_a_row_than_allowed_is_refused(packer):
    it = packer(ListIterator(_docs([1, 1, 1])), 4, 2, max_sequences_per_bin=2)
    state = {"parent": {"index": 0}, "read": 3, "bins": [[0, 1, 2]]}
    with pytest.raises(InvalidStateError, match=r"elements < read = 3, at most 2 each\.$"):
        it.set_state(state)
    it.set_state({"parent": {"index": 0}, "read": 3, "bins": [[0, 1], [2]]})
    assert [len(_segments(row, "t")) for row in it] == [2, 1]


def test_states_that_do_not_match_the_data_fail_at_next_and_stay_restorable():
    it = FirstFitPackIter(ListIterator(_docs([3, 3])), 4, 2)
    state = {"parent": {"index": 0}, "read": 2, "bins": [[0, 1]]}
    it.set_state(state)
    for _ in range(2):
        with pytest.raises(InvalidStateError, match="no room"):
            next(it)
        assert it.get_state() == state
    it.set_state({"parent": {"index": 1}, "read": 3, "bins": [[0]]})
    with pytest.raises(InvalidStateError, match="parent ends after 1"):
        next(it)
    split = ConcatSplitIter(ListIterator(_docs([3])), 2)
    split.set_state({"parent": {"index": 0}, "skip": 3, "read": 1})
    with pytest.raises(InvalidStateError, match="skips 3 tokens of an element of 3"):
        next(split)
    with pytest.raises(InvalidStateError):
        split.set_state({"parent": {"index": 0}, "skip": 1, "read": 0})


@pytest.mark.parametrize("packer", BIN_PACKERS)
def test_bin_packer_options_are_validated(packer):
    name = packer.__name__
    with pytest.raises(ValueError, match=f"^{name}: num_packing_bins must be "):
        packer(ListIterator([]), 4, 0)
    with pytest.raises(ValueError, match=f"^{name}: max_sequences_per_bin must be "):
        packer(ListIterator([]), 4, 1, max_sequences_per_bin=0)
    with pytest.raises(TypeError, match=f"^{name}: max_sequences_per_bin must be an int"):
        packer(ListIterator([]), 4, 1, max_sequences_per_bin=1.5)
    with pytest.raises(ValueError, match=f"^{name}: length must name at least one key"):
        packer(ListIterator([]), {}, 1)
    assert repr(packer(ListIterator([]), {"t": 4}, 3, max_sequences_per_bin=2)) == (
        f"{name}(length={{'t': 4}}, num_packing_bins=3, max_sequences_per_bin=2)"
    )


def test_packer_options_are_validated():
    with pytest.raises(ValueError, match="num_packing_bins"):
        FirstFitPackIter(ListIterator([]), 4, 0)
    with pytest.raises(TypeError, match="length"):
        FirstFitPackIter(ListIterator([]), 4.0, 1)
    with pytest.raises(ValueError, match="at least one key"):
        FirstFitPackIter(ListIterator([]), {}, 1)
    with pytest.raises(TypeError, match="drop_remainder"):
        ConcatSplitIter(ListIterator([]), 4, drop_remainder=None)
    assert "num_packing_bins=3" in repr(FirstFitPackIter(ListIterator([]), 4, 3))
