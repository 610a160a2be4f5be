"""How workers start: forked from the consumer when provably safe, else by the fork server.

Each case runs in a fresh subprocess (the test process itself may have imported jax or
run threads). A worker tells how it started by its parent: the consumer when forked
from it, the fork server otherwise. Whatever the start, the output is the same.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "consumer_process", Path(__file__).with_name("consumer_process.py")
)
assert _spec is not None and _spec.loader is not None
cp = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("consumer_process", cp)
_spec.loader.exec_module(cp)

PRELUDE = """
import gc, json, os, signal, sys, threading, weakref
import numpy as np
import chute
from chute_execution import MultiprocessingOptions


def origin(x):
    # How this worker started, and what it inherited.
    default = signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    return [os.getppid(), default, signal.getsignal(signal.SIGINT) == signal.SIG_IGN,
            "jax" in sys.modules]


def pipeline(start_method, workers=2):
    ds = chute.MapDataset.range(64).to_iter_dataset().map(origin)
    options = MultiprocessingOptions(num_workers=workers, start_method=start_method)
    return ds.mp_prefetch(options, chunk_size=4)


from chute_execution.internal import WorkerPool

STARTS = []  # How each pool of workers started: [start_path, fork_refused].
_init = WorkerPool.__init__


def _recording_init(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    STARTS.append([self.start_path, self.fork_refused])


WorkerPool.__init__ = _recording_init


def report(**values):
    print(json.dumps(values), flush=True)


signal.signal(signal.SIGUSR1, lambda *_: None)  # Workers must not inherit it.
"""


def _run(script: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + script],
        capture_output=True,
        text=True,
        timeout=cp.STARTUP,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _origins(script_setup: str, start_method: str = "auto") -> dict:
    return _run(
        script_setup
        + f"""
out = list(pipeline({start_method!r}))
report(consumer=os.getpid(), origins=out, starts=STARTS)
"""
    )


def test_auto_forks_the_workers_from_a_single_threaded_consumer():
    seen = _origins("")
    assert seen["starts"] == [["fork", None]]
    parents = {origin[0] for origin in seen["origins"]}
    assert parents == {seen["consumer"]}
    # Not the consumer's SIGUSR1 handler; SIGINT ignored; no jax.
    assert {tuple(origin[1:]) for origin in seen["origins"]} == {(True, True, False)}


def test_a_running_python_thread_makes_auto_use_the_fork_server():
    seen = _origins(
        "stop = threading.Event()\nthreading.Thread(target=stop.wait, daemon=True).start()\n"
    )
    assert seen["starts"] == [["forkserver", "2 Python threads run"]]
    parents = {origin[0] for origin in seen["origins"]}
    assert len(parents) == 1 and seen["consumer"] not in parents  # The fork server.
    assert {tuple(origin[1:]) for origin in seen["origins"]} == {(True, True, False)}


def test_with_jax_imported_auto_uses_the_fork_server_and_workers_never_hold_jax():
    seen = _origins("import jax\n")
    assert seen["starts"] == [["forkserver", "jax is imported (workers never hold jax)"]]
    parents = {origin[0] for origin in seen["origins"]}
    assert seen["consumer"] not in parents
    assert {origin[3] for origin in seen["origins"]} == {False}


def test_native_threads_make_auto_kill_the_fork_before_any_user_code_runs(tmp_path):
    # ArrayRecord's reader runs native threads (not Python ones): only the thread
    # count right after the fork sees them. The forked child is killed unstarted, so
    # worker_init_fn runs in the fork server's two workers only.
    script = f"""
from chute_sources import ArrayRecordSource, write_array_record
paths = write_array_record([{{"a": i}} for i in range(8)], {str(tmp_path / "x")!r}, num_shards=2)
source = ArrayRecordSource(paths)
source[0]
log = {str(tmp_path / "init.log")!r}

def init(worker, count):
    with open(log, "a") as f:
        f.write(f"{{worker}} {{os.getppid()}}\\n")

ds = chute.MapDataset.range(16).to_iter_dataset().map(origin)
options = MultiprocessingOptions(num_workers=2)
it = iter(ds.mp_prefetch(options, worker_init_fn=init, chunk_size=4))
out = list(it)
report(consumer=os.getpid(), origins=out, starts=STARTS, inits=open(log).read().split())
"""
    seen = _run(script)
    [[path, refused]] = seen["starts"]
    assert path == "forkserver" and refused.endswith("threads ran when it forked a worker")
    parents = {origin[0] for origin in seen["origins"]}
    assert len(parents) == 1 and seen["consumer"] not in parents
    inits = seen["inits"]
    assert sorted(inits[0::2]) == ["0", "1"], inits  # Exactly one run per worker.
    assert {int(parent) for parent in inits[1::2]} == parents


def test_fork_forkserver_and_zero_workers_yield_the_same_stream():
    script = """
def noisy(x, rng):
    return {"x": np.full((3,), x, np.int64), "noise": rng.random()}

def keep(e):
    return e["x"][0] % 3 != 1

ds = (chute.MapDataset.range(300).seed(7).shuffle().to_iter_dataset()
      .random_map(noisy).filter(keep))
streams = {}
for method, workers in (("auto", 2), ("forkserver", 2), ("auto", 3), ("spawn", 1), ("auto", 0)):
    options = MultiprocessingOptions(num_workers=workers, start_method=method)
    batches = list(ds.mp_prefetch(options, chunk_size=16).batch(7))
    streams[f"{method}-{workers}"] = [
        [b["x"].tolist(), b["noise"].tolist()] for b in batches
    ]
report(starts=STARTS, streams=streams)
"""
    seen = _run(script)
    assert [start[0] for start in seen["starts"]] == ["fork", "forkserver", "fork", "spawn"]
    streams = seen["streams"]
    assert len(streams["auto-0"]) == 29  # 200 elements kept, in batches of 7.
    for name, stream in streams.items():
        assert stream == streams["auto-0"], name


def test_the_data_loader_forks_its_workers_too():
    script = """
class Parent(chute.MapTransform):
    def map(self, x):
        return [int(x), os.getppid()]

def run(workers):
    loader = chute.DataLoader(
        data_source=chute.RangeSource(40),
        sampler=chute.IndexSampler(40, shard_options=chute.NoSharding(), shuffle=True, seed=3),
        operations=[Parent()],
        worker_count=workers,
    )
    return list(loader)

zero, two = run(0), run(2)
report(consumer=os.getpid(), starts=STARTS, zero=[z[0] for z in zero],
       two=[t[0] for t in two], parents=sorted({t[1] for t in two}))
"""
    seen = _run(script)
    assert seen["starts"] == [["fork", None]]
    assert seen["two"] == seen["zero"] and sorted(seen["zero"]) == list(range(40))
    assert seen["parents"] == [seen["consumer"]]


def test_a_forked_worker_never_finalizes_the_consumers_objects(tmp_path):
    # An object of the consumer's in a reference cycle, with a finalizer: garbage in
    # each forked worker too, where a collection must not run the finalizer.
    marker = tmp_path / "finalized"
    script = f"""
class Cycle:
    pass

garbage = Cycle()
garbage.me = garbage
weakref.finalize(garbage, lambda: open({str(marker)!r}, "a").write(f"{{os.getpid()}}\\n"))
gc.disable()
del garbage

def collect(x):
    gc.collect()
    return os.getppid()

ds = chute.MapDataset.range(16).to_iter_dataset().map(collect)
parents = set(ds.mp_prefetch(num_workers=2, chunk_size=4))
gc.enable()
gc.collect()  # Here it runs, once.
finalized = open({str(marker)!r}).read().split()
report(consumer=os.getpid(), starts=STARTS, parents=sorted(parents), finalized=finalized)
"""
    seen = _run(script)
    assert seen["starts"] == [["fork", None]]
    assert seen["parents"] == [seen["consumer"]]
    assert seen["finalized"] == [str(seen["consumer"])]


@pytest.mark.parametrize("start_method", ["auto", "forkserver"])
def test_a_killed_consumer_leaves_no_worker_and_no_shared_memory(start_method):
    script = f"""
ds = (
    chute.MapDataset.range(1_000_000)
    .to_iter_dataset()
    .map(SleepAt(9, seconds=3600))
    .map(FullArray(2**18))
    .mp_prefetch(chute.MultiprocessingOptions(num_workers=2, start_method={start_method!r}),
                 chunk_size=2)
)
it = iter(ds)
for _ in range(3):
    next(it)
announce()
for _ in it:
    pass
"""
    consumer = cp.Consumer(script)
    try:
        forked = start_method == "auto"
        assert (consumer.forkserver is None) == forked
        parents = {_parent_of(pid) for pid in consumer.workers}
        assert (parents == {consumer.pid}) == forked
        consumer.wait_for_segments()
        os.kill(consumer.pid, signal.SIGKILL)
        assert consumer.process.wait(cp.BOUND) == -signal.SIGKILL
        assert cp.wait_until(lambda: not any(map(cp.alive, consumer.processes)))
        assert cp.segments([consumer.pid, *consumer.workers]) == {}
    finally:
        consumer.kill()


def test_forked_workers_ignore_sigint_and_free_their_slabs_on_sigterm():
    script = """
it = iter(pipeline("auto", workers=2))
first = next(it)
workers = [p for p in __import__("multiprocessing").active_children()]
pids = [w.pid for w in workers]
for pid in pids:
    os.kill(pid, signal.SIGINT)
import time
time.sleep(0.3)
alive_after_sigint = [w.is_alive() for w in workers]
for pid in pids:
    os.kill(pid, signal.SIGTERM)
for w in workers:
    w.join(10)
from chute_core.internal import shm_dir
left = [n for n in os.listdir(shm_dir()) if n.startswith(tuple(f"chute-{p}-" for p in pids))]
report(consumer=os.getpid(), starts=STARTS, parent=first[0], alive=alive_after_sigint,
       codes=[w.exitcode for w in workers], left=left)
"""
    seen = _run(script)
    assert seen["starts"] == [["fork", None]]
    assert seen["parent"] == seen["consumer"]
    assert seen["alive"] == [True, True]
    assert seen["codes"] == [128 + signal.SIGTERM] * 2
    assert seen["left"] == []


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def test_a_second_iterator_forks_again():
    seen = _run(
        """
ds = pipeline("auto")
first = {o[0] for o in ds}
second = {o[0] for o in ds}
report(consumer=os.getpid(), starts=STARTS, first=sorted(first), second=sorted(second))
"""
    )
    assert seen["starts"] == [["fork", None], ["fork", None]]
    assert seen["first"] == seen["second"] == [seen["consumer"]]


def test_the_idle_slab_timer_never_keeps_auto_from_forking():
    # New workers each iterator: the last one's slabs wait idle, on a timer thread.
    seen = _run(
        """
def parent_array(x):  # Arrays travel in slabs, which the next iterator's workers reuse.
    return np.full(8192, os.getppid())

def fresh():
    ds = chute.MapDataset.range(64).to_iter_dataset().map(parent_array)
    options = MultiprocessingOptions(num_workers=2, idle_worker_seconds=0)
    return ds.mp_prefetch(options, chunk_size=4)

first = {int(o[0]) for o in fresh()}
timer = [t.name for t in threading.enumerate() if t.name == "chute-idle-slabs"]
second = {int(o[0]) for o in fresh()}
report(consumer=os.getpid(), starts=STARTS, timer=timer, first=sorted(first),
       second=sorted(second))
"""
    )
    assert seen["timer"] == ["chute-idle-slabs"]
    assert seen["starts"] == [["fork", None], ["fork", None]]
    assert seen["first"] == seen["second"] == [seen["consumer"]]


def test_mp_prefetch_starts_the_fork_server_ahead_only_when_it_will_be_needed(tmp_path):
    # NumPy's OpenBLAS threads stop for a fork: no fork server. ArrayRecord's reader
    # pool does not: the fork server starts at mp_prefetch, before the first iterator.
    script = f"""
from multiprocessing import forkserver
from chute_execution.internal import thread_count

def server_started():
    return getattr(forkserver._forkserver, "_forkserver_pid", None) is not None

ds = chute.MapDataset.range(8).to_iter_dataset().mp_prefetch(num_workers=2)
plain = [thread_count(), server_started()]
from chute_sources import ArrayRecordSource, write_array_record
paths = write_array_record([{{"a": i}} for i in range(8)], {str(tmp_path / "x")!r}, num_shards=2)
source = ArrayRecordSource(paths)
ds = chute.MapDataset.range(8).to_iter_dataset().mp_prefetch(num_workers=2)
report(plain=plain, array_record=server_started(), starts=STARTS)
"""
    seen = _run(script)
    threads, started = seen["plain"]
    assert threads >= 1 and started is False
    assert seen["array_record"] is True
    assert seen["starts"] == []  # No iterator yet: no worker started.
