"""The autotuner's warm start: a later iterator of a plan starts where the last one settled.

The policy is tested on a clock of the test's, so its decisions are exact; the
plumbing (a plan's iterators, a `DataLoader`'s) with real workers, where what the
first iterator kept is read from the plan's memory and the elements must not change.
"""

from chute_execution import (
    AutotuneOptions,
    ChunkPlan,
    DataLoader,
    MultiprocessingOptions,
    WorkerPlan,
)
from chute_execution.internal import GAIN, RETRY, WARM_START, Settled, Tuner, TuningMemory
from chute_samplers import IndexSampler, NoSharding
from chute_sources import RangeSource, SequenceSource
from chute_testing import assert_trees_equal
from chute_testing.execution import Busy
from chute_transforms import MapIter, MapTransform


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
    assert memory.settled.config == (2, 2, 0) and memory.settled.resting == ()
    flat = 192  # 24 positions a unit: no gain over 190.
    assert flat < 190 * (1 + GAIN)
    # No gain: reverted (the consumer no longer short of input: nothing else is tried).
    assert _feed(first, clock, flat, 0.0, 6) == [(2, 2, 0)]
    refused_at = first.measurements
    assert memory.settled.config == (2, 2, 0)
    assert memory.settled.resting == (("workers", RETRY),)
    assert _feed(first, clock, flat, 0.0, 9) == []  # Two measurements more.
    assert first.measurements == refused_at + 2
    assert memory.settled.resting == (("workers", RETRY - 2),)
    assert memory.settled.rate == flat and memory.settled.input_wait == 0.0

    second = _tuner(clock, memory)
    assert second.config == (2, 2, 0)
    [decision] = second.decisions
    assert (decision.seconds, decision.reason, decision.rate) == (0.0, WARM_START, flat)
    assert (decision.workers, decision.buffer_size, decision.read_threads) == (2, 2, 0)
    # Short of input again: the workers still rest, so read threads are tried first,
    assert _feed(second, clock, flat, 1.0, 5) == [(2, 2, 4)]
    assert _feed(second, clock, flat, 1.0, 6) == [(2, 2, 0)]
    assert _feed(second, clock, flat, 1.0, 6) == [(2, 4, 0)]
    assert _feed(second, clock, flat, 1.0, 6) == [(2, 2, 0)]
    changes = []
    while not changes:  # and the workers again once their rest is over, as in the first.
        changes = _feed(second, clock, flat, 1.0, 1)
    assert changes == [(3, 2, 0)]
    assert first.measurements - refused_at + second.measurements == RETRY


def test_a_settling_outside_the_bounds_is_not_a_start():
    clock = Clock()
    for settled, bounds in [
        (Settled((4, 2, 0)), {"max_workers": 3}),
        (Settled((1, 8, 0)), {"max_buffer_size": 4}),
        (Settled((1, 2, 8)), {"max_read_threads": 4}),
        (Settled((2, 3, 0), largest=2**20), {"ram_budget_mb": 7}),  # 2 x 4 x 1 MiB > 7 MiB.
    ]:
        memory = TuningMemory()
        memory.remember(settled)
        tuner = _tuner(clock, memory, workers=1, **bounds)
        assert tuner.config == (1, 2, 0) and tuner.decisions == []
    memory = TuningMemory()
    memory.remember(Settled((2, 3, 0), largest=2**20))
    assert _tuner(clock, memory, ram_budget_mb=8).config == (2, 3, 0)  # Just within.


def _slow_plan(n=400):
    return ChunkPlan(SequenceSource(list(range(n))), [(MapIter, (Busy(0.0005),), {})], 8)


def test_a_plans_next_iterator_starts_where_the_last_settled_with_the_same_elements():
    bounds = AutotuneOptions(max_workers=2, max_buffer_size=4, interval_seconds=0.05)
    plan = WorkerPlan(_slow_plan(), MultiprocessingOptions(0, autotune=bounds))
    first = plan.build()
    assert list(first) == list(range(400))
    settled = plan.tuning_memory.settled
    assert settled is not None  # 400 elements of 0.5 ms: measurements of 0.05 s were judged.
    second = plan.build()
    assert second.num_workers == settled.config[0]
    assert second.tuning[0].reason == WARM_START
    assert (second.tuning[0].workers, second.tuning[0].buffer_size) == settled.config[:2]
    assert list(second) == list(range(400))
    untuned = WorkerPlan(_slow_plan(), MultiprocessingOptions(0, autotune=bounds))
    assert untuned.build().tuning[:1] != second.tuning[:1]  # A new plan starts cold.


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
    assert settled is not None
    again = iter(loader)
    assert again.tuning[0].reason == WARM_START and again.num_workers == settled.config[0]
    assert_trees_equal(list(again), expected)
