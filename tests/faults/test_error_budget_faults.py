"""Faults under an error budget: bad elements skipped deterministically, counted, resumable.

Promise 5 (DESIGN.md): with `skip_errors`, a record that fails to decode or a transform
raising on one element leaves exactly that element out, the same way with any number of
workers, counted in the statistics and recorded in the checkpoint state, so that a
restored iterator (on any host, with any worker count) skips it the same way; a fault
that keeps failing (a truncated file) exhausts the budget and raises within a bound.
Scenarios are in `budget_scenarios.py`, also run by `measure_faults.py`.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

import chute

_spec = importlib.util.spec_from_file_location(
    "budget_scenarios", Path(__file__).with_name("budget_scenarios.py")
)
assert _spec is not None and _spec.loader is not None
bs = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("budget_scenarios", bs)
_spec.loader.exec_module(bs)

SEEDS = [0, 1, 2]
DATA_BOUND = 10.0  # Seconds from a truncation to the budget's error.


@pytest.mark.parametrize("seed", SEEDS)
def test_one_bad_element_in_a_million_is_skipped_and_the_rest_comes_in_order(seed):
    outcome = bs.run_one_in_a_million(seed)
    (fail_at,) = outcome.faults
    assert outcome.error is None
    assert len(outcome.got) == bs.MILLION - 1
    assert outcome.got[:fail_at] == list(range(fail_at))
    assert outcome.got[fail_at:] == list(range(fail_at + 1, bs.MILLION))
    assert [(s.where, s.error) for s in outcome.skipped] == [
        (f"map(FailOn) at position {fail_at}", f"ValueError: bad element {fail_at}")
    ]
    assert outcome.stats_skipped == 1
    assert outcome.state["errors"]["failures"] == 1


@pytest.mark.parametrize("seed", SEEDS)
def test_after_a_skip_a_restore_with_other_workers_skips_it_the_same_way(seed):
    fail_at = bs.million_fault(seed)
    it = iter(bs.million_pipeline(fail_at))
    for _ in range(fail_at - 3):
        next(it)
    before = json.loads(json.dumps(it.get_state()))  # Its chunk holds the bad element.
    for _ in range(10):
        next(it)
    after = json.loads(json.dumps(it.get_state()))
    it.close()
    assert before["errors"]["failures"] == 0
    assert after["errors"]["failures"] == 1
    assert after["errors"]["skipped"][0][1] == [fail_at]
    expected = [x for x in range(fail_at - 3, fail_at + 20) if x != fail_at]
    for workers, state, start in ((0, before, 0), (1, after, 10)):
        restored = iter(bs.million_pipeline(fail_at, workers))
        restored.set_state(state)
        got = [next(restored) for _ in range(len(expected) - start)]
        assert got == expected[start:]
        assert restored.failures == 1
        restored.close()


@pytest.mark.parametrize("seed", SEEDS)
def test_corrupt_records_are_skipped_and_the_others_come_exactly(seed, tmp_path):
    outcome = bs.run_corrupt_records(seed, str(tmp_path))
    assert outcome.error is None
    good = [i for i in range(200) if i not in outcome.faults]
    assert len(outcome.got) == len(good)
    assert all(bs.is_record(element, i) for element, i in zip(outcome.got, good, strict=True))
    assert [s.origin for s in outcome.skipped] == [(p,) for p in outcome.faults]
    assert all(s.where.startswith("map(decode_record) at position") for s in outcome.skipped)
    assert all(s.error.startswith("CorruptRecordError") for s in outcome.skipped)
    assert outcome.stats_skipped == 3


@pytest.mark.parametrize("seed", SEEDS)
def test_corrupt_records_past_the_budget_raise_at_the_first_one_too_many(seed, tmp_path):
    outcome = bs.run_corrupt_records(seed, str(tmp_path), max_failures=2)
    assert isinstance(outcome.error, chute.ErrorBudgetExceededError)
    third = outcome.faults[2]
    assert str(outcome.error).startswith(f"map(decode_record) at position {third} raised ")
    assert len(outcome.got) == third - 2  # Every good record before the third bad one.
    assert outcome.state["errors"]["failures"] == 2


@pytest.mark.parametrize("seed", SEEDS)
def test_a_file_truncated_mid_epoch_exhausts_the_budget_and_names_the_file(seed, tmp_path):
    outcome = bs.run_truncated_file(seed, str(tmp_path))
    error = outcome.error
    assert isinstance(error, chute.ErrorBudgetExceededError), f"ended with {error!r}"
    assert Path(outcome.extra["path"]).name in str(error)
    assert outcome.seconds <= DATA_BOUND
    assert all(bs.is_record(element, i) for i, element in enumerate(outcome.got))
    # All the budget allowed was used: 3 + floor(0.001 * elements read).
    allowed = re.search(r"allows (\d+) after (\d+) elements read", str(error))
    assert allowed is not None, str(error)
    assert outcome.stats_skipped == int(allowed.group(1)) == 3 + int(allowed.group(2)) // 1000


@pytest.mark.parametrize("seed", SEEDS)
def test_each_host_skips_its_own_bad_elements_and_resumes_the_same_way(seed):
    failing = bs.failing_elements(seed)
    union: list[int] = []
    for host in (0, 1):
        it = bs.host_pipeline(host, failing).iter(stats=True)
        batches = [batch.tolist() for batch in it]
        share = list(iter(chute.MapDataset.range(600).seed(7).shuffle().shard(host, 2)))
        assert [x for b in batches for x in b] == [x for x in share if x not in failing]
        assert it.stats().skipped == len(failing & set(share))
        union += [x for b in batches for x in b]
        # A checkpoint in the middle restores on this host with another worker count.
        it = iter(bs.host_pipeline(host, failing))
        middle = [next(it).tolist() for _ in range(len(batches) // 2)]
        state = json.loads(json.dumps(it.get_state()))
        del it  # Its workers stop when it is collected.
        restored = iter(bs.host_pipeline(host, failing, workers=0))
        restored.set_state(state)
        assert middle + [b.tolist() for b in restored] == batches
    assert sorted(union) == sorted(set(range(600)) - failing)
