"""The runtime autotuner: its policy (on a clock of the test's) and its switches (real workers).

The policy is tested on measurements the test makes up, so its decisions are exact.
The switches are tested with a scripted tuner that changes workers and buffers at
chosen units, with real worker processes: the elements and states must be those of
an untuned run, whatever the changes and wherever they fall.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_execution import (
    AutotuneOptions,
    ChunkPlan,
    DataLoader,
    MultiprocessBatchIter,
    MultiprocessingOptions,
    MultiprocessPrefetchIter,
    RayOptions,
    TraceRecorder,
    TuningDecision,
    tracing,
)
from chute_execution.internal import GAIN, RETRY, Tuner
from chute_samplers import IndexSampler, NoSharding
from chute_sources import RangeSource, SequenceSource
from chute_testing import assert_resumes, assert_trees_equal
from chute_testing.execution import Busy, Remainder, Repeat
from chute_transforms import FilterIter, FlatMapIter, MapIter


class Clock:
    """Seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _feed(tuner, clock, rate, wait_share, units, nbytes=0, unit_seconds=0.125):
    """`units` units at `rate` positions/s, the consumer waiting `wait_share` of the time.

    Returns the changes the tuner asked for, applying each at once.
    """
    changes = []
    for _ in range(units):
        clock.now += unit_seconds
        change = tuner.record(round(rate * unit_seconds), wait_share * unit_seconds, nbytes)
        if change is not None:
            changes.append(change)
            tuner.applied()
    return changes


def _tuner(clock, workers=0, buffer_size=2, read_threads=0, **bounds):
    options = AutotuneOptions(interval_seconds=0.5, **{"max_workers": 8, **bounds})
    return Tuner(options, workers, buffer_size, read_threads, clock=clock)


def test_a_consumer_short_of_input_gets_workers_then_keeps_them_while_they_pay():
    clock = Clock()
    tuner = _tuner(clock)
    assert _feed(tuner, clock, 100, 1.0, 5) == [(2, 2, 0)]  # 0 -> 2 workers.
    assert _feed(tuner, clock, 190, 0.9, 6) == [(3, 2, 0)]  # Kept (+90%); x1.5 next.
    assert _feed(tuner, clock, 250, 0.5, 6) == [(4, 2, 0)]  # Kept; +1 (3 * 1.5 = 4).
    assert [d.reason for d in tuner.decisions] == ["more workers"] * 3
    assert [(d.workers, d.buffer_size) for d in tuner.decisions] == [(2, 2), (3, 2), (4, 2)]
    assert all(d.read_threads == 0 for d in tuner.decisions)


def test_a_trial_without_gain_is_reverted_and_its_direction_rested():
    clock = Clock()
    tuner = _tuner(clock, workers=2)
    assert _feed(tuner, clock, 800, 1.0, 5) == [(3, 2, 0)]
    flat = 800 * (1 + GAIN) - 8  # Not enough gain: 104 positions a unit rather than 100.
    # Each measurement is 4 units of 0.125 s; after a change the first unit is left
    # out and the next opens it.
    assert _feed(tuner, clock, flat, 1.0, 6) == [(2, 2, 0)]  # Reverted.
    workers_refused = tuner.measurements
    assert _feed(tuner, clock, flat, 1.0, 6) == [(2, 2, 4)]  # Then more read threads,
    assert _feed(tuner, clock, flat, 1.0, 6) == [(2, 2, 0)]
    assert _feed(tuner, clock, flat, 1.0, 6) == [(2, 4, 0)]  # then deeper buffers,
    assert _feed(tuner, clock, flat, 1.0, 6) == [(2, 2, 0)]  # which gave nothing either.
    reasons = [d.reason for d in tuner.decisions]
    tried = ["more workers", "more read threads", "deeper buffers"]
    assert reasons == [reason for trial in tried for reason in (trial, "reverted")]
    changes = []
    while not changes:  # All rest; the workers are tried again after RETRY measurements.
        changes = _feed(tuner, clock, flat, 1.0, 1)
    assert changes == [(3, 2, 0)] and tuner.measurements == workers_refused + RETRY


def test_read_threads_grow_while_they_pay():
    clock = Clock()
    tuner = _tuner(clock, workers=1, max_workers=1, max_read_threads=10)
    assert _feed(tuner, clock, 800, 1.0, 5) == [(1, 2, 4)]  # 0 -> 4 threads.
    assert _feed(tuner, clock, 1600, 1.0, 6) == [(1, 2, 8)]  # Kept; x2.
    assert _feed(tuner, clock, 2400, 1.0, 6) == [(1, 2, 10)]  # Kept; at most 10.
    assert _feed(tuner, clock, 2400, 1.0, 6) == [(1, 2, 8)]  # No gain: back to 8.
    assert _feed(tuner, clock, 3200, 1.0, 6) == [(1, 4, 8)]  # Then buffers.


def test_the_first_unit_of_each_new_worker_is_left_out():
    clock = Clock()
    tuner = _tuner(clock)
    assert _feed(tuner, clock, 800, 1.0, 5) == [(2, 2, 0)]
    tuner.record(0, 0.0, 0)  # Unit 6 was asked for before the change applied: pending.
    tuner.applied(2)
    # The two workers' first units come together once they started: neither counts.
    assert tuner.record(100, 0.125, 0) is None and tuner.record(100, 0.0, 0) is None
    opened = clock.now
    clock.now += 0.5
    assert tuner.record(400, 0.5, 0) is None  # 0.5 s after the last of them: one unit.
    clock.now += 0.125
    assert tuner.record(50, 0.125, 0) == (0, 2, 0)  # 450 positions / 0.625 s: reverted.
    assert tuner.decisions[-1].rate == pytest.approx(450 / (clock.now - opened))


def test_a_consumer_that_hardly_waits_is_left_alone():
    clock = Clock()
    tuner = _tuner(clock, workers=1)
    assert _feed(tuner, clock, 1000, 0.05, 100) == []
    assert tuner.config == (1, 2, 0) and tuner.decisions == []


def test_bounds_workers_buffers_and_memory():
    clock = Clock()
    tuner = _tuner(clock, workers=2, max_workers=2, max_buffer_size=4, max_read_threads=0)
    assert _feed(tuner, clock, 100, 1.0, 5) == [(2, 4, 0)]  # No more workers nor threads.
    assert _feed(tuner, clock, 200, 1.0, 30) == []  # Kept; nothing left to try.
    # 2 workers x (4 + 1) chunks of 30 MiB exceed 256 MiB: no deeper buffers than 2.
    tight = _tuner(
        Clock(), workers=2, max_workers=2, max_buffer_size=8, max_read_threads=0, ram_budget_mb=256
    )
    assert _feed(tight, tight._clock, 100, 1.0, 30, nbytes=30 * 2**20) == []


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 5000), st.floats(0, 1), st.integers(0, 2**26)), max_size=200
    ),
    start=st.tuples(st.integers(0, 3), st.integers(1, 4), st.integers(0, 4)),
    bounds=st.tuples(st.integers(1, 6), st.integers(1, 8), st.integers(0, 9), st.integers(1, 512)),
)
def test_decisions_stay_within_bounds_and_reverts_go_back(steps, start, bounds):
    most, deepest, threads, budget = bounds
    clock = Clock()
    options = AutotuneOptions(most, deepest, threads, budget, interval_seconds=0.3)
    workers, buffer_size, read_threads = start[0], min(start[1], deepest), start[2]
    tuner = Tuner(options, workers, buffer_size, read_threads, clock=clock)
    history = [tuner.config]
    largest = 0
    for rate, share, nbytes in steps:
        clock.now += 0.1
        largest = max(largest, nbytes)
        change = tuner.record(rate, share * 0.1, nbytes)
        if change is None:
            continue
        tuner.applied()
        decision = tuner.decisions[-1]
        assert (decision.workers, decision.buffer_size, decision.read_threads) == change
        assert change == tuner.config
        if decision.reason == "reverted":
            assert change == history[-2]
        else:
            assert change != history[-1]
            assert change[0] <= max(most, workers) and change[1] <= max(deepest, buffer_size)
            assert change[2] <= max(threads, read_threads)
            assert change[0] * (change[1] + 1) * largest <= budget * 2**20
        history.append(change)


def test_options_are_checked():
    with pytest.raises(ValueError, match="max_workers"):
        AutotuneOptions(max_workers=0)
    with pytest.raises(ValueError, match="max_buffer_size"):
        AutotuneOptions(max_buffer_size=0)
    with pytest.raises(ValueError, match="max_read_threads"):
        AutotuneOptions(max_read_threads=-1)
    with pytest.raises(ValueError, match="interval_seconds must be a number of seconds > 0"):
        AutotuneOptions(interval_seconds=0)
    with pytest.raises(TypeError, match="autotune must be True, False or an AutotuneOptions"):
        MultiprocessingOptions(autotune="yes")
    sampler = IndexSampler(4, shard_options=NoSharding(), num_epochs=1)
    with pytest.raises(ValueError, match="autotune applies to local worker processes"):
        DataLoader(
            data_source=RangeSource(4), sampler=sampler, ray_options=RayOptions(), autotune=True
        )


# --- switches, with real workers ------------------------------------------------------


class Scripted(Tuner):
    """A tuner that changes to `script[n]` when told of its n-th unit (1-based)."""

    def __init__(self, script):
        super().__init__(AutotuneOptions(max_workers=3), 0, 1, 0)
        self.script = dict(script)
        self.calls = 0

    def record(self, positions, waited, nbytes):
        self.calls += 1
        change = self.script.get(self.calls)
        if change is not None:
            self.config = change
            self.decisions.append(TuningDecision(0.0, *change, "scripted", 0.0, 0.0))
        return change


def _scripted(make, script):
    iterator = make()
    iterator._tuner = Scripted(script)
    return iterator


def _filtered_plan(n=150):
    ops = [(FilterIter, (Remainder(3, 1),), {}), (FlatMapIter, (Repeat(3),), {})]
    return ChunkPlan(SequenceSource(list(range(n))), [*ops, (MapIter, (abs,), {})], 8)


_CONFIG = st.tuples(st.integers(0, 3), st.integers(1, 3), st.sampled_from([0, 2, 4]))


@settings(max_examples=12, deadline=None)
@given(script=st.dictionaries(st.integers(1, 22), _CONFIG, max_size=4), batch=st.booleans())
def test_any_switches_leave_the_elements_as_they_are(script, batch):
    plan = _filtered_plan()
    options = MultiprocessingOptions(0, 1, autotune=True)
    if batch:
        expected = list(MultiprocessBatchIter(plan, MultiprocessingOptions(0), 5))
        iterator = MultiprocessBatchIter(plan, options, 5)
        iterator._chunks._tuner = Scripted(script)
    else:
        expected = list(MultiprocessPrefetchIter(plan, MultiprocessingOptions(0)))
        iterator = _scripted(lambda: MultiprocessPrefetchIter(plan, options), script)
    assert_trees_equal(list(iterator), expected)


def test_states_taken_around_switches_restore_exactly():
    plan = _filtered_plan(90)
    options = MultiprocessingOptions(0, 1, autotune=True)
    script = {2: (2, 1, 0), 4: (1, 3, 4), 5: (0, 1, 2), 8: (3, 2, 0)}
    # With 0 workers nothing is in flight: unit 8's change applies at unit 9.
    run = _scripted(lambda: MultiprocessPrefetchIter(plan, options), script)
    assert len(list(run)) > 0 and run.num_workers == 3
    assert_resumes(
        lambda: _scripted(lambda: MultiprocessPrefetchIter(plan, options), script),
        every=5,
        make_restored=[lambda: MultiprocessPrefetchIter(plan, MultiprocessingOptions(2))],
        expected=list(MultiprocessPrefetchIter(plan, MultiprocessingOptions(0))),
    )


def test_a_restore_while_a_change_waits_for_units_in_flight():
    plan = _filtered_plan()
    options = MultiprocessingOptions(2, 2, autotune=True)
    expected = list(MultiprocessPrefetchIter(plan, MultiprocessingOptions(0)))
    iterator = _scripted(lambda: MultiprocessPrefetchIter(plan, options), {1: (3, 1, 2)})
    taken = [next(iterator) for _ in range(3)]  # The change waits for 3 more units.
    assert iterator.holding_units()
    state = iterator.get_state()
    taken += [next(iterator) for _ in range(2)]
    iterator.set_state(state)
    assert_trees_equal(taken[:3] + list(iterator), expected)
    assert iterator.num_workers == 3 and not iterator.holding_units()


def test_a_change_waiting_when_the_pool_closes_applies_at_the_next_unit():
    plan = _filtered_plan()
    options = MultiprocessingOptions(2, 2, autotune=True)
    expected = list(MultiprocessPrefetchIter(plan, MultiprocessingOptions(0)))
    iterator = _scripted(lambda: MultiprocessPrefetchIter(plan, options), {1: (3, 1, 0)})
    taken = [next(iterator) for _ in range(3)]
    assert iterator.holding_units()
    iterator.close()  # Nothing is in flight now; next() goes on where it was.
    assert_trees_equal(taken + list(iterator), expected)
    assert iterator.num_workers == 3


def test_the_tuner_measures_real_workers_and_the_output_is_unchanged():
    plan = ChunkPlan(SequenceSource(list(range(400))), [(MapIter, (Busy(0.0005),), {})], 8)
    bounds = AutotuneOptions(max_workers=2, max_buffer_size=4, interval_seconds=0.05)
    recorder = TraceRecorder()
    with tracing(recorder):
        iterator = MultiprocessPrefetchIter(plan, MultiprocessingOptions(0, autotune=bounds))
    assert list(iterator) == list(range(400))
    decisions = iterator.tuning
    assert decisions == tuple(iterator._tuner.decisions)
    for decision in decisions:
        assert 0 <= decision.workers <= 2 and 1 <= decision.buffer_size <= 4
        assert 0 <= decision.input_wait <= 1 and decision.rate > 0
    events = [e for e in recorder.document()["traceEvents"] if e.get("name") == "autotune"]
    applied = [(e["args"]["workers"], e["args"]["buffer_size"]) for e in events]
    assert applied == [(d.workers, d.buffer_size) for d in decisions][: len(applied)]
    assert all(0 <= d.read_threads <= 16 for d in decisions)
