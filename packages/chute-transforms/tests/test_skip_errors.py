import json

import pytest

from chute_core import ErrorBudget, ErrorBudgetExceededError, InvalidStateError
from chute_samplers import SequentialIter, WindowShuffleIter
from chute_testing import assert_resumes
from chute_transforms import (
    FilterIter,
    FlatMapIter,
    MapIter,
    MapWithIndexIter,
    RandomMapIter,
    SkipErrorsIter,
)


def fail_on(bad):
    def fn(x):
        if x in bad:
            raise ValueError(f"bad {x}")
        return x

    fn.__name__ = "check"
    return fn


GENEROUS = ErrorBudget(max_failures=100)


def _run(make, budget=GENEROUS):
    it = SkipErrorsIter(make, budget)
    return list(it), it


def test_map_skips_failing_elements_and_names_them():
    out, it = _run(lambda: MapIter(SequentialIter(range(10)), fail_on({2, 7})))
    assert out == [0, 1, 3, 4, 5, 6, 8, 9]
    assert it.failures == 2
    assert [(s.where, s.error) for s in it.skipped] == [
        ("map(check) at position 2", "ValueError: bad 2"),
        ("map(check) at position 7", "ValueError: bad 7"),
    ]


def test_filter_flat_map_and_map_with_index_skip_failing_elements():
    def make():
        stream = FilterIter(SequentialIter(range(12)), lambda x: fail_on({3})(x) % 2 == 0)
        stream = FlatMapIter(stream, lambda x: [x, fail_on({8})(x) + 100])
        return MapWithIndexIter(stream, lambda i, x: (i, fail_on({104})(x)))

    out, it = _run(make)
    # 3 fails the filter, 8 fails the flat map (none of its outputs), 104 fails the last
    # map (the other output of 4 stays); indices count the outputs.
    assert out == [(0, 0), (1, 100), (2, 2), (3, 102), (4, 4), (5, 6), (6, 106), (7, 10), (8, 110)]
    assert [s.where for s in it.skipped] == [
        "filter(<lambda>) at position 3",
        "map_with_index(<lambda>) at position 4 (origin (4, 1))",
        "flat_map(<lambda>) at position 8",
    ]


def test_random_map_draws_do_not_change_for_the_elements_that_survive():
    def draw(x, rng):
        fail_on({1, 4})(x)
        return round(x + rng.random(), 6)

    out, _ = _run(lambda: RandomMapIter(SequentialIter(range(6)), draw, seed=3))
    whole = list(
        RandomMapIter(SequentialIter(range(6)), lambda x, rng: round(x + rng.random(), 6), 3)
    )
    assert out == [whole[p] for p in (0, 2, 3, 5)]


def test_past_the_budget_next_raises_chained_and_again_on_retry():
    it = SkipErrorsIter(
        lambda: MapIter(SequentialIter(range(10)), fail_on({2, 5, 6})), ErrorBudget(2)
    )
    assert [next(it) for _ in range(4)] == [0, 1, 3, 4]
    with pytest.raises(ErrorBudgetExceededError) as caught:
        next(it)
    assert str(caught.value).startswith(
        "map(check) at position 6 raised ValueError: bad 6; that is failure 3"
    )
    assert isinstance(caught.value.__cause__, ValueError)
    assert it.failures == 2


def test_a_rate_budget_allows_failures_in_proportion_to_what_was_read():
    bad = set(range(0, 1000, 100))  # 1 in 100.
    out, it = _run(
        lambda: MapIter(SequentialIter(range(1000)), fail_on(bad)),
        ErrorBudget(max_failures=1, max_failure_rate=0.01),
    )
    assert len(out) == 990 and it.failures == 10
    with pytest.raises(ErrorBudgetExceededError, match="at position 100 raised"):
        _run(
            lambda: MapIter(SequentialIter(range(1000)), fail_on(bad)),
            ErrorBudget(max_failures=1, max_failure_rate=0.005),
        )


def test_errors_after_the_stage_are_not_skipped():
    def make():
        return SkipErrorsIter(lambda: SequentialIter(range(4)), ErrorBudget(5))

    with pytest.raises(ValueError, match="bad 2"):
        list(MapIter(make(), fail_on({2})))


def test_skipping_resumes_exactly_with_the_failures_counted_on():
    def make():
        return SkipErrorsIter(
            lambda: FlatMapIter(
                MapIter(SequentialIter(range(40)), fail_on({0, 13, 14, 39})),
                lambda x: [x] * (x % 3),
            ),
            ErrorBudget(max_failures=4),
        )

    elements = assert_resumes(make)
    it = make()
    for _ in range(20):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    assert state["errors"]["failures"] == 3  # 0, 13 and 14: the output after 14 is out.
    restored = make()
    restored.set_state(state)
    assert list(restored) == elements[20:]
    assert restored.failures == 4


def test_a_transient_failure_is_skipped_again_on_a_replay_after_restore():
    calls = []

    def flaky(x):  # Fails the first time it sees 5 only.
        calls.append(x)
        if x == 5 and calls.count(5) == 1:
            raise OSError("timeout")
        return x

    def make():
        # A window shuffle's state holds no elements: a restore reads the window again.
        return SkipErrorsIter(
            lambda: WindowShuffleIter(MapIter(SequentialIter(range(12)), flaky), 4, seed=0),
            ErrorBudget(3),
        )

    it = make()
    first = [next(it) for _ in range(5)]  # The first window, and one of the second.
    assert it.failures == 1 and calls.count(5) == 1
    state = json.loads(json.dumps(it.get_state()))
    rest = list(it)
    assert sorted(first[4:] + rest) == [4, 6, 7, 8, 9, 10, 11]
    restored = make()
    restored.set_state(state)
    assert list(restored) == rest  # 5 is skipped again, without being run.
    assert calls.count(5) == 1 and restored.failures == 1


def test_bad_arguments_and_states_are_refused():
    with pytest.raises(TypeError, match="SkipErrorsIter: budget must be an ErrorBudget, got int 3"):
        SkipErrorsIter(lambda: SequentialIter([1]), 3)  # type: ignore[arg-type]
    it = SkipErrorsIter(lambda: SequentialIter([1]), ErrorBudget(1))
    with pytest.raises(InvalidStateError, match=r"missing \['errors'\]"):
        it.set_state({"parent": {"position": 0}})
