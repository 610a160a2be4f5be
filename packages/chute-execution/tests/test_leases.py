"""The lease book and the slab transport under leased results, without workers.

A result whose large arrays are leased stays valid while held, a writer grows spare
slabs while slabs are leased and retires them after, and arrays built in an arena
arrive without a copy. (What the user sees through `mp_prefetch` is tested with the
meta-package, in `tests/execution/test_mp_leases.py`.)
"""

from __future__ import annotations

import numpy as np
import pytest

from chute_execution._leases import LEASE_MIN_BYTES, LeaseBook
from chute_execution._transport import SlabReader, SlabWriter
from chute_testing.execution import no_leaked_slabs

ROW = LEASE_MIN_BYTES // 8  # int64 values per element: one element is leased on its own.


no_leaked_slabs = pytest.fixture(autouse=True)(no_leaked_slabs)


def test_a_lease_book_copies_when_over_budget_and_counts_ends():
    with SlabWriter(num_slabs=1) as writer, SlabReader() as reader:
        message = writer.write([np.zeros(ROW)])
        book = LeaseBook(budget=message.slab_size - 1)
        assert not book.worth_leasing(message)
        book.budget = message.slab_size
        assert book.worth_leasing(message)
        writer.lease(message.token)
        arrays = reader.read_leased(message, book.take(1, 0, message.token, message.slab_size))
        assert book.held == message.slab_size and not book.drain()
        del arrays
        assert book.drain() == [(1, 0, message.token)] and book.held == 0
        writer.release(message.token)


def test_the_writer_grows_while_slabs_are_leased_and_retires_spares_after():
    with SlabWriter(num_slabs=1) as writer, SlabReader() as reader:
        held = []
        for i in range(5):
            message = writer.write([np.full(ROW, i)])  # Never waits: leased slabs are spare.
            writer.lease(message.token)
            held.append((message.token, reader.read_leased(message, lambda: None)))
        assert writer.num_leased == 5
        for i, (_, arrays) in enumerate(held):
            assert (arrays[0] == i).all()
        for token, _ in held:
            writer.release(token)
        assert writer.num_leased == 0
        assert writer.nbytes <= 2 * held[0][1][0].nbytes + 2**22  # Spares were retired.
        del held


def test_small_results_are_copied_and_release_at_once():
    released = []
    with SlabWriter(num_slabs=1) as writer, SlabReader() as reader:
        message = writer.write([np.arange(10)])
        result = reader.read_leased(message, lambda: released.append(True))
        writer.release(message.token)
    assert released == [True]
    assert result[0].tolist() == list(range(10))


def test_a_batch_stacked_in_an_arena_arrives_without_a_copy_in_the_writer():
    with SlabWriter(num_slabs=1) as writer, SlabReader() as reader:
        first = writer.write([np.zeros(ROW)])  # Sizes the arena.
        writer.release(first.token)
        arena = writer.arena()
        assert arena is not None
        batch = arena.empty((2, ROW // 2), np.dtype(np.int64))
        assert batch is not None
        batch[:] = [[1], [2]]
        message = writer.write({"batch": batch, "id": 7}, arena=arena)
        assert message.spans[0][0] == arena.floor  # Where the arena put it: not copied.
        result = reader.read(message)
        writer.release(message.token)
    assert result["id"] == 7 and result["batch"][:, 0].tolist() == [1, 2]
    assert (result["batch"][1] == 2).all()


def test_an_arena_left_unused_gives_its_slab_back():
    with SlabWriter(num_slabs=1) as writer, SlabReader() as reader:
        first = writer.write([np.zeros(ROW)])
        writer.release(first.token)
        for obj in ({"no": "arrays"}, [np.arange(3)], None):
            arena = writer.arena()
            message = writer.write(obj, arena=arena)  # Nothing built in the arena.
            assert repr(reader.read(message)) == repr(obj)
            writer.release(message.token)
        arena = writer.arena(timeout=5)  # The one slab is free again: no wait.
        assert arena is not None
        arena.abandon()


def test_arrays_that_do_not_fit_the_arena_are_copied_and_arrive_intact():
    with SlabWriter(num_slabs=1) as writer, SlabReader() as reader:
        first = writer.write([np.zeros(ROW // 4)])
        writer.release(first.token)
        arena = writer.arena()
        assert arena is not None
        inside = arena.empty((ROW // 4,), np.dtype(np.int64))
        assert inside is not None and arena.empty((4 * ROW,), np.dtype(np.int64)) is None
        inside[:] = 5
        big = np.full(4 * ROW, 6)  # Fits neither the arena nor below it: all copied.
        message = writer.write([inside, big], arena=arena)
        out = reader.read(message)
        writer.release(message.token)
    assert (out[0] == 5).all() and (out[1] == 6).all()
