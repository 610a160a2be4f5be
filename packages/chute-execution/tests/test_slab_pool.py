"""Slabs outlive their workers: the next iterator's workers take them over (`SlabPool`).

Checked with real worker processes: the same shared-memory files (by inode) serve the
next iterator; a batch still held from an earlier iterator is never written over; the
pool stays within its budget; `free_idle_slabs` and the exit of the process leave
nothing in the shared-memory folder; a forked child never touches its parent's pool.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from chute_core.internal import SHM_PREFIX, owner_tag, shm_dir
from chute_execution import (
    ChunkPlan,
    MultiprocessingOptions,
    MultiprocessPrefetchIter,
    free_idle_slabs,
)
from chute_execution._transport import pool as pool_module
from chute_execution._transport.pool import KEPT, POOL, SlabPool
from chute_testing.execution import FullArray
from chute_transforms import MapIter

ROWS = 2**17  # 1 MiB per element: results are leased to the consumer as views.
COPIED = 2**13  # 64 KiB per element: in a slab, but copied out (no lease).


def _iterator(length: int = 24, rows: int = COPIED) -> MultiprocessPrefetchIter:
    plan = ChunkPlan(range(length), [(MapIter, (FullArray(rows),), {})], chunk_size=2)
    return MultiprocessPrefetchIter(plan, MultiprocessingOptions(num_workers=2))


def _pool_inodes() -> set[int]:
    """The inodes of this process's pooled slabs (one freed while listed is left out)."""
    folder = shm_dir()
    mine = f"{SHM_PREFIX}{os.getpid()}-"
    inodes = set()
    for name in os.listdir(folder):
        if name.startswith(mine) and "-pool-" in name:
            with contextlib.suppress(FileNotFoundError):  # The idle thread freed it.
                inodes.add(os.stat(folder / name).st_ino)
    return inodes


@pytest.fixture(autouse=True)
def _empty_pool():
    free_idle_slabs()
    yield
    free_idle_slabs()


def _firsts(it: MultiprocessPrefetchIter) -> list[int]:
    """The first value of each array; no array is still held when `it` ends."""
    out = []
    for array in it:
        out.append(int(array[0]))
        del array
    return out


def test_the_next_iterators_workers_write_into_the_same_slabs():
    first = _firsts(_iterator())
    kept = _pool_inodes()
    assert kept, "the workers' slabs were not kept"
    assert POOL.idle_bytes() > 0
    second = _firsts(_iterator())
    assert first == second == list(range(24))
    assert kept <= _pool_inodes()  # Every kept slab served again, and is kept again.


def test_a_batch_held_from_an_earlier_iterator_is_never_written_over():
    it = _iterator(rows=ROWS)
    held = [next(it) for _ in range(5)]
    it.close()
    for _ in range(2):  # Later iterators (their workers take over the idle slabs).
        assert _firsts(_iterator(length=40, rows=ROWS)) == list(range(40))
        assert _firsts(_iterator(length=40)) == list(range(40))
    for value, array in enumerate(held):
        assert array.shape == (ROWS,)
        assert np.all(array == value)


def test_the_pool_keeps_at_most_its_budget_oldest_first(monkeypatch, tmp_path):
    monkeypatch.setenv("CHUTE_SHM_DIR", str(tmp_path))
    monkeypatch.setattr(pool_module, "budget", lambda: 3000)
    pool = SlabPool()
    paths = []
    for size in (1000, 1000, 1000, 1000):
        path = tmp_path / f"{SHM_PREFIX}0-0-slab-{len(paths)}"
        path.write_bytes(bytes(size))
        paths.append(str(path))
    assert pool.adopt(paths[:2]) == 2
    assert pool.adopt([*paths[2:], str(tmp_path / "gone")]) == 2
    assert pool.idle_bytes() == 3000
    segments = [name for name in os.listdir(tmp_path) if name.startswith(SHM_PREFIX)]
    assert len(segments) == 3  # The oldest was unlinked.
    assert [size for _, size in pool.take(5)] == [1000, 1000, 1000]
    assert pool.idle_bytes() == 0


def test_free_idle_slabs_unlinks_them_and_says_how_many_bytes():
    _firsts(_iterator())
    held = POOL.idle_bytes()
    assert held > 0 and _pool_inodes()
    assert free_idle_slabs() == held
    assert POOL.idle_bytes() == 0 and not _pool_inodes()


def _left_over(size: int = COPIED * 8) -> str:
    """A slab left to this process under a name no release of its own looks for.

    As when a worker renamed its slabs for its iterator only after that iterator's
    release had looked for them.
    """
    path = shm_dir() / f"{SHM_PREFIX}{owner_tag()}-{KEPT}0badcafe-{os.urandom(6).hex()}"
    path.write_bytes(bytes(size))
    return str(path)


def test_slabs_left_under_another_iterators_name_are_taken_over_by_the_next_release():
    left = _left_over()
    inode = os.stat(left).st_ino
    assert _firsts(_iterator()) == list(range(24))
    assert not os.path.exists(left)
    assert inode in _pool_inodes()  # In the pool now, for the next iterators.
    free_idle_slabs()
    assert not _pool_inodes()


def _kept_names() -> list[str]:
    mine = f"{SHM_PREFIX}{owner_tag()}-{KEPT}"
    return [name for name in os.listdir(shm_dir()) if name.startswith(mine)]


def test_a_release_while_chute_shm_dir_names_another_folder_keeps_the_workers_slabs(
    monkeypatch, tmp_path
):
    # As when the garbage collector releases an iterator during a test that set it.
    it = _iterator(length=400)
    assert next(it) is not None
    with monkeypatch.context() as patch:
        patch.setenv("CHUTE_SHM_DIR", str(tmp_path))
        it.close()
    assert _kept_names() == []  # Taken over, not left in the workers' folder.
    assert _pool_inodes() and POOL.idle_bytes() > 0
    assert not [name for name in os.listdir(tmp_path) if name.startswith(SHM_PREFIX)]
    free_idle_slabs()
    assert not _pool_inodes()


def test_free_idle_slabs_also_frees_slabs_left_to_this_process_that_no_release_took():
    left = _left_over()
    free_idle_slabs()
    assert not os.path.exists(left)


_EXITING = """
import os, sys
sys.path[:0] = {path!r}
from test_slab_pool import _firsts, _iterator
from chute_execution._transport.pool import POOL
out = _firsts(_iterator())
print(os.getpid(), POOL.idle_bytes() > 0, out == list(range(24)))
"""


def test_nothing_is_left_in_shared_memory_after_the_process_exits():
    script = _EXITING.format(path=[os.path.dirname(__file__)])
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    pid, kept, equal = done.stdout.split()
    assert (kept, equal) == ("True", "True")
    mine = (f"{SHM_PREFIX}{pid}-", f".chute-owner-{pid}-")  # Its segments, its owner file.
    left = [n for n in os.listdir(shm_dir()) if n.startswith(mine)]
    assert left == []


# jax, imported by other tests of the session, warns at any fork; this child runs no jax.
@pytest.mark.filterwarnings(r"ignore:os\.fork\(\) was called:RuntimeWarning")
def test_a_forked_child_sees_an_empty_pool_and_leaves_the_parents_alone():
    _firsts(_iterator())
    kept = _pool_inodes()
    assert kept
    pid = os.fork()
    if pid == 0:  # The child: its pool is empty, and freeing it touches nothing.
        ok = POOL.idle_bytes() == 0 and POOL.take(10) == [] and POOL.free() == 0
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _pool_inodes() == kept


def test_a_writer_builds_its_first_batch_in_a_slab_it_took_over():
    from chute_execution._transport import SlabWriter
    from chute_execution._transport.slab import Slab

    idle = Slab.create(2**20)
    idle.close()
    with SlabWriter(num_slabs=2) as fresh:
        assert fresh.arena() is None  # Nothing to go by before the first message.
    with SlabWriter(num_slabs=2) as writer:
        assert writer.adopt([(idle.name, 2**20)]) == 1
        assert not os.path.exists(idle.path)  # Renamed into the writer's own name.
        arena = writer.arena()
        assert arena is not None and arena.slab.size == 2**20
        batch = arena.empty((4, 2**15), np.dtype(np.float32))
        batch[:] = 7.0
        message = writer.write([batch], arena=arena)
        assert message.slab == arena.slab.name and message.spans[0][0] == arena.floor


@pytest.mark.parametrize(
    ("folder_bytes", "kept"),
    [(64 * 2**20, 0), (2**30 - 1, 0), (2 * 2**30, 256 * 2**20), (24 * 2**30, 512 * 2**20)],
)
def test_the_budget_is_an_eighth_of_the_folder_at_most_512_mib_and_none_if_small(
    monkeypatch, folder_bytes, kept
):
    # The 64 MiB case with a real tmpfs: tests/faults/test_shm_full_faults.py.
    usage = type("Usage", (), {"total": folder_bytes, "used": 0, "free": folder_bytes})
    monkeypatch.setattr(pool_module.shutil, "disk_usage", lambda path: usage)
    assert pool_module.budget() == kept


def test_the_consumer_maps_a_kept_slab_once_for_all_iterators(monkeypatch):
    from chute_execution._transport import reader as reader_module

    attached = []  # The inode of each slab mapped.
    attach = reader_module.Slab.attach

    def counted(name, size, **kwargs):  # The real attach, counted.
        attached.append(os.stat(shm_dir() / name).st_ino)
        return attach(name, size, **kwargs)

    monkeypatch.setattr(reader_module.Slab, "attach", counted)
    assert _firsts(_iterator()) == list(range(24))
    assert attached
    for _ in range(2):
        assert _firsts(_iterator()) == list(range(24))
    # Later iterators reuse the mappings of kept slabs: none is mapped twice. (A worker
    # that happens to need a slab more than before makes a new one, mapped once too.)
    assert len(attached) == len(set(attached))


def test_idle_slabs_are_freed_once_they_waited_as_long_as_idle_workers_do():
    from chute_execution import stop_idle_workers
    from chute_testing.execution import wait_until

    plan = ChunkPlan(range(24), [(MapIter, (FullArray(COPIED),), {})], chunk_size=2)
    options = MultiprocessingOptions(num_workers=2, idle_worker_seconds=1.5)
    assert _firsts(MultiprocessPrefetchIter(plan, options)) == list(range(24))
    assert POOL.idle_bytes() > 0 and _pool_inodes()
    assert wait_until(lambda: POOL.idle_bytes() == 0 and not _pool_inodes(), seconds=20)
    assert not [t for t in __import__("threading").enumerate() if t.name == "chute-idle-slabs"]
    stop_idle_workers()


_CLEAN_UP = """
import os, shutil, sys
sys.path[:0] = {path!r}
from test_slab_pool import _firsts, _iterator
from chute_execution._transport.pool import POOL
from chute_core.internal import shm_dir
assert _firsts(_iterator()) == list(range(24))
pooled = sorted(name for name in os.listdir(shm_dir()) if "-pool-" in name)
assert len(pooled) >= 2, pooled
if sys.argv[1] == "planted":  # A folder under a slab's name: it cannot be unlinked.
    os.unlink(shm_dir() / pooled[0])
    os.mkdir(shm_dir() / pooled[0])
else:  # The shared-memory folder itself was removed.
    shutil.rmtree(shm_dir())
print(" ".join(pooled), flush=True)
"""


@pytest.mark.parametrize("damage", ["planted", "folder removed"])
def test_clean_up_at_exit_never_raises_and_goes_on_past_what_it_cannot_remove(tmp_path, damage):
    folder = tmp_path / "shm"
    folder.mkdir()
    script = textwrap.dedent(_CLEAN_UP.format(path=[os.path.dirname(__file__)]))
    done = subprocess.run(
        [sys.executable, "-c", script, damage.split()[0]],
        capture_output=True,
        text=True,
        env={**os.environ, "CHUTE_SHM_DIR": str(folder)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    pooled = done.stdout.split()
    if damage == "planted":
        # Every other slab unlinked, and the workers' and consumer's owner files gone.
        assert sorted(os.listdir(folder)) == [pooled[0]]
        assert (folder / pooled[0]).is_dir()
    else:
        assert not folder.exists()


_KILLED = """
import os, signal, sys
sys.path[:0] = {path!r}
from test_slab_pool import _firsts, _iterator
from chute_execution._transport.pool import POOL
assert _firsts(_iterator()) == list(range(24))  # Its workers wait parked.
assert POOL.idle_bytes() > 0
print("kept", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_the_workers_of_a_killed_consumer_reclaim_the_slabs_it_kept(tmp_path):
    from chute_testing.execution import wait_until

    folder = tmp_path / "shm"
    folder.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_KILLED.format(path=[os.path.dirname(__file__)]))],
        capture_output=True,
        text=True,
        env={**os.environ, "CHUTE_SHM_DIR": str(folder)},
        timeout=120,
    )
    assert done.returncode == -9 and done.stdout == "kept\n", done.stderr
    # Its idle slabs and its owner file: reclaimed by the parked workers as they exit.
    assert wait_until(lambda: os.listdir(folder) == [], seconds=20), os.listdir(folder)


def test_the_expiry_timer_never_starts_while_the_pool_is_locked(monkeypatch, tmp_path):
    # A new thread may run a finalizer that takes the pool's lock (garbage collection
    # runs in any thread) while Thread.start waits for it: it must start unlocked.
    monkeypatch.setenv("CHUTE_SHM_DIR", str(tmp_path))
    monkeypatch.setattr(pool_module, "budget", lambda: 1 << 20)
    pool = SlabPool()
    locked_at_start = []
    start = threading.Timer.start

    def recording_start(timer):
        locked_at_start.append(pool._lock._is_owned())
        start(timer)

    monkeypatch.setattr(threading.Timer, "start", recording_start)
    for number in range(3):
        path = tmp_path / f"{SHM_PREFIX}0-0-slab-{number}"
        path.write_bytes(bytes(100))
        assert pool.adopt([str(path)], idle_seconds=0.05) == 1
    with pool.timer_stopped():
        pass
    assert len(pool.take(1)) == 1
    from chute_testing.execution import wait_until

    assert wait_until(lambda: pool.idle_bytes() == 0, seconds=10)  # Expired on its timer.
    assert locked_at_start and not any(locked_at_start)
    pool.free()
