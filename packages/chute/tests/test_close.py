"""`close()` on every iterator: idempotent, forwarded to parents, a context manager.

Closing releases the threads and worker processes behind an iterator, keeps its
position, and a later `next()` continues with the next element. Interpreter exit with
read threads still running inside ArrayRecord's native reader is clean.
"""

import multiprocessing
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import chute

SETTLE_SECONDS = 10.0  # A bound for threads and processes to go away, not a speed check.


def _chute_threads():
    # Not the timer of the idle slabs kept for the next iterator, which ends with them as
    # parked workers do (test_slab_pool.py checks it), nor the process's pool of chunk
    # readers, which every iterator of the process shares (read_options threads).
    return [
        t.name
        for t in threading.enumerate()
        if t.name.startswith("chute-")
        and not t.name.startswith(("chute-idle-slabs", "chute-chunk"))
    ]


def _settled(condition):
    deadline = time.monotonic() + SETTLE_SECONDS
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    records = [{"x": np.full((8,), i, np.int64), "label": i} for i in range(200)]
    return chute.write_array_record(records, tmp_path_factory.mktemp("ar") / "d", num_shards=2)


def _pipelines(shards):
    source = chute.ArrayRecordSource(shards)
    read = chute.ReadOptions(num_threads=4, prefetch_buffer_size=16)
    workers = chute.MultiprocessingOptions(num_workers=2)
    sampler = chute.IndexSampler(200, shard_options=chute.NoSharding(), num_epochs=1)

    def label(record):
        return record["label"]

    return {
        "read threads -> stream batch": lambda: iter(
            chute.MapDataset.source(source).to_iter_dataset(read_options=read).map(label).batch(8)
        ),
        "thread prefetch": lambda: iter(
            chute.MapDataset.source(source).to_iter_dataset().map(label).prefetch(4).batch(8)
        ),
        "mp_prefetch -> batch in workers": lambda: iter(
            chute.MapDataset.source(source)
            .to_iter_dataset()
            .map(label)
            .mp_prefetch(workers)
            .batch(8)
        ),
        "mp_prefetch -> stream ops": lambda: iter(
            chute.MapDataset.source(source)
            .to_iter_dataset()
            .map(label)
            .mp_prefetch(workers)
            .filter(lambda x: x % 3)
            .batch(8)
        ),
        "DataLoader with workers": lambda: iter(
            chute.DataLoader(
                data_source=source,
                sampler=sampler,
                operations=[chute.BatchTransform(8)],
                worker_count=2,
            )
        ),
        "stats": lambda: (
            chute.MapDataset.source(source)
            .to_iter_dataset(read_options=read)
            .map(label)
            .batch(8)
            .iter(stats=True)
        ),
    }


NAMES = [
    "read threads -> stream batch",
    "thread prefetch",
    "mp_prefetch -> batch in workers",
    "mp_prefetch -> stream ops",
    "DataLoader with workers",
    "stats",
]


def _labels(batch):
    return np.asarray(batch["label"] if isinstance(batch, dict) else batch).tolist()


@pytest.mark.parametrize("name", NAMES)
def test_close_releases_everything_keeps_the_position_and_is_idempotent(name, shards):
    make = _pipelines(shards)[name]
    expected = [_labels(b) for b in make()]
    before = set(multiprocessing.active_children())
    it = make()
    first = [_labels(next(it)) for _ in range(3)]
    state = it.get_state()
    it.close()
    it.close()  # Idempotent.
    assert _settled(lambda: not _chute_threads()), _chute_threads()
    chute.stop_idle_workers()  # Closed, its workers stopped or wait parked for the next.
    assert _settled(lambda: set(multiprocessing.active_children()) <= before)
    assert it.get_state() == state
    rest = [_labels(b) for b in it]  # next() after close() starts again, where it was.
    assert first + rest == expected
    it.close()


@pytest.mark.parametrize("name", NAMES)
def test_an_iterator_is_a_context_manager_that_closes(name, shards):
    before = set(multiprocessing.active_children())
    with _pipelines(shards)[name]() as it:
        next(it)
        assert _chute_threads() or set(multiprocessing.active_children()) - before
    assert _settled(lambda: not _chute_threads()), _chute_threads()
    chute.stop_idle_workers()  # Closed, its workers stopped or wait parked for the next.
    assert _settled(lambda: set(multiprocessing.active_children()) <= before)


EXIT_SCRIPT = """
import sys
import chute
ds = chute.MapDataset.source(chute.ArrayRecordSource(sys.argv[1:])).to_iter_dataset(
    read_options=chute.ReadOptions(num_threads=16))
it = iter(ds)
for _ in range(3):
    next(it)
print("read 3")
"""


@pytest.mark.slow
def test_exit_with_read_threads_inside_the_native_reader_is_clean(tmp_path):
    # Before: "terminate called without an active exception", exit code 134, in 10 of
    # 12 runs here. The data is large enough that reads are in flight at exit.
    records = [{"image": np.full((64, 64, 3), i % 255, np.uint8)} for i in range(4000)]
    paths = chute.write_array_record(records, tmp_path / "big", num_shards=4)
    script = tmp_path / "exit.py"
    script.write_text(textwrap.dedent(EXIT_SCRIPT))
    outcomes = []
    for _ in range(8):
        done = subprocess.run(
            [sys.executable, str(script), *paths], capture_output=True, text=True, timeout=120
        )
        outcomes.append((done.returncode, done.stdout.strip(), done.stderr.strip()))
    assert outcomes == [(0, "read 3", "")] * 8
