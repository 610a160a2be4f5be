"""The shared-memory transport: round trips, slab reuse and growth, blocking, lifetimes."""

import itertools
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from chute_core.internal import reclaim_orphaned_segments, shm_dir
from chute_execution._transport import SlabReader, SlabWriter, serve_writes
from chute_execution._transport.codec import ALIGN, SMALL_BUFFER, dumps, layout
from chute_testing import assert_trees_equal
from chute_testing.execution import slabs_of

WAIT = 20.0  # A bound for a child process to answer, never a speed check.


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    before = slabs_of(os.getpid())
    yield
    assert slabs_of(os.getpid()) - before == set(), "a test left shared memory behind"


def round_trip(obj, **writer_options):
    with SlabWriter(2, **writer_options) as writer, SlabReader() as reader:
        message = writer.write(obj)
        result = reader.read(message)
        if message.token is not None:
            writer.release(message.token)
    return result, message


def leaves(tree) -> list[np.ndarray]:
    if isinstance(tree, np.ndarray):
        return [tree]
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in leaves(value)]
    if isinstance(tree, list | tuple):
        return [leaf for value in tree for leaf in leaves(value)]
    return []


def _memmap(tmp_path):
    array = np.lib.format.open_memmap(tmp_path / "m.npy", "w+", np.int16, (4, 5))
    array[:] = np.arange(20).reshape(4, 5)
    return array


read_only = np.arange(6.0)
read_only.flags.writeable = False

TREES = {
    "dtypes": {
        str(dtype): np.arange(24).astype(dtype).reshape(2, 3, 4)
        for dtype in [*"?BbHhIiLlefdFDg", ">f8", ">i4", "<u2", "S3", "U5"]
    },
    "0-d and empty": [np.array(3.5), np.zeros((0,)), np.zeros((3, 0, 2), np.int8), np.array("x")],
    "non-contiguous": (
        np.arange(60).reshape(6, 10)[::2, 1::3],
        np.arange(12.0).reshape(3, 4).T,  # Fortran order
        np.broadcast_to(np.arange(3), (4, 3)),
        np.arange(10)[::-1],
        np.broadcast_to(np.arange(3.0), (1, 3)),  # A 0 stride on a length-1 axis
        np.zeros((0, 4))[:, ::2],
        np.ones((3, 1, 4))[:, :, ::2],
        np.lib.stride_tricks.as_strided(np.arange(4), (2, 1), (8, 1000)),
    ),
    "datetimes": [np.array(["2024-01-01", "NaT"], "M8[D]"), np.arange(3).astype("m8[s]")],
    "structured": np.array([(1, 2.5, b"ab"), (3, -1.0, b"c")], "i4,f8,S2"),
    "python objects": {"none": None, "text": "é", "bytes": b"\x00" * 10, "int": 2**70},
    "numpy scalars": [np.float32(1.5), np.int64(-3), np.bool_(True)],
    "object arrays": np.array([{"a": 1}, None, "x"], dtype=object),
    "variable-width strings": np.array(["a", "long string"], np.dtypes.StringDType()),
    "read-only": read_only,
    "nested": {"a": [{"b": (np.ones(3), 1)}, [np.zeros((2, 2), np.uint8)]], "c": {}},
    "big and small": [np.arange(2**20, dtype=np.float32), np.arange(3), np.ones(SMALL_BUFFER)],
    "empty tree": [],
}


@pytest.mark.parametrize("name", TREES)
def test_trees_round_trip_within_a_process(name):
    result, _ = round_trip(TREES[name])
    assert_trees_equal(result, TREES[name])


def test_a_memmap_arrives_as_a_plain_array_through_shared_memory(tmp_path):
    array = _memmap(tmp_path)
    result, message = round_trip({"m": array})
    assert type(result["m"]) is np.ndarray
    assert_trees_equal(result["m"], np.asarray(array))
    assert message.spans == ((0, array.nbytes),)


def test_array_bytes_never_travel_in_the_pickle_stream():
    big = np.random.default_rng(0).random((256, 1024))
    tree = {"big": big, "strided": big[:, ::2], "fortran": np.asfortranarray(big), "t": big.T}
    _, message = round_trip(tree)
    assert len(message.data) < 1000
    assert [size for _, size in message.spans] == [big.nbytes, big.nbytes // 2] + [big.nbytes] * 2
    assert big.tobytes()[:64] not in message.data


def test_arrays_read_are_writable_and_share_memory_with_nothing():
    tree = {"big": np.arange(100_000), "small": np.arange(10), "other": np.ones(5), "ro": read_only}
    with SlabWriter(1) as writer, SlabReader() as reader:
        message = writer.write(tree)
        result = reader.read(message)
        slab = reader._slabs[(message.writer, message.slot)].array
        writer.release(message.token)
        arrays = leaves(result)
        for array in arrays:
            assert array.flags.writeable
            assert not np.shares_memory(array, slab)
            assert not any(np.shares_memory(array, other) for other in arrays if other is not array)
        before = {key: value.copy() for key, value in result.items()}
        writer.release(writer.write({key: -value for key, value in tree.items()}).token)
        assert_trees_equal(result, before)  # The slab was reused; the arrays did not change.
        result["big"][:] = 0
        assert_trees_equal(tree["big"], np.arange(100_000))


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        dtype=st.one_of(hnp.scalar_dtypes(), hnp.byte_string_dtypes(), hnp.unicode_string_dtypes()),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
    ),
    st.integers(1, 3),
    st.booleans(),
)
def test_any_array_round_trips_bit_for_bit(array, step, fortran):
    array = np.asfortranarray(array) if fortran else array
    if array.ndim:
        array = array[::step]
    result, message = round_trip([array, {"same": array}])
    for copy in (result[0], result[1]["same"]):
        assert (copy.dtype, copy.shape) == (array.dtype, array.shape)
        assert copy.tobytes() == array.tobytes()
    assert result[0] is result[1]["same"]  # One object in, one object out.
    assert len(message.spans) == 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 3 * SMALL_BUFFER), max_size=30))
def test_layout_places_buffers_aligned_without_overlap(sizes):
    spans, packed, end = layout(sizes)
    assert [size for _, size in spans] == sizes
    occupied = sorted(spans)
    for (offset, size), (next_offset, _) in itertools.pairwise(occupied):
        assert offset + size <= next_offset
    for offset, size in spans:
        assert offset % ALIGN == 0 and offset + size <= end
        assert (offset + size <= packed) == (size < SMALL_BUFFER)
    assert packed <= end


# --- Across processes -----------------------------------------------------------------


class Child:
    """A writer in a child process running `serve_writes`, driven over a pipe."""

    def __init__(self, num_slabs=2, initial_size=2**16, method="spawn"):
        context = multiprocessing.get_context(method)
        self.connection, child_end = context.Pipe()
        self.process = context.Process(
            target=serve_writes, args=(child_end, num_slabs, initial_size), daemon=True
        )
        self.process.start()
        child_end.close()

    def send(self, command, value=None):
        self.connection.send((command, value))

    def write(self, obj):
        self.send("write", obj)
        return self.reply()

    def reply(self):
        assert self.connection.poll(WAIT), "the child did not answer"
        reply = self.connection.recv()
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def stop(self, close=True):
        self.send("stop", close)
        self.process.join(WAIT)
        assert self.process.exitcode == 0


def test_trees_round_trip_across_processes():
    child = Child()
    try:
        with SlabReader() as reader:
            for tree in TREES.values():
                message = child.write(tree)
                # The child got `tree` through a plain pickle (protocol 4 turns '>f8' into
                # '<f8'; the transport keeps byte orders).
                assert_trees_equal(reader.read(message), pickle.loads(pickle.dumps(tree)))
                if message.token is not None:
                    child.send("release", message.token)
        assert len(slabs_of(child.process.pid)) == 2
    finally:
        child.stop()
    assert slabs_of(child.process.pid) == set()


def test_a_child_writer_waits_for_release_notices():
    child = Child(num_slabs=2)
    try:
        with SlabReader() as reader:
            for i in range(3):
                child.send("write", np.full(1000, i))
            first, second = child.reply(), child.reply()
            assert not child.connection.poll(0.3)  # Both slabs are busy.
            assert_trees_equal(reader.read(first), np.full(1000, 0))
            child.send("release", first.token)
            third = child.reply()
            assert third.slab == first.slab
            assert_trees_equal(reader.read(third), np.full(1000, 2))
            assert_trees_equal(reader.read(second), np.full(1000, 1))
    finally:
        child.stop()


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_child_that_exits_without_closing_leaves_nothing(method):
    child = Child(method=method)
    message = child.write([np.arange(10), np.arange(10**6)])
    assert message.slab in slabs_of(child.process.pid)
    child.stop(close=False)
    assert slabs_of(child.process.pid) == set()


def test_a_child_whose_consumer_hangs_up_leaves_nothing():
    child = Child()
    child.write(np.arange(10))
    child.connection.close()
    child.process.join(WAIT)
    assert child.process.exitcode == 0
    assert slabs_of(child.process.pid) == set()


def test_the_consumer_unlinks_the_slabs_of_a_killed_writer():
    child = Child()
    with SlabReader() as reader:
        messages = [child.write(np.arange(10)), child.write(np.arange(10, 20))]
        for message in messages:
            reader.read(message)
        os.kill(child.process.pid, signal.SIGKILL)
        # Not reaped yet, so no other chute process reclaims the slabs under our feet.
        assert len(slabs_of(child.process.pid)) == 2
        removed = reader.forget_process(child.process.pid)
        assert removed == sorted(message.slab for message in messages)
        child.process.join(WAIT)
        assert child.process.exitcode == -signal.SIGKILL
    assert slabs_of(child.process.pid) == set()


def test_slabs_of_a_killed_writer_the_consumer_never_saw_are_reclaimed():
    child = Child()
    message = child.write(np.arange(10))
    os.kill(child.process.pid, signal.SIGKILL)
    assert (shm_dir() / message.slab).exists()  # A killed process cannot clean up.
    child.process.join(WAIT)  # Reaped: its pid no longer names a live process.
    reclaim_orphaned_segments()
    assert slabs_of(child.process.pid) == set()


def run_script(source: str) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(source)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )


def test_a_writer_left_open_at_exit_leaves_nothing():
    result = run_script(
        """
        import numpy as np
        from chute_execution._transport import SlabWriter
        writer = SlabWriter(2)
        cycle = [writer]; cycle.append(cycle)  # Alive until the interpreter exits.
        print(writer.write(np.arange(10)).slab)
        """
    )
    assert result.returncode == 0, result.stderr
    assert not (shm_dir() / result.stdout.strip()).exists()


def test_a_full_shared_memory_folder_gives_a_clear_error_and_no_leftovers():
    # A file-size limit makes slab creation fail like a full /dev/shm would (EFBIG/ENOSPC).
    result = run_script(
        """
        import os, resource, signal
        import numpy as np
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2**20, 2**20))
        from chute_execution._transport import SlabReader, SlabWriter
        from chute_sources import SharedMemoryError
        def leftovers():
            return [n for n in os.listdir("/dev/shm") if n.startswith(f"chute-{os.getpid()}-")]
        try:
            SlabWriter(2).write(np.zeros(10))  # A 4 MiB slab does not fit.
        except SharedMemoryError as error:
            print("ERROR", error)
        with SlabWriter(1, initial_size=2**19) as writer, SlabReader() as reader:
            try:
                writer.write(np.zeros(2**18))  # 2 MiB: the slab cannot grow.
            except SharedMemoryError as error:
                print("GROW", error)
            message = writer.write(np.arange(1000))  # The old slab still works.
            print("STILL", reader.read(message).sum() == 499500, len(leftovers()))
        print("LEFT", leftovers())
        """
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ERROR cannot write shared memory"), result.stdout
    assert "MiB free and this needs 4.0 MiB more" in lines[0]
    assert lines[1].startswith("GROW cannot write shared memory")
    assert lines[2:] == ["STILL True 1", "LEFT []"]


def test_dumps_puts_every_plain_array_out_of_band():
    tree = [np.zeros((3, 4))[:, ::2], np.zeros(5, "M8[s]"), np.asfortranarray(np.ones((2, 3)))]
    _, buffers = dumps(tree)
    assert [buffer.raw().nbytes for buffer in buffers] == [48, 40, 48]
