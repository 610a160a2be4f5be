"""BestFitPackIter: where elements go, which row makes room, padding against first fit.

Generic properties shared with first fit (every token once, segments, resume at every
position, bad input, bad states) are in test_packing.py, parametrized over both.
"""

import numpy as np
import pytest

from chute_testing import ListIterator, assert_resumes
from chute_transforms import BestFitPackIter, ConcatSplitIter, FirstFitPackIter


def _docs(lengths):
    """Document `i` is `len` copies of `i + 1`, so a row's segments name their documents."""
    return [{"t": np.full(n, i + 1, np.int32)} for i, n in enumerate(lengths)]


def _rows(packer, lengths, length, bins, **options):
    """Each row as the list of the documents in it, by segment."""
    rows = list(packer(ListIterator(_docs(lengths)), length, bins, **options))
    return [
        [
            int(row["t"][row["t_segment_ids"] == s][0]) - 1
            for s in range(1, 1 + max(row["t_segment_ids"]))
        ]
        for row in rows
    ]


def test_an_element_goes_to_the_open_row_with_the_least_room_that_fits_it():
    # Rows of 10, 3 open. 0 (6) opens A, 1 (3) joins A (room 1), 2 (5) opens B,
    # 3 (4) fits only B (room 1), 4 (2) opens C (room 8); 5 (1) fits A, B and C: the
    # least room is A's and B's (1): the oldest, A, full, goes out; 6 (1) fills B.
    assert _rows(BestFitPackIter, [6, 3, 5, 4, 2, 1, 1], 10, 3) == [[0, 1, 5], [2, 3, 6], [4]]
    # Rows of 4, 2 open: A = 0 (2, room 2), B = 1 (3, room 1); 2 (1) fits both: best
    # fit fills B, first fit puts it in A.
    assert _rows(BestFitPackIter, [2, 3, 1, 2], 4, 2) == [[1, 2], [0, 3]]
    assert _rows(FirstFitPackIter, [2, 3, 1, 2], 4, 2) == [[0, 2], [1], [3]]


def test_when_nothing_fits_the_fullest_row_makes_room_not_the_oldest():
    # Rows of 10, 2 open: A = 0 (6, room 4), B = 1 (7, room 3). 2 (9) fits neither:
    # best fit emits B (the fullest) and 3 (4) then fills A; first fit emits A (the
    # oldest), and 3 then fits no open row either.
    assert _rows(BestFitPackIter, [6, 7, 9, 4], 10, 2) == [[1], [0, 3], [2]]
    assert _rows(FirstFitPackIter, [6, 7, 9, 4], 10, 2) == [[0], [1], [2], [3]]


def test_the_oldest_row_makes_room_once_it_waited_16_elements_per_open_row():
    # A = 0 (10 of 100) is never the fullest; each 95 pushes the previous one out,
    # until element 32, read when A's first element is 32 > 16 * 2 elements back.
    lengths = [10] + [95] * 40
    rows = _rows(BestFitPackIter, lengths, 100, 2)
    assert rows == [[i] for i in range(1, 31)] + [[0]] + [[i] for i in range(31, 41)]
    it = BestFitPackIter(ListIterator(_docs(lengths)), 100, 2)
    reads = []
    for _ in it:
        reads.append(it.get_state()["read"])
    assert max(reads) == 32  # What a restore re-reads at most, here.
    assert_resumes(lambda: BestFitPackIter(ListIterator(_docs(lengths)), 100, 2))


def test_keys_are_fitted_together_by_their_summed_room():
    sizes = [(3, 0), (2, 2), (1, 1)]
    docs = [{"a": np.full(a, i + 1), "b": np.full(b, i + 1)} for i, (a, b) in enumerate(sizes)]
    # Rows of 4 + 4, 2 open: A = 0 (room 1 + 4), B = 1 (room 2 + 2); 2 fits both: best
    # fit picks B (4 < 5 slots left), first fit A (which its "a" then fills).
    best = list(BestFitPackIter(ListIterator(docs), {"a": 4, "b": 4}, 2))
    assert [row["a"].tolist() for row in best] == [[1, 1, 1, 0], [2, 2, 3, 0]]
    assert [row["b"].tolist() for row in best] == [[0, 0, 0, 0], [2, 2, 3, 0]]
    assert best[1]["b_segment_ids"].tolist() == [1, 1, 2, 0]
    first = list(FirstFitPackIter(ListIterator(docs), {"a": 4, "b": 4}, 2))
    assert [row["a"].tolist() for row in first] == [[1, 1, 1, 3], [2, 2, 0, 0]]
    assert first[0]["b_segment_ids"].tolist() == [2, 0, 0, 0]  # 0 has no "b" tokens.


def test_max_sequences_per_bin_emits_a_row_once_it_holds_that_many_elements():
    assert _rows(BestFitPackIter, [1] * 7, 10, 2, max_sequences_per_bin=3) == [
        [0, 1, 2],
        [3, 4, 5],
        [6],
    ]
    assert _rows(FirstFitPackIter, [1, 5, 1, 1], 10, 2, max_sequences_per_bin=2) == [
        [0, 1],
        [2, 3],
    ]


def test_padding_counts_cover_every_key_of_the_rows_returned():
    docs = [{"a": np.ones(3), "b": np.ones(1)}, {"a": np.ones(2), "b": np.ones(2)}]
    it = BestFitPackIter(ListIterator(docs), {"a": 4, "b": 2}, 1)
    assert (it.tokens_emitted, it.slots_emitted, it.padding_fraction) == (0, 0, 0.0)
    next(it)
    assert (it.tokens_emitted, it.slots_emitted) == (4, 6)
    list(it)
    assert (it.tokens_emitted, it.slots_emitted, it.padding_fraction) == (8, 12, 1 / 3)
    split = ConcatSplitIter(ListIterator([{"t": np.ones(5)}]), 4)
    list(split)
    assert (split.tokens_emitted, split.slots_emitted, split.padding_fraction) == (5, 8, 3 / 8)


def _lognormal(count):
    rng = np.random.default_rng(0)
    return np.clip(rng.lognormal(np.log(200), 1.0, count).astype(int), 1, None)


def _chat_and_documents(count):
    """70% short chat turns (16-255 tokens), 30% documents with a Pareto tail (256+)."""
    rng = np.random.default_rng(1)
    short = rng.random(count) < 0.7
    return np.where(
        short, rng.integers(16, 256, count), (rng.pareto(1.5, count) * 300 + 256).astype(int)
    )


@pytest.mark.parametrize(
    ("lengths", "first_fit_rows", "best_fit_rows"),
    [(_lognormal(20_000), 3138, 3133), (_chat_and_documents(20_000), 2771, 2768)],
    ids=["lognormal", "chat-and-documents"],
)
def test_best_fit_pads_strictly_less_than_first_fit(lengths, first_fit_rows, best_fit_rows):
    """20,000 lengths, rows of 2048, 16 open rows; the same tokens (truncated the same).

    Measured padding: log-normal (median 200) 0.53% first fit, 0.37% best fit;
    chat turns and documents 0.38% and 0.27%.
    """
    docs = [{"tokens": np.ones(n, np.int32)} for n in lengths]
    first = FirstFitPackIter(ListIterator(docs), 2048, 16)
    best = BestFitPackIter(ListIterator(docs), 2048, 16)
    first_rows, best_rows = list(first), list(best)
    assert (len(first_rows), len(best_rows)) == (first_fit_rows, best_fit_rows)
    tokens = int(np.minimum(lengths, 2048).sum())
    assert first.tokens_emitted == best.tokens_emitted == tokens
    real = sum(int(np.count_nonzero(row["tokens_segment_ids"])) for row in best_rows)
    assert real == tokens and best.slots_emitted == len(best_rows) * 2048
    assert best.padding_fraction < first.padding_fraction
