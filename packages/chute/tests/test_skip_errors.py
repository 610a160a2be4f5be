"""`IterDataset.skip_errors`: the fluent error budget, with workers, stats and checkpoints."""

import operator

import pytest

import chute
import chute_checkpoint
from chute_testing import assert_resumes
from chute_testing.execution import BrokenSource, FailOn, Remainder

BROKEN = {3, 40, 41}
FAILING = {-7, -19, -64}  # After the negation.


def _dataset():
    return (
        chute.MapDataset.source(BrokenSource(80, BROKEN))
        .seed(2)
        .shuffle()
        .to_iter_dataset()
        .map(operator.neg)
        .map(FailOn(FAILING))
        .filter(Remainder(3, 0))
    )


def _expected():
    order = [x for x in iter(chute.MapDataset.range(80).seed(2).shuffle().to_iter_dataset())]
    return [-x for x in order if x not in BROKEN and -x not in FAILING and -x % 3 == 0]


def _workers(ds, n):
    return ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=n), chunk_size=6)


@pytest.mark.parametrize("workers", [None, 0, 2])
@pytest.mark.parametrize("where", ["before", "after"])
def test_skip_errors_before_or_after_workers_skips_the_same_elements(where, workers):
    ds = _dataset()
    if where == "before":
        ds = ds.skip_errors(6)
    if workers is not None:
        ds = _workers(ds, workers)
    if where == "after":
        ds = ds.skip_errors(6)
    it = iter(ds.batch(4))
    flat = [int(x) for batch in it for x in batch]
    assert flat == _expected()


def test_the_iterator_tells_what_it_skipped_and_where():
    it = iter(_dataset().skip_errors(max_failures=6))
    out = list(it)
    assert out == _expected()
    assert it.failures == 6
    assert (
        sorted(s.where.split(" at ")[0] for s in it.skipped)
        == ["map(FailOn)"] * 3 + ["reading ShuffleMap"] * 3
    )
    assert "CorruptRecordError: record 40 does not decode" in {s.error for s in it.skipped}


def test_past_the_budget_the_error_names_the_failure_and_the_ones_before():
    it = iter(_workers(_dataset(), 2).skip_errors(max_failures=2))
    with pytest.raises(chute.ErrorBudgetExceededError, match="that is failure 3, and ErrorBudget"):
        list(it)


def test_statistics_count_the_skipped_elements():
    it = _dataset().skip_errors(10).iter(stats=True)
    list(it)
    stats = it.stats()
    assert stats.skipped == 6
    assert str(stats).endswith("skipped: 6 elements that failed (skip_errors)")
    assert "skip_errors(max_failures=10)" in [stage.name for stage in stats.stages]


def test_the_pipeline_shows_the_budget():
    ds = _dataset().skip_errors(5, max_failure_rate=0.01)
    assert repr(ds).splitlines()[-1] == "  .skip_errors(max_failures=5, max_failure_rate=0.01)"


def test_skipping_resumes_exactly_with_any_number_of_workers():
    def make(workers):
        return lambda: iter(_workers(_dataset().skip_errors(6), workers).batch(3))

    assert_resumes(make(0), every=4, make_restored=[make(2)])


def test_a_checkpoint_records_the_skips_and_a_changed_budget_is_named(tmp_path):
    ds = _workers(_dataset().skip_errors(6), 2)
    it = iter(ds)
    first = [next(it) for _ in range(15)]
    chute_checkpoint.save(it, tmp_path)
    rest = list(it)
    assert first + rest == _expected()
    restored = chute_checkpoint.restore(iter(_workers(_dataset().skip_errors(6), 0)), tmp_path)
    assert list(restored) == rest
    other = iter(_workers(_dataset().skip_errors(7), 0))
    with pytest.raises(chute_checkpoint.PipelineMismatchError, match="max_failures"):
        chute_checkpoint.restore(other, tmp_path)


def test_two_budgets_before_the_workers_are_refused():
    ds = _dataset().skip_errors(1).map(operator.pos).skip_errors(2)
    with pytest.raises(ValueError) as caught:
        ds.mp_prefetch(chute.MultiprocessingOptions(0))
    assert str(caught.value) == (
        "mp_prefetch: the pipeline before it has skip_errors twice; give one budget (the last "
        "skip_errors covers every stage before it)."
    )


def test_a_bad_budget_is_refused_when_the_stage_is_declared():
    with pytest.raises(ValueError, match="ErrorBudget: max_failures must be >= 0, got -2"):
        _dataset().skip_errors(-2)


def test_batches_read_in_bulk_from_a_reader_under_a_budget_skip_the_same_elements():
    # The batch takes its elements from the reader in bulk (no op in between); the
    # reader's failed positions must be skipped and charged exactly as one by one.
    ds = (
        chute.MapDataset.source(BrokenSource(80, BROKEN))
        .seed(2)
        .shuffle()
        .map(operator.neg)
        .map(FailOn(FAILING))
        .to_iter_dataset()
        .batch(4)
        .skip_errors(6)
    )
    kept = _expected_unfiltered()
    expected = [kept[i : i + 4] for i in range(0, len(kept), 4)]
    batches = assert_resumes(lambda: iter(ds), every=1)
    timed = ds.iter(stats=True)  # Its stages are wrapped: elements taken one by one.
    assert [b.tolist() for b in batches] == [b.tolist() for b in timed]
    it = iter(ds)
    assert [b.tolist() for b in it] == expected
    assert it.failures == 6


def _expected_unfiltered():
    order = list(chute.MapDataset.range(80).seed(2).shuffle())
    return [-x for x in order if x not in BROKEN and -x not in FAILING]
