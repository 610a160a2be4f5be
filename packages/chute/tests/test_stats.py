import operator
import time

import chute
from chute_execution.testing import SleepAt


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


def test_stats_with_worker_processes_show_the_wait_as_one_stage():
    ds = chute.MapDataset.range(20).to_iter_dataset().map(SleepAt(3, 0.0))
    it = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=1)).batch(5).iter(stats=True)
    assert len(list(it)) == 4
    names = [s.name for s in it.stats().stages]
    assert names == ["mp_prefetch(num_workers=1)", "batch(batch_size=5, drop_remainder=False)"]


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
