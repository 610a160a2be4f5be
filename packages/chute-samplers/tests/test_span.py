import pytest

from chute_core import DROPPED, CorruptRecordError, ErrorBudget, ErrorBudgetExceededError
from chute_core.internal import ErrorLedger, ledger_scope
from chute_samplers import SequentialIter
from chute_samplers._span import read_span
from chute_testing import assert_resumes


class Broken:
    """range(n) whose records at `broken` fail; counts reads per position."""

    def __init__(self, n, broken):
        self.n, self.broken, self.reads = n, set(broken), {}

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.reads[i] = self.reads.get(i, 0) + 1
        if i in self.broken:
            raise CorruptRecordError(f"record {i} is corrupt")
        return i


def test_a_failed_span_keeps_the_elements_before_the_failing_position():
    span = read_span(Broken(10, {6, 8}), 3, 10)
    assert span.elements == [3, 4, 5]
    assert isinstance(span.error, CorruptRecordError)
    assert span.error.__notes__ == ["chute: raised by reading Broken on the element at position 6"]


def test_under_a_ledger_failed_positions_are_dropped_and_remembered():
    span = read_span(Broken(10, {6, 8}), 3, 10, ErrorLedger(None))
    assert span.elements == [3, 4, 5, DROPPED, 7, DROPPED, 9]
    assert span.error is None
    assert sorted(span.failures) == [3, 5]


def test_a_restored_ledger_drops_its_skipped_positions_without_charging_them():
    ledger = ErrorLedger(None)
    ledger.preset([(0, (4,)), (1, (5,)), (0, (6, 0))])  # Only stage 0's one-int origins.
    span = read_span(Broken(10, set()), 3, 8, ledger, stage=0)
    assert span.elements == [3, DROPPED, 5, 6, 7]
    assert span.failures is None


def test_sequential_reading_raises_at_the_failing_position_and_stays_there():
    it = SequentialIter(Broken(6, {3}))
    assert [next(it), next(it), next(it)] == [0, 1, 2]
    with pytest.raises(CorruptRecordError, match="record 3 is corrupt"):
        next(it)
    assert it.get_state() == {"position": 3}
    with pytest.raises(CorruptRecordError):
        next(it)  # Still the same element.
    it.set_state({"position": 4})
    assert list(it) == [4, 5]


def _skipping(source, max_failures):
    ledger = ErrorLedger(ErrorBudget(max_failures=max_failures))
    with ledger_scope(ledger):
        it = SequentialIter(source, chunk_size=4)
    return it, ledger


def test_under_a_budget_failing_records_are_skipped_and_charged_in_order():
    it, ledger = _skipping(Broken(12, {2, 3, 9}), 5)
    assert list(it) == [0, 1, 4, 5, 6, 7, 8, 10, 11]
    assert [s.where for s in ledger.skipped] == [
        "reading Broken at position 2",
        "reading Broken at position 3",
        "reading Broken at position 9",
    ]
    assert ledger.skipped[0].error == "CorruptRecordError: record 2 is corrupt"


def test_past_the_budget_the_error_comes_at_the_failing_position():
    it, ledger = _skipping(Broken(12, {2, 3, 9}), 1)
    assert [next(it), next(it)] == [0, 1]
    with pytest.raises(ErrorBudgetExceededError, match="reading Broken at position 3") as caught:
        next(it)
    assert isinstance(caught.value.__cause__, CorruptRecordError)
    assert it.get_state() == {"position": 3}
    assert ledger.failures == 1


def test_skipping_resumes_exactly():
    source = Broken(30, {0, 7, 8, 29})
    expected = sorted(set(range(30)) - {0, 7, 8, 29})
    assert_resumes(lambda: _skipping(source, 10)[0], expected=expected)
