"""Device prefetch through chute's fluent API and `chute.DataLoader(device=...)`.

From packages/chute-device/tests/test_device_put.py; here because these build their
pipelines with `chute.MapDataset` or `chute.DataLoader`.
"""

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import chute


def mesh_1d() -> Mesh:
    return Mesh(np.array(jax.devices()), ("data",))


def data_sharding() -> NamedSharding:
    return NamedSharding(mesh_1d(), PartitionSpec("data"))


def test_fluent_to_device_puts_python_scalar_leaves_on_the_devices():
    ds = chute.MapDataset.range(16).batch(8).map(lambda b: {"x": b, "step": int(b[0]) // 8})
    batches = list(ds.to_device(data_sharding()))
    assert [type(b["step"]) for b in batches] == [type(batches[0]["x"])] * 2
    assert [b["step"].item() for b in batches] == [0, 1]


def test_fluent_to_device_resumes_through_workers():
    ds = (
        chute.MapDataset.range(64)
        .seed(3)
        .shuffle()
        .batch(8)
        .to_iter_dataset()
        .mp_prefetch(chute.MultiprocessingOptions(num_workers=2))
        .to_device(data_sharding())
    )
    expected = [b.tolist() for b in chute.MapDataset.range(64).seed(3).shuffle().batch(8)]
    it = iter(ds)
    first = [np.asarray(next(it)).tolist() for _ in range(3)]
    state = it.get_state()
    rest = [np.asarray(b).tolist() for b in it]
    assert first + rest == expected
    again = iter(ds)
    again.set_state(state)
    assert [np.asarray(b).tolist() for b in again] == expected[3:]


def test_grain_style_experimental_device_put():
    ds = chute.MapDataset.range(32).to_iter_dataset().batch(8)
    ds = chute.experimental.device_put(
        ds=ds, device=data_sharding(), cpu_buffer_size=3, device_buffer_size=2
    )
    assert [np.asarray(b).tolist() for b in ds] == [list(range(i, i + 8)) for i in range(0, 32, 8)]


def test_batch_with_a_sharding_on_one_process_is_the_plain_batch():
    ds = chute.MapDataset.range(40).seed(1).shuffle()
    assert [b.tolist() for b in ds.batch(8, sharding=data_sharding())] == [
        b.tolist() for b in ds.batch(8)
    ]


def test_mp_prefetch_cannot_follow_to_device():
    with pytest.raises(ValueError, match="mp_prefetch cannot follow to_device"):
        chute.MapDataset.range(8).batch(8).to_device(jax.devices()[0]).mp_prefetch()


def test_data_loader_device_option_resumes_exactly():
    def loader(workers):
        sampler = chute.IndexSampler(
            40, shard_options=chute.NoSharding(), shuffle=True, num_epochs=1, seed=5
        )
        return chute.DataLoader(
            data_source=chute.RangeSource(40),
            sampler=sampler,
            operations=[chute.BatchTransform(batch_size=8)],
            worker_count=workers,
            device=data_sharding(),
        )

    it = iter(loader(0))
    everything = [np.asarray(b).tolist() for b in it]
    assert sorted(x for batch in everything for x in batch) == list(range(40))
    it = iter(loader(2))
    first = np.asarray(next(it))
    assert isinstance(next(iter(loader(0))), jax.Array)
    assert first.tolist() == everything[0]
    state = it.get_state()
    resumed = iter(loader(1))
    resumed.set_state(state)
    assert [np.asarray(b).tolist() for b in resumed] == everything[1:]


def test_loadax_style_shard_by_mesh():
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))
    # One process holds every replica: its share is everything.
    assert list(chute.MapDataset.range(5).shard(mesh, "data")) == [0, 1, 2, 3, 4]
    with pytest.raises(TypeError, match="needs the name of the mesh's data axis"):
        chute.MapDataset.range(5).shard(mesh)


def _fail_at_five(x):
    if x == 5:
        raise RuntimeError("element five")
    return x


def _identity(x):
    return x


def test_an_error_comes_after_every_batch_before_it_and_resume_loses_none():
    def pipeline(fn):
        ds = chute.MapDataset.range(10).to_iter_dataset().map(fn).batch(1)
        return ds.to_device(jax.devices()[0], device_buffer_size=2)

    it = iter(pipeline(_fail_at_five))
    got = [next(it).tolist() for _ in range(5)]
    assert got == [[0], [1], [2], [3], [4]]  # Batch [3] was lost before: state said 4.
    with pytest.raises(RuntimeError) as caught:
        next(it)
    assert str(caught.value) == "element five"
    assert caught.value.__notes__ == [
        "chute: raised by map(_fail_at_five) on the element at position 5"
    ]
    with pytest.raises(RuntimeError) as again:
        next(it)  # Raised again, never skipped.
    assert again.value is caught.value
    resumed = iter(pipeline(_identity))
    resumed.set_state(it.get_state())
    assert [b.tolist() for b in resumed] == [[5], [6], [7], [8], [9]]
