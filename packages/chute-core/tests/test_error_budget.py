import json
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chute_core import (
    ChuteError,
    ErrorBudget,
    ErrorBudgetExceededError,
    InvalidStateError,
    SkippedElement,
)
from chute_core._error_budget import KEEP, ErrorLedger, active_ledger, ledger_scope


def test_a_budget_allows_a_fixed_and_a_proportional_number_of_failures():
    assert ErrorBudget(max_failures=3).allowance(10**9) == 3
    assert ErrorBudget(max_failure_rate=0.01).allowance(99) == 0
    assert ErrorBudget(max_failure_rate=0.01).allowance(100) == 1
    assert ErrorBudget(2, 0.001).allowance(2500) == 4


@pytest.mark.parametrize(
    ("kwargs", "kind", "message"),
    [
        ({"max_failures": -1}, ValueError, "ErrorBudget: max_failures must be >= 0, got -1."),
        (
            {"max_failures": 1.5},
            TypeError,
            "ErrorBudget: max_failures must be an int, got float 1.5.",
        ),
        (
            {"max_failures": True},
            TypeError,
            "ErrorBudget: max_failures must be an int, got bool True.",
        ),
        (
            {"max_failure_rate": 1.0},
            ValueError,
            "ErrorBudget: max_failure_rate must be a number in [0, 1), got 1.0.",
        ),
        (
            {"max_failure_rate": float("nan")},
            ValueError,
            "ErrorBudget: max_failure_rate must be a number in [0, 1), got nan.",
        ),
        (
            {"max_failure_rate": "0.5"},
            TypeError,
            "ErrorBudget: max_failure_rate must be a number in [0, 1), got '0.5'.",
        ),
        (
            {},
            ValueError,
            "ErrorBudget: max_failures=0 and max_failure_rate=0 allow no failure at all; give "
            "one of them, or leave the budget out to raise at the first failure.",
        ),
    ],
)
def test_bad_budgets_are_refused_with_what_was_wrong(kwargs, kind, message):
    with pytest.raises(kind) as caught:
        ErrorBudget(**kwargs)
    assert isinstance(caught.value, ChuteError)
    assert str(caught.value) == message


def test_the_failure_past_the_budget_raises_chained_and_names_the_ones_before():
    ledger = ErrorLedger(ErrorBudget(max_failures=2))
    stage = ledger.register()
    ledger.charge(stage, (3,), "map(parse)", KeyError("a"), seen=4)
    ledger.charge(stage, (8, 1), "map(parse)", ValueError("b"), seen=9)
    cause = TypeError("c")
    with pytest.raises(ErrorBudgetExceededError) as caught:
        ledger.charge(stage, (12,), "filter(keep)", cause, seen=13)
    assert str(caught.value) == (
        "filter(keep) at position 12 raised TypeError: c; that is failure 3, and "
        "ErrorBudget(max_failures=2, max_failure_rate=0.0) allows 2 after 13 elements read. "
        "Skipped before: map(parse) at position 3 (KeyError: 'a'); map(parse) at position 8 "
        "(origin (8, 1)) (ValueError: b)."
    )
    assert caught.value.__cause__ is cause
    # The failure that did not fit is not counted: asking again raises again.
    assert ledger.failures == 2
    with pytest.raises(ErrorBudgetExceededError):
        ledger.charge(stage, (12,), "filter(keep)", cause, seen=13)


def test_an_element_charged_twice_counts_once():
    ledger = ErrorLedger(ErrorBudget(max_failures=1))
    stage = ledger.register()
    ledger.charge(stage, (5,), "map(f)", ValueError("x"), seen=6)
    ledger.charge(stage, (5,), "map(f)", ValueError("x"), seen=6)
    assert ledger.failures == 1
    # The same origin in another stage is another element.
    other = ledger.register()
    with pytest.raises(ErrorBudgetExceededError):
        ledger.charge(other, (5,), "map(g)", ValueError("y"), seen=6)


def test_a_collecting_ledger_never_raises_and_stamps_each_report():
    ledger = ErrorLedger(None)
    stage = ledger.register(2)
    ledger.at = 3
    ledger.charge(stage + 1, (7,), "map(f)", ValueError("x"), seen=8)
    ledger.at = 5
    ledger.charge(stage, None, "reading S", "OSError: gone", seen=11)
    assert ledger.reports == [
        (3, SkippedElement(1, (7,), "map(f) at position 7", "ValueError: x"), 8),
        (5, SkippedElement(0, None, "reading S at index 10 of the stream", "OSError: gone"), 11),
    ]
    assert ledger.failures == 0


def test_the_state_round_trips_through_json_and_replays_the_skipped_elements():
    ledger = ErrorLedger(ErrorBudget(max_failures=5))
    stage = ledger.register()
    ledger.charge(stage, (2,), "map(f)", ValueError("x" * 1000), seen=3)
    ledger.charge(stage, (4, 0), "map(f)", ValueError("y"), seen=5)
    state = json.loads(json.dumps(ledger.get_state()))
    assert state["failures"] == 2
    assert len(state["skipped"][0][3]) == 300  # Long messages are shortened.
    restored = ErrorLedger(ErrorBudget(max_failures=5))
    restored.register()
    restored.set_state(state)
    assert restored.failures == 2
    assert restored.skipped == ledger.skipped
    assert restored.replays(0, (2,)) and restored.replays(0, (4, 0))
    assert not restored.replays(0, (3,)) and not restored.replays(1, (2,))
    restored.charge(0, (2,), "map(f)", ValueError("x"), seen=3)  # A replay: not counted.
    assert restored.failures == 2


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (
            [1],
            "an error ledger's state is {'failures': n, 'skipped': [...]} (from get_state()), "
            "got [1].",
        ),
        (
            {"failures": -1, "skipped": []},
            f"the error ledger's state['failures'] = -1 is out of range [0, {sys.maxsize}] "
            "(a count).",
        ),
        (
            {"failures": 1, "skipped": {}},
            "the error ledger's state['skipped'] must be a list of skipped elements, got dict {}.",
        ),
        (
            {"failures": 1, "skipped": [[0, [1], "w"]]},
            "the error ledger's state['skipped'][0] must be [stage (an int >= 0), origin or "
            "null, where, error], got [0, [1], 'w'].",
        ),
        (
            {"failures": 1, "skipped": [[0, ["1"], "w", "e"]]},
            "the error ledger's state['skipped'][0] = [0, ['1'], 'w', 'e'] has origin ['1']: "
            f"its ints are in [0, {sys.maxsize}], at least one (or the origin is null).",
        ),
        (
            {"failures": 2, "skipped": [[0, [1], "w", "e"], [0, [2**63], "w", "e"]]},
            f"the error ledger's state['skipped'][1] = [0, [{2**63}], 'w', 'e'] has origin "
            f"[{2**63}]: its ints are in [0, {sys.maxsize}], at least one (or the origin is null).",
        ),
        (
            {"failures": 1, "skipped": [[0, [], "w", "e"]]},
            "the error ledger's state['skipped'][0] = [0, [], 'w', 'e'] has origin []: its ints "
            f"are in [0, {sys.maxsize}], at least one (or the origin is null).",
        ),
        (
            {"failures": 1, "skipped": [[2, [1], "w", "e"]]},
            "the error ledger's state['skipped'][0] = [2, [1], 'w', 'e']: its stage 2 is out of "
            "range [0, 1] (the 2 stages that skip failures).",
        ),
        (
            {"failures": 2, "skipped": [[1, [5, 0], "w", "e"], [1, [5, 0], "v", "f"]]},
            "the error ledger's state['skipped'][1] = [1, [5, 0], 'v', 'f'] is skipped twice; an "
            "element is skipped once.",
        ),
        (
            {"failures": 1, "skipped": [[0, [1], "w", "e"], [0, [2], "w", "e"]]},
            "the error ledger's state['skipped'] lists 2 skipped elements, more than the 1 it "
            "may keep (the 1 failures, at most 1000).",
        ),
        (
            {"failures": 2**63, "skipped": []},
            f"the error ledger's state['failures'] = {2**63} is out of range [0, {sys.maxsize}] "
            "(a count).",
        ),
    ],
)
def test_malformed_states_are_refused_and_change_nothing(state, message):
    ledger = ErrorLedger(ErrorBudget(5))
    ledger.register(2)
    ledger.charge(1, (3,), "map(f)", ValueError("x"), seen=4)
    before = ledger.get_state()
    with pytest.raises(InvalidStateError) as caught:
        ledger.set_state(state)
    assert str(caught.value) == message
    assert ledger.get_state() == before
    assert ledger.replay == frozenset()


def test_a_skipped_element_read_alone_names_itself():
    with pytest.raises(InvalidStateError) as caught:
        SkippedElement.from_json([0, [True], "w", "e"])
    assert str(caught.value) == (
        "a skipped element in an error ledger's state = [0, [True], 'w', 'e'] has origin "
        f"[True]: its ints are in [0, {sys.maxsize}], at least one (or the origin is null)."
    )


def test_the_state_keeps_the_most_recent_skips_and_the_whole_count():
    ledger = ErrorLedger(ErrorBudget(max_failures=KEEP + 10))
    stage = ledger.register()
    for position in range(KEEP + 10):
        ledger.charge(stage, (position,), "map(f)", ValueError("x"), seen=position + 1)
    state = ledger.get_state()
    assert state["failures"] == KEEP + 10
    assert [item[1] for item in state["skipped"]] == [[p] for p in range(10, KEEP + 10)]


def test_the_active_ledger_is_scoped():
    ledger = ErrorLedger(None)
    assert active_ledger() is None
    with ledger_scope(ledger):
        assert active_ledger() is ledger
        with ledger_scope(None):
            assert active_ledger() is None
        assert active_ledger() is ledger
    assert active_ledger() is None


@given(
    failing=st.lists(st.integers(0, 500), unique=True, max_size=40).map(sorted),
    max_failures=st.integers(0, 5),
    rate=st.sampled_from([0.0, 0.01, 0.05]),
)
def test_the_budget_runs_out_at_the_first_failure_past_the_allowance(failing, max_failures, rate):
    if max_failures == 0 and rate == 0.0:
        max_failures = 1
    budget = ErrorBudget(max_failures, rate)
    ledger = ErrorLedger(budget)
    stage = ledger.register()
    expected_stop = next(
        (k for k, p in enumerate(failing) if k + 1 > budget.allowance(p + 1)), None
    )
    stopped = None
    for k, position in enumerate(failing):
        try:
            ledger.charge(stage, (position,), "map(f)", ValueError(), seen=position + 1)
        except ErrorBudgetExceededError:
            stopped = k
            break
    assert stopped == expected_stop
    assert ledger.failures == (len(failing) if stopped is None else stopped)
