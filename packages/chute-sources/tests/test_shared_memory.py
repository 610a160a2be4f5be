import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_core import SharedMemoryError, SourceClosedError, read_records
from chute_core.internal import (
    SHM_PREFIX,
    create_segment_file,
    reclaim_orphaned_segments,
    remove_own_segments,
    shm_dir,
)
from chute_sources import SharedMemorySource
from chute_testing import assert_trees_equal


def _segments() -> set[str]:
    """This process's segments (other processes on the machine may create their own)."""
    mine = f"{SHM_PREFIX}{os.getpid()}-"
    return {n for n in os.listdir(shm_dir()) if n.startswith(mine)}


@pytest.fixture(autouse=True)
def no_leaks():
    before = _segments()
    yield
    assert _segments() - before == set(), "a test left shared memory behind"


def _records():
    return [
        0,
        "text",
        b"\x00bytes",
        None,
        {"image": np.arange(24, dtype=np.uint8).reshape(2, 3, 4), "label": 7},
        {"nested": {"list": [1.5, np.float32(2.5)], "tuple": (np.zeros(0), "x")}},
    ]


def test_every_item_round_trips_and_arrays_are_read_only():
    records = _records()
    with SharedMemorySource(records) as source:
        assert len(source) == len(records)
        for i, record in enumerate(records):
            assert_trees_equal(source[i], record)
        assert_trees_equal(
            source.__getitems__([5, 0, 5, -2]), [records[5], 0, records[5], records[4]]
        )
        assert not source[4]["image"].flags.writeable


@settings(max_examples=25, deadline=None)
@given(st.lists(st.one_of(st.integers(), st.text(), st.binary(max_size=100)), max_size=50))
def test_matches_the_input_for_any_list(records):
    with SharedMemorySource(records) as source:
        assert list(source) == records


def test_large_items_have_no_size_limit():
    big = np.random.default_rng(0).integers(0, 255, size=24 * 2**20, dtype=np.uint8)
    with SharedMemorySource([big, b"y" * (12 * 2**20)]) as source:
        assert_trees_equal(source[0], big)
        assert len(source[1]) == 12 * 2**20


def test_memory_is_owner_only_and_freed_on_close():
    source = SharedMemorySource(range(3))
    path = shm_dir() / source.name
    assert path.exists()
    assert path.stat().st_mode & 0o777 == 0o600
    source.close()
    assert not path.exists()
    with pytest.raises(SourceClosedError):
        source[0]


def test_memory_is_freed_when_the_source_is_garbage_collected():
    source = SharedMemorySource(range(3))
    path = shm_dir() / source.name
    del source
    assert not path.exists()


def test_a_pickled_copy_reads_the_same_memory_and_does_not_free_it(spawn_pool):
    with SharedMemorySource(_records()) as source:
        data = pickle.dumps(source)
        assert len(data) < 300  # Only the name travels, not the records.
        copy = pickle.loads(data)
        assert_trees_equal(copy[4], source[4])
        copy.close()
        assert (shm_dir() / source.name).exists()
        assert_trees_equal(spawn_pool(read_records, source, [4, 1]), [source[4], "text"])
        assert (shm_dir() / source.name).exists()


def test_a_copy_fails_clearly_after_the_owner_closed():
    source = SharedMemorySource([1])
    copy = pickle.loads(pickle.dumps(source))
    source.close()
    with pytest.raises(SharedMemoryError, match="is gone"):
        copy[0]


def test_memory_of_a_killed_process_is_reclaimed_by_the_next_one():
    script = textwrap.dedent(
        """
        import os, signal
        from chute_sources import SharedMemorySource
        source = SharedMemorySource(range(1000))
        print(source.name, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    name = result.stdout.strip()
    assert result.returncode == -9
    assert (shm_dir() / name).exists()
    assert name in reclaim_orphaned_segments()
    assert not (shm_dir() / name).exists()


def test_records_the_codec_cannot_encode_leave_nothing_behind():
    with pytest.raises(TypeError, match="cannot encode"):
        SharedMemorySource([1, object()])


def test_repr_names_parameters():
    with SharedMemorySource([1, 2]) as source:
        assert repr(source).startswith(f"SharedMemorySource(name='{source.name}', len=2, nbytes=")


def test_a_full_shared_memory_folder_gives_a_clear_error_and_no_leftovers():
    # A file-size limit makes the write fail like a full /dev/shm would (EFBIG/ENOSPC).
    script = textwrap.dedent(
        """
        import os, resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2**20, 2**20))
        from chute_sources import SharedMemoryError, SharedMemorySource
        try:
            SharedMemorySource([b"x" * 2**19] * 8)
        except SharedMemoryError as error:
            print("ERROR", error)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ERROR cannot write shared memory")
    assert "MiB free and this needs" in result.stdout


def test_chute_shm_dir_chooses_the_folder_of_shared_memory(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUTE_SHM_DIR", str(tmp_path))
    assert shm_dir() == tmp_path
    source = SharedMemorySource(["a", "b"])
    try:
        (name,) = [n for n in os.listdir(tmp_path) if n.startswith(SHM_PREFIX)]
        assert name == source.name and name.startswith(f"{SHM_PREFIX}{os.getpid()}-")
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600
        assert list(source) == ["a", "b"]
    finally:
        source.close()
    assert [n for n in os.listdir(tmp_path) if n.startswith(SHM_PREFIX)] == []
    monkeypatch.delenv("CHUTE_SHM_DIR")
    assert shm_dir() != tmp_path


@pytest.mark.parametrize("value", ["missing", "a-file"])
def test_a_chute_shm_dir_that_is_no_writable_folder_is_a_clear_error(value, tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("CHUTE_SHM_DIR", str(tmp_path / value))
    with pytest.raises(SharedMemoryError, match=r"CHUTE_SHM_DIR='.*' is not a writable folder"):
        SharedMemorySource(["a"])


def test_remove_own_segments_unlinks_this_processes_segments_only(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUTE_SHM_DIR", str(tmp_path))
    with _LiveOwner(tmp_path) as other:  # Another live process's segment.
        path, fd = create_segment_file("slab")
        os.close(fd)
        (tmp_path / "not-chute").touch()
        assert remove_own_segments() == [path.name]
        left = sorted(os.listdir(tmp_path))
        assert left == sorted([other.segment, other.owner_file, "not-chute"])


class _LiveOwner:
    """Another process that owns a segment in `folder` until the block ends."""

    SCRIPT = textwrap.dedent(
        """
        import os, sys
        from chute_core.internal import SHM_PREFIX, create_segment_file, owner_tag
        path, fd = create_segment_file("slab")
        print(path.name, f".chute-owner-{owner_tag()}", flush=True)
        sys.stdin.read()  # Lives until its stdin closes.
        """
    )

    def __init__(self, folder, prefix=()):
        self.folder, self.prefix = folder, list(prefix)

    def __enter__(self):
        env = {**os.environ, "CHUTE_SHM_DIR": str(self.folder)}
        self.process = subprocess.Popen(
            [*self.prefix, sys.executable, "-c", self.SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.segment, self.owner_file = self.process.stdout.readline().split()
        return self

    def kill(self):
        self.process.kill()
        self.process.wait()

    def __exit__(self, *exc_info):
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


def test_a_live_owners_segments_are_never_reclaimed_and_a_dead_ones_are(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUTE_SHM_DIR", str(tmp_path))
    with _LiveOwner(tmp_path) as live, _LiveOwner(tmp_path) as dying:
        dying.kill()
        assert reclaim_orphaned_segments() == [dying.segment]
        assert sorted(n for n in os.listdir(tmp_path)) == sorted([live.segment, live.owner_file])


def test_a_segment_named_by_an_older_chute_is_left_alone(tmp_path, monkeypatch):
    # `chute-<pid>-<start time>-...`: whose it is cannot be told across PID namespaces.
    monkeypatch.setenv("CHUTE_SHM_DIR", str(tmp_path))
    old = tmp_path / f"{SHM_PREFIX}999999-12345-slab-0123456789ab"
    old.touch()
    assert reclaim_orphaned_segments() == []
    assert old.exists()


FORKS = textwrap.dedent(
    """
    import os
    from chute_core.internal import create_segment_file, reclaim_orphaned_segments
    path, fd = create_segment_file("slab")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # The child makes its own segment, then exits without clean-up.
        try:
            child, _ = create_segment_file("slab")
            os.write(write, child.name.encode())
        finally:
            os._exit(0)
    os.close(write)
    child = os.read(read, 200).decode()
    os.waitpid(pid, 0)
    assert child.startswith(f"chute-{pid}-o"), child
    # The child is gone, its segment an orphan; ours is not, though the child held our
    # owner file open until it exited.
    assert reclaim_orphaned_segments() == [child]
    assert path.exists()
    os.close(fd)
    path.unlink()  # A segment's owning object unlinks it (this test has none).
    print("ok")
    """
)


def test_a_forked_child_has_its_own_owner_and_the_parents_stays_locked(tmp_path):
    env = {**os.environ, "CHUTE_SHM_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", FORKS], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "ok\n"
    assert os.listdir(tmp_path) == []  # The parent's exit removed its owner file.
