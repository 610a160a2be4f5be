"""An error budget skips the same elements, at the same points, with any worker count."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_core import CorruptRecordError, ErrorBudget, ErrorBudgetExceededError
from chute_execution import (
    ChunkPlan,
    DataLoader,
    MultiprocessBatchIter,
    MultiprocessingOptions,
    MultiprocessPrefetchIter,
    PrefetchReadIter,
    ReadOptions,
)
from chute_samplers import IndexSampler, NoSharding, SequentialIter
from chute_sources import SequenceSource
from chute_testing import assert_resumes, assert_trees_equal
from chute_testing.execution import BrokenSource, FailOn, FailOnceAt, Remainder, Repeat
from chute_transforms import (
    BatchIter,
    BatchTransform,
    FilterIter,
    FlatMapIter,
    MapIter,
    SkipErrorsIter,
)

BROKEN = {0, 9, 10, 31, 47}  # Records that do not decode.
FAILING = {4, 22, 23, 58}  # Elements the map fails on.
OPS = [
    (MapIter, (FailOn(FAILING),), {}),
    (FilterIter, (Remainder(2, 1),), {}),  # Keeps the odd ones.
    (FlatMapIter, (Repeat(3),), {}),  # 0 to 2 copies.
]
EXPECTED = [x for x in range(60) if x not in BROKEN | FAILING and x % 2 == 1 for _ in range(x % 3)]


DEFAULT_BUDGET = ErrorBudget(max_failures=20)
LOADER_BUDGET = ErrorBudget(max_failures=10)


def _until_error(it, error_type):
    """The elements `it` yields before it raises `error_type`, and the error."""
    got = []
    while True:
        try:
            got.append(next(it))
        except error_type as error:
            return got, error


def _plan(chunk_size=8, n=60):
    return ChunkPlan(BrokenSource(n, BROKEN), OPS, chunk_size)


def _skipping(workers, chunk_size=8, budget=DEFAULT_BUDGET):
    def make():
        plan = _plan(chunk_size)
        options = MultiprocessingOptions(workers)
        return SkipErrorsIter(lambda: MultiprocessPrefetchIter(plan, options), budget)

    return make


def _skips(it):
    return [(s.stage, s.origin, s.where, s.error) for s in it.skipped]


@pytest.mark.parametrize("workers", [0, 1, 2, 3])
def test_the_same_elements_are_skipped_with_any_number_of_workers(workers):
    it = _skipping(workers)()
    assert list(it) == EXPECTED
    assert it.failures == 9
    assert _skips(it)[:3] == [
        (
            0,
            (0,),
            "reading BrokenSource at position 0",
            "CorruptRecordError: record 0 does not decode",
        ),
        (1, (4,), "map(FailOn) at position 4", "ValueError: bad element 4"),
        (
            0,
            (9,),
            "reading BrokenSource at position 9",
            "CorruptRecordError: record 9 does not decode",
        ),
    ]
    reference = _skipping(0, chunk_size=60)()
    list(reference)
    assert _skips(it) == _skips(reference)


@pytest.mark.parametrize("workers", [0, 2])
def test_past_the_budget_every_worker_count_stops_at_the_same_element(workers):
    it = _skipping(workers, budget=ErrorBudget(max_failures=4))()
    got, error = _until_error(it, ErrorBudgetExceededError)
    assert got == [x for x in EXPECTED if x < 22]
    assert str(error).startswith(
        "map(FailOn) at position 22 raised ValueError: bad element 22; that is failure 5"
    )
    with pytest.raises(ErrorBudgetExceededError):  # The iterator stays there.
        next(it)


def test_skipping_resumes_exactly_with_another_number_of_workers():
    assert_resumes(
        _skipping(0, chunk_size=8),
        every=7,
        make_restored=[_skipping(2, chunk_size=8), _skipping(3, chunk_size=8)],
        expected=EXPECTED,
    )


def test_threads_and_single_reads_skip_the_same_records():
    budget = ErrorBudget(max_failures=10)

    def threaded():
        return SkipErrorsIter(
            lambda: MapIter(
                PrefetchReadIter(BrokenSource(60, BROKEN), ReadOptions(3, 12), chunk_size=5),
                FailOn(FAILING),
            ),
            budget,
        )

    def single():
        return SkipErrorsIter(
            lambda: MapIter(SequentialIter(BrokenSource(60, BROKEN)), FailOn(FAILING)), budget
        )

    expected = [x for x in range(60) if x not in BROKEN | FAILING]
    assert_resumes(threaded, every=11, make_restored=[single], expected=expected)
    it = threaded()
    list(it)
    reference = single()
    list(reference)
    assert _skips(it) == _skips(reference)


@settings(max_examples=25, deadline=None)
@given(
    chunk_size=st.integers(1, 13),
    batch_size=st.integers(1, 7),
    drop_remainder=st.booleans(),
)
def test_batches_stacked_in_workers_charge_skips_as_batching_in_the_consumer(
    chunk_size, batch_size, drop_remainder
):
    budget = ErrorBudget(max_failures=20)
    options = MultiprocessingOptions(0)

    def ours():
        plan = _plan(chunk_size)
        return SkipErrorsIter(
            lambda: MultiprocessBatchIter(plan, options, batch_size, drop_remainder=drop_remainder),
            budget,
        )

    def theirs():
        plan = _plan(chunk_size)
        return SkipErrorsIter(
            lambda: BatchIter(
                MultiprocessPrefetchIter(plan, options), batch_size, drop_remainder=drop_remainder
            ),
            budget,
        )

    a, b = ours(), theirs()
    batches_a, batches_b = [], []
    states_a, states_b = [a.get_state()], [b.get_state()]
    for batch in a:
        batches_a.append(batch)
        states_a.append(a.get_state())
    for batch in b:
        batches_b.append(batch)
        states_b.append(b.get_state())
    assert_trees_equal(batches_a, batches_b)
    assert states_a == states_b  # Positions and the failures counted at each batch.


def test_stacked_batches_past_the_budget_stop_where_batching_in_the_consumer_does():
    options = MultiprocessingOptions(2)
    plan = _plan(6)
    budget = ErrorBudget(max_failures=3)
    it = SkipErrorsIter(lambda: MultiprocessBatchIter(plan, options, 4), budget)
    batches, error = _until_error(it, ErrorBudgetExceededError)
    assert "that is failure 4" in str(error)
    flat = [x for batch in batches for x in batch.tolist()]
    # Batches of 4 are whole up to the batch that needs the element after 10 (failure 4).
    assert flat == EXPECTED[: len(flat)] and len(flat) % 4 == 0
    assert all(x < 11 for x in flat)


def test_a_transient_failure_in_a_worker_is_skipped_again_after_a_restore(tmp_path):
    # Element 13 fails the first time only (as a read that timed out would). A state
    # taken after it, in the middle of its chunk, re-runs the chunk on restore: the
    # recorded skip travels to the worker, which skips 13 again instead of yielding it.
    marker = str(tmp_path / "failed-once")
    ops = [(MapIter, (FailOnceAt(13, marker),), {})]

    def make(workers):
        def build():
            plan = ChunkPlan(SequenceSource(list(range(40))), ops, 10)
            options = MultiprocessingOptions(workers)
            return SkipErrorsIter(lambda: MultiprocessPrefetchIter(plan, options), ErrorBudget(2))

        return build

    it = make(2)()
    first = [next(it) for _ in range(15)]
    state = json.loads(json.dumps(it.get_state()))
    # 13 was skipped: the 5th output of unit 10 is 15, so the state says it read through 16.
    assert state["parent"] == {"position": 10, "offset": 5, "through": 16}
    assert state["errors"]["failures"] == 1
    rest = list(it)
    assert first + rest == [x for x in range(40) if x != 13]
    for workers in (2, 0):
        restored = make(workers)()
        restored.set_state(state)
        assert list(restored) == rest
        assert restored.failures == 1


def _loader(workers, budget=LOADER_BUDGET):
    sampler = IndexSampler(60, shard_options=NoSharding(), shuffle=True, seed=5, num_epochs=1)
    return DataLoader(
        data_source=BrokenSource(60, BROKEN),
        sampler=sampler,
        operations=[FailOn(FAILING), BatchTransform(batch_size=4)],
        worker_count=workers,
        chunk_size=8,
        error_budget=budget,
    )


def test_the_data_loader_skips_the_same_records_with_any_number_of_workers():
    expected = [b.tolist() for b in _loader(0)]
    flat = [x for batch in expected for x in batch]
    assert sorted(flat) == sorted(set(range(60)) - BROKEN - FAILING)
    got = _loader(2)
    it = iter(got)
    assert [next(it).tolist() for _ in range(5)] == expected[:5]
    state = json.loads(json.dumps(it.get_state()))
    restored = iter(_loader(0))
    restored.set_state(state)
    assert [b.tolist() for b in restored] == expected[5:]


def test_the_data_loader_refuses_a_budget_that_is_not_one():
    with pytest.raises(TypeError, match="DataLoader: error_budget must be an ErrorBudget"):
        _loader(0, budget=10)  # type: ignore[arg-type]


def test_without_a_budget_a_failing_record_still_raises_after_the_ones_before_it():
    plan = ChunkPlan(BrokenSource(60, {9}), [(MapIter, (FailOn(()),), {})], 4)
    it = MultiprocessPrefetchIter(plan, MultiprocessingOptions(2))
    got, error = _until_error(it, CorruptRecordError)
    assert str(error) == "record 9 does not decode"
    assert got == list(range(9))
