"""The Ray executor on a local Ray cluster: the plan of mp_prefetch, as Ray tasks.

Same output and state as 0 workers and as local workers (and restores across them),
retries of a killed Ray worker, errors as in-process, the error budget's skips, views
into the object store, bounded tasks in flight, closing, and the cluster's lifetime.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings

import numpy as np
import pytest

ray = pytest.importorskip("ray")  # An extra: the chute layer's own environment lacks it.

import chute  # noqa: E402
from chute_checkpoint import apply_document, make_document, reshard  # noqa: E402
from chute_execution import RayPrefetchIter, WorkerDiedError  # noqa: E402
from chute_testing import assert_resumes, assert_trees_equal  # noqa: E402
from chute_testing.execution import AddNoise, FailAt  # noqa: E402

pytestmark = pytest.mark.slow  # A Ray cluster takes seconds to start.

ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}  # Drivers of a CLI-started head.


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """One local cluster for the module, started here: the user's, to chute."""
    started = not ray.is_initialized()
    if started:
        with warnings.catch_warnings():  # Ray forks to exec its processes: jax's warning.
            warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


def _is_odd(x):
    return x % 2 == 1


def _pair(x):
    return [x, -x]


def _vector(x):
    return np.full(8, x, np.int64)


def _noise(x, rng):
    return float(x) + rng.random()


def _pipeline(n=120):
    return (
        chute.MapDataset.range(n)
        .seed(3)
        .shuffle()
        .to_iter_dataset()
        .filter(_is_odd)
        .flat_map(_pair)
        .random_map(_noise)
    )


def _ray(workers=2, **options):
    return chute.RayOptions(num_workers=workers, **options)


@pytest.mark.parametrize("workers", [1, 3])
def test_the_stream_is_that_of_no_workers_and_of_local_workers(workers):
    expected = list(_pipeline())
    local = list(_pipeline().mp_prefetch(chute.MultiprocessingOptions(2), chunk_size=7))
    got = list(_pipeline().ray_prefetch(_ray(workers), chunk_size=7))
    assert_trees_equal(got, expected)
    assert_trees_equal(local, expected)


def test_batches_stacked_by_ray_workers_equal_batching_here():
    base = chute.MapDataset.range(100).seed(1).shuffle().to_iter_dataset().map(_vector)
    expected = [b.tolist() for b in base.batch(16)]
    fused = base.ray_prefetch(_ray(2)).batch(16)
    assert fused._factory.plan.workers_batch
    assert [b.tolist() for b in fused] == expected


def test_states_restore_exactly_and_across_backends():
    base = chute.MapDataset.range(40).shuffle(seed=2).to_iter_dataset().filter(_is_odd)

    def ray_made():
        return iter(base.ray_prefetch(_ray(2), chunk_size=4))

    def local(workers):
        return lambda: iter(base.mp_prefetch(chute.MultiprocessingOptions(workers), chunk_size=4))

    expected = list(base)
    assert_resumes(ray_made, every=None, make_restored=[local(0), local(2)], expected=expected)
    assert_resumes(local(0), every=None, make_restored=[ray_made], expected=expected)


def test_a_checkpoint_document_saved_under_ray_restores_with_local_workers():
    base = chute.MapDataset.range(90).seed(5).shuffle().to_iter_dataset().map(_vector)
    under_ray = iter(base.ray_prefetch(_ray(2)).batch(8))
    seen = [next(under_ray).tolist() for _ in range(4)]
    document = json.loads(json.dumps(make_document(under_ray)))
    local = iter(base.mp_prefetch(chute.MultiprocessingOptions(0)).batch(8))
    apply_document(local, document)
    expected = [b.tolist() for b in base.batch(8)]
    assert seen == expected[:4]
    assert [b.tolist() for b in local] == expected[4:]


def test_sharded_states_under_ray_reshard_to_another_process_count():
    def pipeline(index, count):
        ds = chute.MapDataset.range(48).seed(9).shuffle().shard(index, count).to_iter_dataset()
        return ds.map(_vector)

    iterators = [iter(pipeline(i, 2).ray_prefetch(_ray(1), chunk_size=4)) for i in range(2)]
    seen = [next(it).tolist() for it in iterators for _ in range(6)]
    documents = [make_document(it, i, 2) for i, it in enumerate(iterators)]
    (moved,) = reshard(documents, 1)
    single = iter(pipeline(0, 1).mp_prefetch(chute.MultiprocessingOptions(0), chunk_size=4))
    apply_document(single, moved)
    rest = [x.tolist() for x in single]
    assert rest == [x.tolist() for x in pipeline(0, 1)][12:]  # The global order goes on.
    assert sorted(x[0] for x in seen + rest) == list(range(48))  # Nothing lost or repeated.


def test_states_under_ray_stopped_unevenly_continue_exactly_once_on_other_counts():
    def pipeline(index, count):
        ds = chute.MapDataset.range(60).seed(9).shuffle().shard(index, count).to_iter_dataset()
        return ds.filter(_is_odd).ray_prefetch(_ray(1), chunk_size=4).batch(3)

    run = chute.testing.assert_reshards(pipeline, 3, [2, 4], seed=1, records=chute.testing.rows)
    assert run.records == 30 and all(len(set(stops)) > 1 for stops in run.stops)


def test_the_data_loader_on_ray_equals_the_one_on_local_workers():
    sampler = chute.IndexSampler(
        64, shard_options=chute.NoSharding(), shuffle=True, seed=4, num_epochs=2
    )

    def loader(**workers):
        return chute.DataLoader(
            data_source=chute.RangeSource(64),
            sampler=sampler,
            operations=[AddNoise(), chute.BatchTransform(batch_size=10)],
            **workers,
        )

    expected = [b.tolist() for b in loader(worker_count=2)]
    assert [b.tolist() for b in loader(ray_options=_ray(2))] == expected
    with pytest.raises(ValueError, match=r"^DataLoader: worker_count=2 and ray_options both"):
        loader(worker_count=2, ray_options=_ray(2))


def _drain(iterator, into):
    for element in iterator:
        into.append(element)


class KillOnceAt:
    """Kills its Ray worker process on one element, the first time only (a marker file)."""

    def __init__(self, element, marker):
        self.element, self.marker, self.parent = element, marker, os.getpid()

    def __call__(self, x):
        if x == self.element and os.getpid() != self.parent and not os.path.exists(self.marker):
            with open(self.marker, "x"):
                pass
            os.kill(os.getpid(), signal.SIGKILL)
        return x


class KillAlwaysAt:
    """Kills its Ray worker process on one element, every time."""

    def __init__(self, element):
        self.element, self.parent = element, os.getpid()

    def __call__(self, x):
        if x == self.element and os.getpid() != self.parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return x


def test_a_ray_worker_killed_mid_chunk_runs_its_chunk_again_exactly(tmp_path):
    marker = str(tmp_path / "killed")
    base = chute.MapDataset.range(60).seed(7).shuffle().to_iter_dataset()
    got = list(base.map(KillOnceAt(33, marker)).ray_prefetch(_ray(2), chunk_size=5))
    assert os.path.exists(marker)  # A worker did die, mid-chunk.
    assert got == list(base)  # Nothing lost, nothing repeated.


def test_a_chunk_whose_worker_always_dies_raises_after_its_retries():
    ds = chute.MapDataset.range(30).to_iter_dataset().map(KillAlwaysAt(12))
    it = iter(ds.ray_prefetch(_ray(2, max_retries=1), chunk_size=5))
    got: list[int] = []
    with pytest.raises(WorkerDiedError) as caught:
        _drain(it, got)
    assert got == list(range(10))  # The chunks before the dead one.
    assert str(caught.value).startswith(
        "ray_prefetch: the Ray task running chunk 2 failed 2 times (its worker died each time"
    )


def test_an_exception_keeps_its_type_and_comes_after_the_elements_before_it():
    ds = chute.MapDataset.range(40).to_iter_dataset().map(FailAt(23, KeyError))
    it = iter(ds.ray_prefetch(_ray(2), chunk_size=10))
    got: list[int] = []
    with pytest.raises(KeyError) as caught:
        _drain(it, got)
    assert got == list(range(23))
    notes = caught.value.__notes__
    assert "chute: raised by map(fn=FailAt) on the element at position 23" in notes[0] or any(
        "on the element at position 23" in note for note in notes
    )
    assert any(
        note.startswith("chute: raised in worker 0 while running chunk 2 (base positions 20..29)")
        for note in notes
    )


def test_the_error_budget_skips_the_same_elements_as_in_process():
    failing = FailAt(7, ValueError)

    def make(prefetch):
        ds = chute.MapDataset.range(50).seed(2).shuffle().to_iter_dataset().map(failing)
        return prefetch(ds.skip_errors(max_failures=2))

    in_process = iter(make(lambda ds: ds))
    expected = list(in_process)
    under_ray = iter(make(lambda ds: ds.ray_prefetch(_ray(2), chunk_size=6)))
    assert list(under_ray) == expected
    assert (under_ray.failures, under_ray.skipped) == (in_process.failures, in_process.skipped)


def test_arrays_are_read_in_place_and_tasks_in_flight_are_bounded():
    ds = chute.MapDataset.range(200).to_iter_dataset().map(_vector)
    it = iter(ds.ray_prefetch(_ray(2, per_worker_buffer_size=2), chunk_size=4))
    assert isinstance(it, RayPrefetchIter)
    first = next(it)
    assert first.tolist() == [0] * 8
    assert not first.flags.writeable  # A view into Ray's object store, not a copy.
    for _ in range(30):
        next(it)
        assert len(it._tasks.futures) <= 2 * 2
    it.close()
    assert it._tasks.futures == {}  # Dropped: no reference left.
    assert ray.is_initialized()  # The cluster is the user's (this module's): left running.
    assert it.get_state() == {"position": 28, "offset": 3, "through": 31}  # Kept at close.


class RecordEach:
    """Writes a file named after each element it sees (in the Ray worker), then waits."""

    def __init__(self, folder, seconds):
        self.folder, self.seconds = folder, seconds

    def __call__(self, x):
        with open(os.path.join(self.folder, str(x)), "w"):
            pass
        time.sleep(self.seconds)
        return x


def _quiet(folder):
    """The names in `folder` once no new one has appeared for two seconds."""
    seen = set(os.listdir(folder))
    while True:
        time.sleep(2)
        now = set(os.listdir(folder))
        if now == seen:
            return seen
        seen = now


@pytest.mark.parametrize("end", ["close", "drop"])
def test_closing_or_dropping_cancels_the_tasks_not_yet_started(tmp_path, end):
    folder = str(tmp_path)
    # 1 s chunks: longer than closing or collecting the iterator takes under load.
    ds = chute.MapDataset.range(200).to_iter_dataset().map(RecordEach(folder, 0.5))
    it = iter(ds.ray_prefetch(_ray(2, per_worker_buffer_size=4), chunk_size=2))
    assert [next(it), next(it)] == [0, 1]  # Chunk 0; chunks 1..7 are in flight.
    assert len(it._tasks.futures) == 7
    if end == "close":
        it.close()
    else:
        del it
    started = {int(name) // 2 for name in _quiet(folder)}
    # Chunk 0, one running chunk per worker, and at most one more per worker (started
    # before its worker's answer from the board grew stale): not the 8 submitted.
    assert 0 in started
    assert len(started) <= 1 + 2 * 2, sorted(started)


class SlowFrom:
    """Writes a file named after each element it sees; sleeps on those from `first` on."""

    def __init__(self, folder, first, seconds):
        self.folder, self.first, self.seconds = folder, first, seconds

    def __call__(self, x):
        with open(os.path.join(self.folder, str(x)), "w"):
            pass
        if x >= self.first:
            time.sleep(self.seconds)
        return x


@pytest.mark.parametrize("end", ["close", "drop"])
@pytest.mark.parametrize("stage", ["map", "filter"])  # Plain maps run as one list.
def test_closing_or_dropping_stops_the_chunks_already_running(tmp_path, end, stage):
    folder = str(tmp_path)
    ds = chute.MapDataset.range(100).to_iter_dataset().map(SlowFrom(folder, 10, 1.0))
    if stage == "filter":
        ds = ds.filter(lambda x: True)
    it = iter(ds.ray_prefetch(_ray(2, per_worker_buffer_size=2), chunk_size=10))
    assert [next(it) for _ in range(10)] == list(range(10))  # Chunk 0, quick.
    in_flight = [reference for _, reference in it._tasks.futures.values()]
    assert len(in_flight) == 3  # Chunks 1, 2 (each 10 s long) and 3.
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(folder, "10")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists(os.path.join(folder, "10"))  # Chunk 1 runs.
    if end == "close":
        assert it.close() is None
    else:
        del it
    # Each task returns (nothing raised) with no result, its chunk stopped part-way.
    assert [kind for kind, _ in ray.get(in_flight, timeout=120)] == ["cancelled"] * 3
    seen = [int(name) for name in _quiet(folder)]
    for chunk in range(1, 10):
        assert sum(x // 10 == chunk for x in seen) <= 3, sorted(seen)


def test_closing_at_any_moment_leaves_the_driver_and_the_stream_intact():
    ds = chute.MapDataset.range(64).seed(1).shuffle().to_iter_dataset().map(_vector)
    rng = np.random.default_rng(0)
    for _ in range(30):  # Replies arrive while the tasks are being cancelled.
        it = iter(ds.ray_prefetch(_ray(2, per_worker_buffer_size=3), chunk_size=1))
        for _ in range(int(rng.integers(0, 6))):
            next(it)
        it.close()
    got = list(ds.ray_prefetch(_ray(2), chunk_size=3))
    assert_trees_equal(got, list(ds))


_CHILD = textwrap.dedent(
    """
    import json, sys, ray, chute
    ds = chute.MapDataset.range(20).to_iter_dataset().ray_prefetch(chute.RayOptions(1))
    assert list(ds) == list(range(20))
    print(json.dumps({"gcs": ray.get_runtime_context().gcs_address}), flush=True)
    """
)


def _accepts(address):
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def test_a_cluster_chute_started_is_stopped_when_the_process_exits(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120, env=ENV
    )
    assert done.returncode == 0, done.stderr[-2000:]
    gcs = json.loads(done.stdout.strip().splitlines()[-1])["gcs"]
    deadline = time.monotonic() + 20
    while _accepts(gcs) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _accepts(gcs)


def _free_port():
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


_SLOW_CHILD = textwrap.dedent(
    """
    import os, time, chute

    def slow(x):
        time.sleep(0.2)
        return x

    options = chute.RayOptions(2, address=os.environ["HEAD"], head_timeout=3)
    ds = chute.MapDataset.range(400).to_iter_dataset().map(slow).ray_prefetch(options)
    it = iter(ds)
    print("first", next(it), flush=True)
    start = time.monotonic()
    try:
        for _ in it:
            pass
    except Exception as error:
        print("raised", type(error).__name__, time.monotonic() - start, flush=True)
        print(str(error), flush=True)
    """
)


def _writes_in(pid, folder):
    """Whether process `pid` has a file open in `folder` (Ray's agents rename themselves)."""
    try:
        return any(
            os.readlink(f"/proc/{pid}/fd/{fd}").startswith(folder)
            for fd in os.listdir(f"/proc/{pid}/fd")
        )
    except OSError:
        return False


def _kill_cluster(port, temp, keep):
    """Kills the processes of the head at `port` with its files in `temp` (not `keep`).

    Its processes name the port in their command lines; so would a driver given the
    address as an argument, which is why the test's driver gets it from its environment.
    """
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                command = file.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ours = f":{port}" in command or f"={port}" in command or temp in command
        if int(pid) != keep and (ours or _writes_in(pid, temp)):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def test_losing_the_head_raises_a_clear_error_in_bounded_time():
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Short: it holds sockets.
    start = [ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2", f"--temp-dir={temp}"]
    subprocess.run([*start, "--include-dashboard=false"], env=ENV, check=True, capture_output=True)
    child = None
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", _SLOW_CHILD],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**ENV, "HEAD": f"127.0.0.1:{port}"},  # Not in its command line: see below.
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "first 0"
    finally:
        _kill_cluster(
            port, temp, None if child is None else child.pid
        )  # The head goes: its GCS and its node (not this test's own).
        shutil.rmtree(temp, ignore_errors=True)
    assert child is not None
    out, err = child.communicate(timeout=90)
    assert out.strip(), err[-3000:]
    kind, name, seconds = out.splitlines()[0].split()
    assert (kind, name) == ("raised", "ChuteError")
    assert float(seconds) < 60
    assert "ray_prefetch: lost the Ray cluster's head at " in out
    assert "The iterator's state is still valid: restore it once the cluster is back." in out


def test_start_prefetch_submits_the_first_chunks_before_the_first_next(tmp_path):
    folder = str(tmp_path)
    ds = chute.MapDataset.range(40).to_iter_dataset().map(RecordEach(folder, 0.0))
    it = iter(ds.ray_prefetch(_ray(2, per_worker_buffer_size=2), chunk_size=4))
    it.start_prefetch()
    assert sorted(it._tasks.futures) == [0, 1, 2, 3]  # In flight before any next().
    deadline = time.monotonic() + 60
    while len(os.listdir(folder)) < 16 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(int(name) for name in os.listdir(folder)) == list(range(16))
    assert list(it) == list(range(40))
