"""The slab writer and reader within one process: reuse, growth, waiting, misuse, cleanup.

(Round trips of every kind of tree, and writers in child processes, are in
test_transport.py.)
"""

import os
import pickle
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from chute_core import SharedMemoryError
from chute_core.internal import SHM_PREFIX, shm_dir
from chute_execution._transport import SlabMessage, SlabReader, SlabWriter
from chute_testing import assert_trees_equal
from chute_testing.execution import slabs_of

WAIT = 20.0  # A bound for another thread to answer, never a speed check.


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    before = slabs_of(os.getpid())
    yield
    assert slabs_of(os.getpid()) - before == set(), "a test left shared memory behind"


def test_objects_without_array_bytes_need_no_slab():
    with SlabWriter(1) as writer, SlabReader() as reader:
        for tree in ([1, "a", {"b": None}], [np.zeros(0), np.zeros((2, 0), np.int8)]):
            message = writer.write(tree)
            assert (message.slab, message.token) == ("", None)
            assert_trees_equal(reader.read(message), tree)
            writer.release(message.token)  # Frees nothing, and is allowed.
        assert slabs_of(os.getpid()) == set()


def test_messages_are_small_picklable_tuples():
    with SlabWriter(1) as writer:
        message = writer.write([np.arange(10**6)])
        copy = pickle.loads(pickle.dumps(message))
    assert copy == message and isinstance(copy, SlabMessage)
    assert len(pickle.dumps(message)) < 500


def test_many_messages_reuse_two_slabs():
    with SlabWriter(2, initial_size=2**16) as writer, SlabReader() as reader:
        names = set()
        pending = []
        for i in range(50):
            message = writer.write({"i": i, "x": np.full(1000, i)})
            names.add(message.slab)
            pending.append((i, message))
            if len(pending) == 2:  # Both slabs busy: read and release the older one.
                j, old = pending.pop(0)
                assert_trees_equal(reader.read(old), {"i": j, "x": np.full(1000, j)})
                writer.release(old.token)
        j, last = pending.pop()
        assert_trees_equal(reader.read(last), {"i": j, "x": np.full(1000, j)})
        writer.release(last.token)
        assert len(names) == 2
        assert len(slabs_of(os.getpid())) == 2
        assert writer.nbytes == 2 * 2**16


def test_messages_are_read_correctly_in_any_order():
    with SlabWriter(3, initial_size=2**16) as writer, SlabReader() as reader:
        trees = [{"x": np.arange(i, i + 1000)} for i in range(3)]
        messages = [writer.write(tree) for tree in trees]
        for index in (2, 0, 1):
            assert_trees_equal(reader.read(messages[index]), trees[index])
            writer.release(messages[index].token)


def test_a_message_larger_than_its_slab_gets_a_larger_slab():
    with SlabWriter(1, initial_size=4096) as writer, SlabReader() as reader:
        small = writer.write(np.arange(10))
        reader.read(small)
        writer.release(small.token)
        big_tree = [np.arange(300_000, dtype=np.float64), np.arange(5)]
        big = writer.write(big_tree)
        assert big.slab != small.slab and big.slab_size >= 300_000 * 8
        assert not (shm_dir() / small.slab).exists()  # Retired at once: it was free.
        assert_trees_equal(reader.read(big), big_tree)
        writer.release(big.token)
        again = writer.write(np.arange(10))
        assert again.slab == big.slab  # Never shrinks back.
        assert_trees_equal(reader.read(again), np.arange(10))
        writer.release(again.token)
        assert slabs_of(os.getpid()) == {big.slab}


def test_the_smallest_free_slab_that_fits_is_used():
    with SlabWriter(2, initial_size=4096) as writer:
        first = writer.write(np.zeros(100_000, np.uint8))
        second = writer.write(np.zeros(10, np.uint8))
        writer.release(first.token)
        writer.release(second.token)
        assert writer.write(np.zeros(100_000, np.uint8)).slab == first.slab
        assert writer.write(np.zeros(10, np.uint8)).slab == second.slab


def test_write_waits_for_a_release_from_another_thread():
    with SlabWriter(1) as writer:
        first = writer.write(np.arange(10))
        done = []
        thread = threading.Thread(target=lambda: done.append(writer.write(np.arange(3))))
        thread.start()
        thread.join(0.2)
        assert thread.is_alive() and not done  # No slab is free.
        writer.release(first.token)
        thread.join(WAIT)
        assert done and done[0].slab == first.slab


def test_write_calls_wait_for_release_while_every_slab_is_busy():
    calls = []

    def wait_for_release(seconds):
        calls.append(seconds)
        writer.release(first.token)

    with SlabWriter(1, wait_for_release=wait_for_release) as writer:
        first = writer.write(np.arange(10))
        second = writer.write(np.arange(10))
        assert second.slab == first.slab
        assert len(calls) == 1 and 0 < calls[0] <= 1


def test_write_times_out_when_nothing_is_released():
    with SlabWriter(1) as writer:
        writer.write(np.arange(10))
        with pytest.raises(TimeoutError, match=r"no slab was released within 0\.05 s"):
            writer.write(np.arange(10), timeout=0.05)
        with pytest.raises(TimeoutError):
            writer.write(np.arange(10), timeout=0)


def test_write_raises_when_the_consumer_is_gone():
    with SlabWriter(1, consumer_alive=lambda: False) as writer:
        writer.write(np.arange(10))  # A free slab needs no consumer.
        with pytest.raises(BrokenPipeError, match="the consumer is gone"):
            writer.write(np.arange(10))


def test_close_wakes_a_waiting_write_with_an_error():
    writer = SlabWriter(1)
    writer.write(np.arange(10))
    errors = []

    def write():
        try:
            writer.write(np.arange(10))
        except ValueError as error:
            errors.append(error)

    thread = threading.Thread(target=write)
    thread.start()
    thread.join(0.1)
    writer.close()
    thread.join(WAIT)
    assert "closed" in str(errors[0])
    writer.release(0)  # A late notice after close is ignored.


def test_misuse_gives_clear_errors():
    with pytest.raises(ValueError, match="num_slabs must be >= 1"):
        SlabWriter(0)
    with pytest.raises(TypeError, match="initial_size must be an int"):
        SlabWriter(1, initial_size=1.5)
    with SlabWriter(1) as writer:
        token = writer.write(np.arange(10)).token
        writer.release(token)
        with pytest.raises(ValueError, match="release each message once"):
            writer.release(token)
    with pytest.raises(ValueError, match="closed"):
        writer.write(np.arange(3))


def test_unpicklable_objects_raise_and_leave_the_writer_usable():
    with SlabWriter(1) as writer:
        with pytest.raises((TypeError, AttributeError, pickle.PicklingError)):
            writer.write([np.arange(10), lambda: None])
        writer.release(writer.write(np.arange(10)).token)


def test_slabs_are_owner_only():
    with SlabWriter(1) as writer:
        message = writer.write(np.arange(10))
        assert (shm_dir() / message.slab).stat().st_mode & 0o777 == 0o600


def test_a_garbage_collected_writer_unlinks_its_slabs():
    writer = SlabWriter(2)
    name = writer.write(np.arange(10)).slab
    assert (shm_dir() / name).exists()
    del writer
    assert not (shm_dir() / name).exists()


def test_reading_after_the_writer_closed_fails_clearly():
    with SlabWriter(1) as writer:
        message = writer.write(np.arange(10))
    with SlabReader() as reader, pytest.raises(SharedMemoryError, match="is gone"):
        reader.read(message)


def test_a_slab_mapped_before_the_writer_closed_stays_readable():
    with SlabReader() as reader:
        with SlabWriter(1) as writer:
            first = writer.write(np.arange(10))
            reader.read(first)
            writer.release(first.token)
            second = writer.write(np.arange(20))  # The same slab, already mapped.
        assert_trees_equal(reader.read(second), np.arange(20))


def test_the_reader_refuses_names_that_are_not_slabs():
    with SlabWriter(1) as writer:
        message = writer.write(np.arange(10))
        for name in ["../etc/passwd", "passwd", f"{SHM_PREFIX}x/../../y"]:
            with SlabReader() as reader, pytest.raises(SharedMemoryError, match="not the name"):
                reader.read(message._replace(slab=name))


def test_the_consumer_can_unlink_every_slab_it_has_seen():
    writer = SlabWriter(2)
    with SlabReader() as reader:
        messages = [writer.write(np.arange(10)), writer.write(np.arange(20))]
        for message in messages:
            reader.read(message)
        assert reader.unlink_all_seen() == sorted(m.slab for m in messages)
    assert slabs_of(os.getpid()) == set()
    writer.close()  # Finds them gone; that is fine.
