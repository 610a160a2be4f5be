"""The autotuner's warm start: a later iterator of a plan starts where the last one settled.

The policy is tested on a clock of the test's, so its decisions are exact; the
plumbing (a plan's iterators, a `DataLoader`'s) with real workers, where what the
first iterator kept is read from the plan's memory and the elements must not change.
"""

import dataclasses

from chute_core import ErrorBudget
from chute_execution import (
    AutotuneOptions,
    ChunkPlan,
    DataLoader,
    MultiprocessingOptions,
    MultiprocessPrefetchIter,
    WorkerPlan,
)
from chute_execution.internal import (
    FEWER,
    GAIN,
    RETRY,
    WARM_START,
    Settled,
    Tuner,
    TuningMemory,
)
from chute_samplers import IndexSampler, NoSharding
from chute_sources import RangeSource, SequenceSource
from chute_testing import assert_trees_equal
from chute_testing.execution import BrokenSource, Busy
from chute_transforms import MapIter, MapTransform, SkipErrorsIter


class Clock:
    """Seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _feed(tuner, clock, rate, wait_share, units, nbytes=0):
    """`units` units of 0.125 s at `rate` positions/s; the changes asked for, each applied."""
    changes = []
    for _ in range(units):
        clock.now += 0.125
        change = tuner.record(round(rate * 0.125), wait_share * 0.125, nbytes)
        if change is not None:
            changes.append(change)
            tuner.applied()
    return changes


def _tuner(clock, memory, workers=0, **bounds):
    options = AutotuneOptions(interval_seconds=0.5, **{"max_workers": 8, **bounds})
    return Tuner(options, workers, 2, 0, clock=clock, memory=memory)


def test_the_next_tuner_starts_where_the_last_settled_and_rests_what_it_rested():
    clock, memory = Clock(), TuningMemory()
    first = _tuner(clock, memory)
    assert _feed(first, clock, 100, 1.0, 5) == [(2, 2, 0)]  # A trial: not kept yet.
    assert memory.settled.config == (0, 2, 0)
    assert _feed(first, clock, 190, 0.9, 6) == [(3, 2, 0)]  # Kept; the next trial.
    # Workers kept: giving them back rests as long as a refused direction.
    assert memory.settled.config == (2, 2, 0)
    assert memory.settled.resting == (("fewer", RETRY),)
    flat = 192  # 24 positions a unit: no gain over 190.
    assert flat < 190 * (1 + GAIN)
    # No gain: reverted (the consumer no longer short of input: nothing else is tried).
    assert _feed(first, clock, flat, 0.0, 6) == [(2, 2, 0)]
    refused_at = first.measurements
    assert memory.settled.config == (2, 2, 0)
    assert memory.settled.resting == (("fewer", RETRY - 1), ("workers", RETRY))
    assert _feed(first, clock, flat, 0.0, 9) == []  # Two measurements more.
    assert first.measurements == refused_at + 2
    assert memory.settled.resting == (("fewer", RETRY - 3), ("workers", RETRY - 2))
    assert memory.settled.rate == flat and memory.settled.input_wait == 0.0
    assert (memory.settled.start, memory.settled.options) == ((0, 2, 0), first.options)

    assert _tuner(clock, memory).config == (0, 2, 0)  # First still holds the memory.
    first.finish()  # Its iterator ended.
    second = _tuner(clock, memory)
    assert second.config == (2, 2, 0)
    [decision] = second.decisions
    assert (decision.seconds, decision.reason, decision.rate) == (0.0, WARM_START, flat)
    assert (decision.workers, decision.buffer_size, decision.read_threads) == (2, 2, 0)
    # The two workers' first units are left out, as after a change. Short of input
    # again: the workers still rest, so read threads are tried first,
    assert _feed(second, clock, flat, 1.0, 5) == []
    assert _feed(second, clock, flat, 1.0, 1) == [(2, 2, 4)]
    assert _feed(second, clock, flat, 1.0, 6) == [(2, 2, 0)]
    assert _feed(second, clock, flat, 1.0, 6) == [(2, 4, 0)]
    assert _feed(second, clock, flat, 1.0, 6) == [(2, 2, 0)]
    changes = []
    while not changes:  # and the workers again once their rest is over, as in the first.
        changes = _feed(second, clock, flat, 1.0, 1)
    assert changes == [(3, 2, 0)]
    assert first.measurements - refused_at + second.measurements == RETRY


def _settled(memory, config, **fields):
    options = AutotuneOptions(interval_seconds=0.5, max_workers=8)
    memory.remember(Settled(config, start=(1, 2, 0), options=options, **fields))


def test_only_a_tuner_with_the_same_start_and_bounds_starts_where_the_last_settled():
    clock = Clock()
    for workers, bounds in [(2, {}), (1, {"max_workers": 4}), (1, {"max_read_threads": 4})]:
        memory = TuningMemory()
        _settled(memory, (3, 4, 0))
        tuner = _tuner(clock, memory, workers=workers, **bounds)
        assert tuner.config == (workers, 2, 0) and tuner.decisions == []
    memory = TuningMemory()
    _settled(memory, (3, 4, 0))
    assert _tuner(clock, memory, workers=1).config == (3, 4, 0)
    _settled(memory, (2, 3, 0), largest=2**20)  # 2 x 4 x 1 MiB: past 7 MiB, within 8.
    assert _tuner(clock, memory, workers=1, ram_budget_mb=8).config == (1, 2, 0)  # Bounds.
    memory.remember(dataclasses.replace(memory.settled, options=_tuner(clock, None).options))
    tuner = _tuner(clock, memory, workers=1)
    assert tuner.config == (2, 3, 0) and [d.reason for d in tuner.decisions] == [WARM_START]


def test_workers_the_consumer_does_not_wait_for_are_given_back_down_to_the_start():
    clock, memory = Clock(), TuningMemory()
    _settled(memory, (6, 2, 0), resting=(("fewer", 2),))
    tuner = _tuner(clock, memory, workers=1)
    assert tuner.config == (6, 2, 0)
    assert _feed(tuner, clock, 800, 0.0, 6 + 4) == []  # A measurement; giving back rests,
    assert _feed(tuner, clock, 800, 0.0, 4) == [(4, 2, 0)]  # then a third fewer, kept
    assert _feed(tuner, clock, 790, 0.05, 6) == [(3, 2, 0)]  # as the rate holds;
    assert _feed(tuner, clock, 790, 0.5, 4) == [(4, 2, 0)]  # the consumer waits: back,
    assert [d.reason for d in tuner.decisions] == [WARM_START, FEWER, FEWER, "reverted"]
    assert memory.settled.config == (4, 2, 0)
    refused_at, changes = tuner.measurements, []
    while not changes:  # Tried again after its rest.
        changes = _feed(tuner, clock, 800, 0.0, 1)
    assert changes == [(3, 2, 0)] and tuner.measurements == refused_at + RETRY
    assert _feed(tuner, clock, 700, 0.0, 6) == [(4, 2, 0)]  # The rate fell: back.
    lone = _tuner(clock, None, workers=4)
    assert _feed(lone, clock, 800, 0.0, 40) == []  # Never below the start.


def _slow_plan(n=400):
    return ChunkPlan(SequenceSource(list(range(n))), [(MapIter, (Busy(0.0005),), {})], 8)


def test_a_plans_iterators_share_its_memory_and_keep_their_elements():
    bounds = AutotuneOptions(max_workers=2, max_buffer_size=4, interval_seconds=0.05)
    plan = WorkerPlan(_slow_plan(), MultiprocessingOptions(0, autotune=bounds))
    first = plan.build()
    assert list(first) == list(range(400))
    settled = plan.tuning_memory.settled
    assert settled is not None  # 400 elements of 0.5 ms: measurements of 0.05 s were judged.
    assert (settled.start, settled.options) == ((0, 2, 0), bounds)
    plan.tuning_memory.remember(dataclasses.replace(settled, config=(2, 3, 4)))
    second = plan.build()
    assert (second.num_workers, second._plan.read_threads) == (2, 4)
    start = second.tuning[0]
    assert (start.reason, start.workers, start.buffer_size, start.read_threads) == (
        WARM_START, 2, 3, 4,
    )  # fmt: skip
    assert list(second) == list(range(400))
    # A copy of the plan with other options starts from its own.
    other = dataclasses.replace(plan, options=MultiprocessingOptions(1, 2, autotune=bounds))
    assert other.tuning_memory is plan.tuning_memory
    third = other.build()
    assert third.num_workers == 1 and third.tuning[:1] != (start,)
    third.close()


def test_iterators_running_at_once_leave_the_memory_to_the_first():
    bounds = AutotuneOptions(max_workers=2, max_buffer_size=4, interval_seconds=60)
    plan = WorkerPlan(_slow_plan(40), MultiprocessingOptions(0, autotune=bounds))
    plan.tuning_memory.remember(Settled((2, 3, 0), start=(0, 2, 0), options=bounds))
    first, second = plan.build(), plan.build()
    assert [d.reason for d in first.tuning] == [WARM_START] and first.num_workers == 2
    assert second.tuning == () and second.num_workers == 0  # Cold: the options' start.
    assert next(first) == 0 and next(second) == 0
    second.close()
    third = plan.build()  # The first still runs: the memory is still its.
    assert third.tuning == ()
    assert list(first) == list(range(1, 40))  # Exhausted: it lets go.
    fourth = plan.build()
    assert [d.reason for d in fourth.tuning] == [WARM_START] and fourth.num_workers == 2
    del fourth  # Garbage: its hold ends with it.
    fifth = plan.build()
    assert fifth.num_workers == 2
    fifth.close()
    assert plan.build().num_workers == 2  # Closed: let go.
    assert list(third) == list(range(40))


def test_an_iterator_read_again_after_close_neither_holds_nor_writes_the_memory():
    bounds = AutotuneOptions(max_workers=2, max_buffer_size=4, interval_seconds=0.01)
    plan = WorkerPlan(_slow_plan(400), MultiprocessingOptions(0, autotune=bounds))
    plan.tuning_memory.remember(Settled((2, 3, 0), start=(0, 2, 0), options=bounds))
    first = plan.build()
    assert next(first) == 0 and first.num_workers == 2
    first.close()
    assert next(first) == 1  # It goes on, with the workers it had,
    second = plan.build()  # but the memory is the next iterator's.
    assert [d.reason for d in second.tuning] == [WARM_START] and second.num_workers == 2
    kept = plan.tuning_memory.settled
    assert list(first) == list(range(2, 400))  # Its measurements are no longer written.
    assert plan.tuning_memory.settled is kept
    second.close()


def test_a_warm_start_under_an_error_budget_reads_with_its_threads_and_skips_alike():
    plan = ChunkPlan(BrokenSource(60, {3, 17, 41}), [(MapIter, (abs,), {})], 8)
    bounds = AutotuneOptions(max_workers=2, interval_seconds=60)
    memory = TuningMemory()
    memory.remember(Settled((1, 2, 4), start=(0, 2, 0), options=bounds))
    budget = ErrorBudget(max_failures=5)

    made = []

    def make(options, memory=None):
        def inner():
            made.append(MultiprocessPrefetchIter(plan, options, tuning_memory=memory))
            return made[-1]

        return SkipErrorsIter(inner, budget)

    expected = list(make(MultiprocessingOptions(0)))
    warm = make(MultiprocessingOptions(0, autotune=bounds), memory)
    assert_trees_equal(list(warm), expected)
    assert len(expected) == 57 and warm.failures == 3
    # The ledger's plan (errors skipped in the workers) kept the warm start's threads.
    assert (made[-1]._plan.read_threads, made[-1]._plan.skip_errors) == (4, True)


class BusyMap(MapTransform):
    """0.5 ms of work per record (module level: it travels to the workers)."""

    def map(self, element):
        return Busy(0.0005)(element)


def test_a_data_loaders_next_iterator_starts_where_the_last_settled():
    sampler = IndexSampler(300, shard_options=NoSharding(), num_epochs=1)
    bounds = AutotuneOptions(max_workers=2, interval_seconds=0.05)
    loader = DataLoader(
        data_source=RangeSource(300),
        sampler=sampler,
        operations=[BusyMap()],
        worker_count=0,
        autotune=bounds,
    )
    expected = list(loader)
    settled = loader._tuning_memory.settled
    assert settled is not None and settled.start == (0, 1, 0)  # The loader's buffer: 1.
    loader._tuning_memory.remember(dataclasses.replace(settled, config=(1, 2, 0)))
    again = iter(loader)
    assert (again.tuning[0].reason, again.num_workers) == (WARM_START, 1)
    assert_trees_equal(list(again), expected)
