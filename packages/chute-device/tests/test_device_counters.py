"""Batches put on devices add their arrays' bytes to `COUNTERS`, once per batch."""

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from chute_core.internal import COUNTERS, DEVICE_BYTES
from chute_device import DevicePutIter, put_batch
from chute_samplers import SequentialIter

_KEY = (DEVICE_BYTES, ())


def _device_bytes(before) -> float:
    return COUNTERS.since(before).get(_KEY, 0.0)


def _placed_bytes(batches) -> int:
    return sum(leaf.nbytes for leaf in jax.tree.leaves(batches) if isinstance(leaf, jax.Array))


def _batches(count: int) -> list[dict]:
    return [
        {
            "x": np.full((8, 5), i, np.float32),
            "y": np.arange(8, dtype=np.int32),
            "label": 3,
            "name": ["a"] * 8,
        }
        for i in range(count)
    ]


def test_prefetched_batches_count_the_bytes_of_their_device_arrays():
    before = COUNTERS.snapshot()
    out = list(DevicePutIter(SequentialIter(_batches(5)), jax.devices()[0]))
    assert len(out) == 5
    assert _device_bytes(before) == _placed_bytes(out) == 5 * (8 * 5 * 4 + 8 * 4 + 4)


def test_sharded_batches_count_each_array_once():
    sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), PartitionSpec("data"))
    before = COUNTERS.snapshot()
    out = list(DevicePutIter(SequentialIter(_batches(3)), sharding))
    assert all(len(batch["x"].addressable_shards) == len(jax.devices()) for batch in out)
    assert _device_bytes(before) == _placed_bytes(out) == 3 * (8 * 5 * 4 + 8 * 4 + 4)


def test_a_pytree_of_targets_counts_every_subtree():
    device = jax.devices()[1]
    before = COUNTERS.snapshot()
    placed = put_batch(
        {"a": np.zeros((2, 3)), "b": {"c": np.ones(4, np.int8)}},
        {
            "a": device,
            "b": device,
        },
    )
    assert _device_bytes(before) == _placed_bytes(placed)
    assert _placed_bytes(placed) == 2 * 3 * np.dtype(placed["a"].dtype).itemsize + 4
    before = COUNTERS.snapshot()
    put_batch({"names": ["a", "b"]}, device)  # Nothing goes on a device.
    assert _device_bytes(before) == 0
