"""The bytes that carry messages through shared memory are counted once each, as read."""

import numpy as np

from chute_core.internal import COUNTERS, SHM_BYTES
from chute_execution import ChunkPlan, MultiprocessingOptions, MultiprocessPrefetchIter
from chute_execution._transport import SlabReader, SlabWriter

_KEY = (SHM_BYTES, ())


def _shm(before) -> float:
    return COUNTERS.since(before).get(_KEY, 0.0)


def test_a_message_read_counts_its_arrays_bytes_once():
    with SlabWriter(num_slabs=2) as writer, SlabReader() as reader:
        before = COUNTERS.snapshot()
        message = writer.write({"x": np.zeros(1000), "y": np.arange(3), "label": 7})
        assert _shm(before) == 0  # Counted by the reader, as the message arrives.
        reader.read(message)
        writer.release(message.token)
        assert _shm(before) == 8000 + 24
        plain = writer.write({"label": 7, "names": ["a", "b"]})  # Nothing in shared memory.
        reader.read(plain)
        assert _shm(before) == 8024


def test_a_leased_message_counts_its_bytes_once():
    released = []
    with SlabWriter(num_slabs=1) as writer, SlabReader() as reader:
        before = COUNTERS.snapshot()
        message = writer.write({"x": np.arange(5000.0), "y": np.arange(3)})
        writer.lease(message.token)
        batch = reader.read_leased(message, lambda: released.append(1))
        assert _shm(before) == 5000 * 8 + 3 * 8
        del batch
        small = writer.write([np.arange(4)])  # No large array: `read_leased` reads it.
        reader.read_leased(small, lambda: released.append(2))
        assert _shm(before) == 40000 + 24 + 32
    assert released == [1, 2]


def test_a_worker_pipeline_counts_the_bytes_of_every_result_in_the_consumer():
    data = np.arange(12 * 2**12, dtype=np.float64).reshape(12, 2**12)  # 32 KiB a row.
    plan = ChunkPlan(data, [], chunk_size=4)
    before = COUNTERS.snapshot()
    outputs = list(MultiprocessPrefetchIter(plan, MultiprocessingOptions(num_workers=2)))
    np.testing.assert_array_equal(np.stack(outputs), data)
    assert _shm(before) == data.nbytes == sum(row.nbytes for row in outputs)
