import operator
import time

import pytest

import chute
from chute_testing.execution import Remainder, SleepAt


def _slow(x):
    time.sleep(0.002)
    return x


def test_stats_count_elements_per_stage_and_name_the_bottleneck():
    ds = (
        chute.MapDataset.range(60)
        .to_iter_dataset()
        .map(operator.neg)
        .filter(lambda x: x % 2)
        .map(_slow)
        .batch(4)
    )
    it = ds.iter(stats=True)
    batches = list(it)
    stats = it.stats()
    assert [(s.name, s.elements) for s in stats.stages] == [
        ("to_iter_dataset()", 60),
        ("map(fn=neg)", 60),
        ("filter(fn=<lambda>)", 30),
        ("map(fn=_slow)", 30),
        ("batch(batch_size=4, drop_remainder=False)", len(batches)),
    ]
    assert stats.bottleneck is not None and stats.bottleneck.name == "map(fn=_slow)"
    assert stats.bottleneck.seconds >= 30 * 0.002
    assert sum(stats.share(s) for s in stats.stages) <= 1.0
    assert "bottleneck: map(fn=_slow)" in str(stats)


def test_stats_do_not_change_elements_or_states():
    ds = chute.MapDataset.range(30).shuffle(seed=1).to_iter_dataset().map(operator.neg).batch(7)
    plain, timed = iter(ds), ds.iter(stats=True)
    for _ in range(2):
        assert next(plain).tolist() == next(timed).tolist()
    assert plain.get_state() == timed.get_state()
    timed.set_state(plain.get_state())
    assert [b.tolist() for b in timed] == [b.tolist() for b in plain]


@pytest.mark.parametrize("workers", [0, 2])
def test_stats_show_the_stages_that_ran_in_workers_and_name_the_slow_one(workers):
    ds = (
        chute.MapDataset.range(40)
        .to_iter_dataset()
        .map(operator.neg)
        .filter(Remainder(2, 0))
        .map(SleepAt(-10, 0.3))
    )
    options = chute.MultiprocessingOptions(num_workers=workers)
    it = ds.mp_prefetch(options, chunk_size=8).map(operator.pos).iter(stats=True)
    assert len(list(it)) == 20
    stats = it.stats()
    where = f"[{workers} workers]" if workers else "[in mp_prefetch]"
    assert [(s.name, s.elements, s.workers) for s in stats.stages] == [
        (f"to_iter_dataset() {where}", 40, workers),
        (f"map(fn=neg) {where}", 40, workers),
        (f"filter(fn=Remainder) {where}", 20, workers),
        (f"map(fn=SleepAt) {where}", 20, workers),
        (f"mp_prefetch(num_workers={workers})", 20, 0),
        ("map(fn=pos)", 20, 0),
    ]
    slow = stats.stages[3]
    assert slow.seconds >= 0.3
    assert stats.bottleneck is slow
    assert f"bottleneck: map(fn=SleepAt) {where}" in str(stats)
    if workers:  # Their share is of the workers' time: 2 x wall.
        assert stats.share(slow) == pytest.approx(slow.seconds / (2 * stats.wall_seconds))


def test_progress_bar_passes_elements_and_states_through():
    ds = chute.MapDataset.range(5).to_iter_dataset()
    it = ds.iter(progress=True)  # tqdm hides the bar when stderr is not a terminal.
    assert [next(it), next(it)] == [0, 1]
    assert it.get_state() == {"position": 2}
    assert list(it) == [2, 3, 4]


def test_progress_bar_counts_elements(capsys):
    from chute._progress import ProgressIterator

    assert list(ProgressIterator(iter("abc"), disable=False)) == ["a", "b", "c"]
    assert "3 elements" in capsys.readouterr().err


def test_a_batch_taking_many_elements_at_once_still_counts_each():
    it = chute.MapDataset.range(7).to_iter_dataset().batch(3).iter(stats=True)
    assert [b.tolist() for b in it] == [[0, 1, 2], [3, 4, 5], [6]]
    reader, batch = it.stats().stages
    assert (reader.elements, batch.elements) == (7, 3)
