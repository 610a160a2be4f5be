"""Device prefetch: where batches land, what they hold, and what a checkpoint counts."""

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from chute_core import InvalidStateError
from chute_device import DevicePutIter, device_put, host_rows, put_batch, row_split
from chute_samplers import IterNode, SequentialIter
from chute_testing import assert_resumes


class ToHost(IterNode):
    """Reads device batches back as NumPy, for the shared resume helper's comparisons."""

    def __init__(self, parent):
        self.parent = parent

    def __next__(self):
        batch = next(self.parent)
        assert isinstance(batch, jax.Array)
        return np.asarray(batch)

    def get_state(self):
        return self.parent.get_state()

    def set_state(self, state):
        self.parent.set_state(state)


def mesh_1d() -> Mesh:
    return Mesh(np.array(jax.devices()), ("data",))


def data_sharding() -> NamedSharding:
    return NamedSharding(mesh_1d(), PartitionSpec("data"))


def host_batches(count: int = 6, rows: int = 16) -> list[dict]:
    return [
        {
            "x": np.arange(rows * 3, dtype=np.float32).reshape(rows, 3) + 100 * i,
            "y": np.arange(rows) + i,
        }
        for i in range(count)
    ]


def test_eight_devices_are_simulated():
    assert len(jax.devices()) == 8


def test_batches_land_with_the_requested_sharding_and_values():
    sharding = data_sharding()
    batches = host_batches()
    got = list(DevicePutIter(SequentialIter(batches), sharding))
    assert len(got) == len(batches)
    for device_batch, host_batch in zip(got, batches, strict=True):
        for key in ("x", "y"):
            array = device_batch[key]
            assert isinstance(array, jax.Array)
            assert array.sharding.is_equivalent_to(sharding, array.ndim)
            assert len(array.addressable_shards) == 8
            np.testing.assert_array_equal(np.asarray(array), host_batch[key])
            # Each device holds its two rows.
            for shard in array.addressable_shards:
                np.testing.assert_array_equal(np.asarray(shard.data), host_batch[key][shard.index])


def test_a_single_device_and_a_pytree_of_shardings():
    device = jax.devices()[3]
    (batch,) = DevicePutIter(SequentialIter(host_batches(1)), device)
    assert batch["x"].devices() == {device}
    mesh = mesh_1d()
    tree = {
        "x": NamedSharding(mesh, PartitionSpec("data", None)),
        "y": NamedSharding(mesh, PartitionSpec()),  # Replicated on all eight.
    }
    (batch,) = DevicePutIter(SequentialIter(host_batches(1)), tree)
    assert batch["x"].sharding.spec == PartitionSpec("data", None)
    assert batch["y"].sharding.is_fully_replicated
    np.testing.assert_array_equal(np.asarray(batch["y"]), host_batches(1)[0]["y"])


def test_strings_stay_on_the_host():
    batch = {"x": np.ones((8, 2)), "name": [f"n{i}" for i in range(8)]}
    out = put_batch(batch, data_sharding())
    assert out["name"] == batch["name"]
    assert isinstance(out["x"], jax.Array)


@pytest.mark.parametrize("target", ["device", "sharding"])
def test_a_batch_is_placed_with_one_device_put_whatever_its_leaves(target, monkeypatch):
    """One call for all array leaves: per batch, what a plain `jax.device_put` costs
    (a call per leaf cost ~16 us a batch on an H200 machine, 12% of its transfer)."""
    calls = []
    real = jax.device_put

    def counted(x, *args, **kwargs):
        calls.append(x)
        return real(x, *args, **kwargs)

    monkeypatch.setattr(jax, "device_put", counted)
    where = jax.devices()[2] if target == "device" else data_sharding()
    batch = {"x": np.ones((8, 2)), "y": np.arange(8), "n": 3, "name": ["a"] * 8, "z": None}
    out = put_batch(batch, where)
    assert len(calls) == 1
    assert {k: type(v).__name__ for k, v in out.items()} == {
        "x": "ArrayImpl", "y": "ArrayImpl", "n": "ArrayImpl", "name": "list", "z": "NoneType"
    }  # fmt: skip
    assert out["name"] == ["a"] * 8 and out["z"] is None
    np.testing.assert_array_equal(np.asarray(out["y"]), np.arange(8))
    assert out["n"].sharding.is_fully_replicated and out["n"].item() == 3


@pytest.mark.parametrize("scalar", [3, 2.5, True, 1 + 2j, np.int64(7), np.float32(0.5)])
def test_every_numeric_leaf_goes_to_the_devices_python_scalars_too(scalar):
    sharding = data_sharding()
    (batch,) = DevicePutIter(SequentialIter([{"x": np.ones((8, 2)), "y": scalar}]), sharding)
    assert isinstance(batch["x"], jax.Array)
    assert isinstance(batch["y"], jax.Array)
    assert batch["y"].shape == ()
    assert batch["y"].sharding.is_fully_replicated
    assert batch["y"].devices() == set(jax.devices())
    assert batch["y"].item() == scalar
    (on_one,) = DevicePutIter(SequentialIter([{"y": scalar}]), jax.devices()[5])
    assert isinstance(on_one["y"], jax.Array)
    assert on_one["y"].devices() == {jax.devices()[5]}


def test_state_counts_only_batches_handed_out():
    batches = host_batches(10)
    it = DevicePutIter(SequentialIter(batches), data_sharding(), device_buffer_size=3)
    for _ in range(4):
        next(it)
    # Three more are dispatched (and more prepared on the host thread) by now.
    assert it.get_state() == {"position": 4}
    restored = DevicePutIter(SequentialIter(batches), data_sharding())
    restored.set_state(it.get_state())
    np.testing.assert_array_equal(np.asarray(next(restored)["y"]), batches[4]["y"])
    # And the original, moved back, forgets what it had in flight.
    it.set_state({"position": 1})
    assert [int(b["y"][0]) for b in it] == list(range(1, 10))


@pytest.mark.parametrize("buffers", [(0, 1), (2, 2), (4, 3)])
def test_resume_anywhere(buffers):
    cpu, dev = buffers
    batches = [np.arange(8, dtype=np.int32) + 8 * i for i in range(7)]

    def make():
        return ToHost(
            DevicePutIter(
                SequentialIter(batches),
                data_sharding(),
                cpu_buffer_size=cpu,
                device_buffer_size=dev,
            )
        )

    assert_resumes(make, max_elements=7, epoch_length=7, every=1, expected=batches)


def test_device_put_on_a_plain_list_and_a_dataset():
    lists = device_put([np.ones(8), np.zeros(8)], data_sharding())
    assert [float(b.sum()) for b in lists] == [8.0, 0.0]
    assert [float(b.sum()) for b in lists] == [8.0, 0.0]  # Re-iterable.


def test_rows_of_a_single_process():
    assert host_rows(data_sharding(), 32) == (0, 32)
    split = row_split(data_sharding())
    assert (split.blocks, split.first, split.count, split.groups) == (8, 0, 8, 1)
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    assert row_split(NamedSharding(mesh, PartitionSpec("data"))).blocks == 2


def test_errors_name_what_is_wrong():
    with pytest.raises(TypeError, match=r"target must be a jax\.Device"):
        DevicePutIter(SequentialIter([]), "cpu:0")
    with pytest.raises(ValueError, match=r"^device_put: device_buffer_size must be >= 1, got 0"):
        DevicePutIter(SequentialIter([]), jax.devices()[0], device_buffer_size=0)
    with pytest.raises(ValueError, match=r"^device_put: cpu_buffer_size must be >= 0, got -1"):
        DevicePutIter(SequentialIter([]), jax.devices()[0], cpu_buffer_size=-1)
    with pytest.raises(TypeError, match="without get_state/set_state"):
        device_put(iter([1, 2]), jax.devices()[0])
    with pytest.raises(ValueError, match="cannot be split evenly over the sharding's 8 row"):
        host_rows(data_sharding(), 12)
    with pytest.raises(InvalidStateError, match="expected a state dict"):
        DevicePutIter(SequentialIter([]), jax.devices()[0]).set_state([1])  # type: ignore[arg-type]
    # A batch that does not divide over the devices: jax's own error, raised at next().
    it = DevicePutIter(SequentialIter([np.ones(6)]), data_sharding())
    with pytest.raises(ValueError, match="6"):
        next(it)
