"""Live metrics count exactly what ran: per stage, in workers, across epochs, per label."""

import gc
import operator
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chute
from chute.metrics import METRICS, value
from chute_testing.execution import BrokenSource, FailOn

BATCH = "batch(batch_size=10, drop_remainder=False)"
WORKERS = chute.MultiprocessingOptions(num_workers=2)


@pytest.fixture(autouse=True)
def _fresh():
    chute.metrics.reset()
    chute.metrics.disable()
    yield
    chute.metrics.disable()


def _families():
    from chute._metrics_store import STORE

    return {family.info.name: family for family in STORE.families()}


def _histogram(name, **labels):
    family = _families()[name]
    wanted = tuple(labels[label] for label in family.info.labels)
    (series,) = [h for h in family.histograms if h.labels == wanted]
    return series


def test_each_stage_counts_its_elements_and_the_histograms_count_them_too():
    ds = chute.MapDataset.range(100).to_iter_dataset().map(abs).batch(10)
    assert len(list(ds.iter(metrics="p"))) == 10
    expected = {"to_iter_dataset()": 100, "map(fn=abs)": 100, BATCH: 10}
    for stage, elements in expected.items():
        assert value("chute_stage_elements", pipeline="p", stage=stage) == elements
        assert (
            _histogram("chute_stage_element_seconds", pipeline="p", stage=stage).count == elements
        )
        seconds = value("chute_stage_seconds", pipeline="p", stage=stage)
        assert seconds is not None and seconds > 0
    wait = _histogram("chute_input_wait_seconds", pipeline="p")
    assert wait.count == 11  # Ten batches, then the call that ended the stream.
    assert wait.sum > 0
    # A stage's own time excludes its inputs': the stages' seconds add up to the waits.
    own = sum(value("chute_stage_seconds", pipeline="p", stage=s) for s in expected)
    assert own == pytest.approx(wait.sum, rel=0.05)


def test_a_pipeline_label_adds_up_over_epochs_and_the_default_label_is_stable():
    ds = chute.MapDataset.range(30).to_iter_dataset().batch(10)
    chute.metrics.enable()
    first, second = ds.iter(), ds.iter()  # Two epochs, unnamed: one series.
    list(first), list(second)
    labels = {values[0] for values, _ in _families()["chute_stage_elements"].samples}
    assert len(labels) == 1
    (label,) = labels
    assert label.startswith("pipeline-")
    assert value("chute_stage_elements", pipeline=label, stage=BATCH) == 6
    same = chute.MapDataset.range(30).to_iter_dataset().batch(10)  # Built again: same label.
    list(same.iter())
    assert value("chute_stage_elements", pipeline=label, stage=BATCH) == 9


def test_nothing_is_metered_unless_asked_and_false_opts_out():
    ds = chute.MapDataset.range(5).to_iter_dataset()
    list(ds)
    assert _families()["chute_stage_elements"].samples == ()
    chute.metrics.enable()
    list(ds.iter(metrics=False))
    assert _families()["chute_stage_elements"].samples == ()


def test_repeated_stage_names_stay_separate_series():
    ds = chute.MapDataset.range(7).to_iter_dataset().map(abs).map(abs)
    list(ds.iter(metrics="twice"))
    assert value("chute_stage_elements", pipeline="twice", stage="map(fn=abs)") == 7
    assert value("chute_stage_elements", pipeline="twice", stage="map(fn=abs) #2") == 7


def _row(x):
    return np.full(512, x)


def test_stages_in_worker_processes_are_counted_in_the_consumer():
    ds = chute.MapDataset.range(200).to_iter_dataset().map(_row).mp_prefetch(WORKERS, chunk_size=16)
    it = ds.iter(metrics="w")
    next(it)
    families = _families()
    stages = dict(families["chute_stage_workers"].samples)
    assert stages[("w", "map(fn=_row)")] == 2
    alive = dict(families["chute_workers_alive"].samples)
    assert alive[("w", "mp_prefetch(num_workers=2)")] == 2
    capacity = dict(families["chute_buffer_capacity"].samples)
    assert capacity[("w", "mp_prefetch(num_workers=2)")] == 2 * WORKERS.per_worker_buffer_size
    assert [int(x[0]) for x in it] == list(range(1, 200))
    assert value("chute_stage_elements", pipeline="w", stage="map(fn=_row)") == 200
    assert value("chute_stage_elements", pipeline="w", stage="to_iter_dataset()") == 200
    assert value("chute_stage_elements", pipeline="w", stage="mp_prefetch(num_workers=2)") == 200
    # The workers' own counters (bytes they put in shared memory) come with their chunks.
    assert value("chute_shm_written_bytes") > 0


def test_skipped_elements_are_counted():
    source = BrokenSource(40, {3, 17})
    ds = chute.MapDataset.source(source).to_iter_dataset().map(FailOn({5})).skip_errors(5)
    ds = ds.map(operator.neg)
    assert len(list(ds.iter(metrics="skips"))) == 37
    assert value("chute_skipped_elements", pipeline="skips") == 3


@settings(max_examples=15, deadline=None)
@given(
    size=st.integers(0, 60),
    batch=st.integers(1, 9),
    keep=st.integers(1, 4),
)
def test_counts_match_the_elements_each_stage_gave(size, batch, keep):
    chute.metrics.reset()
    ds = chute.MapDataset.range(size).to_iter_dataset().filter(lambda x: x % keep == 0)
    out = list(ds.batch(batch).iter(metrics="h"))
    kept = len(range(0, size, keep))
    name = f"batch(batch_size={batch}, drop_remainder=False)"
    assert value("chute_stage_elements", pipeline="h", stage="to_iter_dataset()") == size
    assert value("chute_stage_elements", pipeline="h", stage=name) == len(out)
    assert sum(len(b) for b in out) == kept
    assert _histogram("chute_input_wait_seconds", pipeline="h").count == len(out) + 1


def test_every_listed_metric_is_exported_in_prometheus_text():
    list(chute.MapDataset.range(3).to_iter_dataset().iter(metrics="t"))
    text = chute.metrics.prometheus_text()
    for info in METRICS:
        assert f"# TYPE {info.exposed} {info.kind}" in text, info.name


def test_bad_arguments_are_refused_by_name():
    ds = chute.MapDataset.range(3).to_iter_dataset()
    with pytest.raises(chute.ArgumentTypeError, match=r"iter\(metrics=...\).*got 3"):
        ds.iter(metrics=3)
    with pytest.raises(chute.ArgumentTypeError, match="non-empty"):
        ds.iter(metrics="  ")
    with pytest.raises(chute.InvalidArgumentError, match=r"port must be 0\.\.65535, got 70000"):
        chute.metrics.serve(70000)


def test_a_taken_port_is_a_clear_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(chute.ChuteError, match=f"cannot listen on 127.0.0.1:{port}"):
            chute.metrics.serve(port)


def test_the_endpoint_serves_the_running_pipeline():
    with chute.metrics.serve(port=0) as server:
        it = chute.MapDataset.range(50).to_iter_dataset().iter(metrics="live")
        for _ in range(20):
            next(it)
        text = urllib.request.urlopen(server.url, timeout=10).read().decode()
    line = 'chute_stage_elements_total{pipeline="live",stage="to_iter_dataset()"} 20.0'
    assert line in text.splitlines()


SERVED_FROM_ENV = textwrap.dedent(
    """
    import os, urllib.request
    import chute
    it = chute.MapDataset.range(10).to_iter_dataset().iter()
    print(sum(1 for _ in it))
    port = os.environ["CHUTE_METRICS_PORT"]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    print([l for l in text.decode().splitlines() if l.startswith("chute_stage_elements")])
    """
)


def test_the_environment_variable_serves_the_process_metrics():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "CHUTE_METRICS_PORT": str(port)}
    done = subprocess.run(
        [sys.executable, "-c", SERVED_FROM_ENV], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    count, lines = done.stdout.splitlines()
    assert count == "10"
    assert 'stage="to_iter_dataset()"} 10.0' in lines


def test_a_bad_environment_port_is_named():
    env = {**os.environ, "CHUTE_METRICS_PORT": "nine"}
    code = "import chute; chute.MapDataset.range(1).to_iter_dataset().iter()"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert "$CHUTE_METRICS_PORT must be a port number, got 'nine'" in done.stderr


def _prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "chute-prefetch" and t.is_alive()]


@pytest.mark.parametrize("how", [{"metrics": "g"}, {"stats": True}])
def test_an_abandoned_metered_iterator_stops_its_thread_and_its_gauges_go(how):
    before = len(_prefetch_threads())
    it = chute.MapDataset.range(10).to_iter_dataset().prefetch(4).iter(**how)
    next(it)
    assert len(_prefetch_threads()) == before + 1
    if "metrics" in how:
        capacity = dict(_families()["chute_buffer_capacity"].samples)
        assert capacity[("g", "prefetch(buffer_size=4)")] == 4
    del it
    gc.collect()
    deadline = time.monotonic() + 30
    while len(_prefetch_threads()) > before and time.monotonic() < deadline:
        time.sleep(0.05)  # The thread is told to stop; it ends at its next look.
    assert len(_prefetch_threads()) == before
    gc.collect()
    assert _families()["chute_buffer_capacity"].samples == ()
    if "metrics" in how:  # The totals stay.
        assert value("chute_stage_elements", pipeline="g", stage="to_iter_dataset()") >= 1


def test_a_taken_environment_port_warns_and_training_goes_on():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "CHUTE_METRICS_PORT": str(port)}
        code = (
            "import chute; ds = chute.MapDataset.range(5).to_iter_dataset()\n"
            "print(list(ds.iter()), chute.metrics.enabled())"
        )
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0, 1, 2, 3, 4] True"
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "this process's metrics are not served" in done.stderr


def test_the_observability_guide_lists_every_metric():
    from pathlib import Path

    guide = Path(__file__).parents[2] / "docs" / "pages" / "guides" / "observability.md"
    text = guide.read_text()
    for info in METRICS:
        assert f"| `{info.exposed}` | {info.kind} |" in text, info.exposed


def test_a_data_loader_is_metered_as_one_stage_and_still_checkpoints():
    def loader():
        return chute.DataLoader(
            data_source=chute.RangeSource(40),
            sampler=chute.IndexSampler(40, shard_options=chute.NoSharding(), num_epochs=1),
            operations=[chute.BatchTransform(batch_size=8)],
        )

    chute.metrics.enable()
    it = iter(loader())
    first = [next(it).tolist() for _ in range(2)]
    state = it.get_state()
    rest = [batch.tolist() for batch in it]
    assert value("chute_stage_elements", pipeline="data_loader", stage="DataLoader") == 5
    assert _histogram("chute_input_wait_seconds", pipeline="data_loader").count == 6
    resumed = iter(loader())
    resumed.set_state(state)
    assert [batch.tolist() for batch in resumed] == rest
    assert first[0] == list(range(8))


def test_a_metered_iterator_is_still_a_grain_dataset_iterator():
    import chute.grain as grain

    it = chute.MapDataset.range(4).to_iter_dataset().iter(metrics="grain")
    timed = chute.MapDataset.range(4).to_iter_dataset().iter(stats=True)
    assert isinstance(it, grain.DatasetIterator)
    assert isinstance(timed, grain.DatasetIterator)
