"""One JAX process of a multi-host run (a script; `test_multihost.py` starts it).

Loads a shuffled, randomly augmented dataset batched for a sharding, puts the batches
on devices as global arrays, and writes every global batch (gathered to the host) and
a resumed continuation to a JSON file. Run with one process and 8 devices it is the
reference the multi-process runs must equal.
"""

from __future__ import annotations

import argparse
import dataclasses

from chute_testing.device import join_processes, write_result


def mesh_devices(kind: str, devices: list) -> tuple:
    import numpy as np

    if kind == "1d":  # Data parallel over all devices.
        return np.array(devices), ("data",)
    if kind == "2d":  # data x model; each process holds whole data rows.
        return np.array(devices).reshape(2, 4), ("data", "model")
    if kind == "2d-shared":  # The model axis spans processes: they share every replica.
        return np.array(devices).reshape(2, 4).T.copy(), ("data", "model")
    raise ValueError(kind)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mesh", default="1d")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--pipeline", default="global")
    parser.add_argument("--ray", default=None, help="a Ray cluster's address: its workers")
    args = join_processes(parser)
    import jax
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import chute
    from chute_testing.execution import AddNoise

    devices, names = mesh_devices(args.mesh, jax.devices())
    sharding = NamedSharding(Mesh(devices, names), PartitionSpec("data"))
    if args.pipeline != "global":
        uneven(args, sharding)
        return
    ds = (
        chute.MapDataset.range(203)
        .seed(7)
        .shuffle()
        .random_map(AddNoise())
        .batch(16, drop_remainder=True, sharding=sharding)
        .to_iter_dataset()
    )
    if args.ray:  # Every process takes its rows' chunks from the one Ray cluster.
        ds = ds.ray_prefetch(chute.RayOptions(num_workers=2, address=args.ray))
    elif args.workers:
        ds = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=args.workers))
    ds = ds.to_device(sharding)

    def gather(batch: jax.Array) -> list:
        assert batch.shape == (16,), batch.shape
        assert batch.sharding == sharding
        return np.asarray(multihost_utils.process_allgather(batch, tiled=True)).tolist()

    it = iter(ds)
    batches = []
    state = None
    for step, batch in enumerate(it):
        batches.append(gather(batch))
        if step == 4:
            state = it.get_state()
    resumed = iter(ds)
    resumed.set_state(state)
    continuation = [gather(batch) for batch in resumed]
    local_rows = chute.device.host_rows(sharding, 16)
    result = {
        "batches": batches,
        "continuation": continuation,
        "rows": local_rows,
        "state": state,
        "shard": list(
            dataclasses.astuple(chute.device.shard_options_for_mesh(sharding.mesh, "data"))
        ),
    }
    write_result(args, result)


def uneven(args: argparse.Namespace, sharding: object) -> None:
    """Per-process shards that a filter leaves uneven: the processes must stop together."""
    import numpy as np
    from jax.experimental import multihost_utils

    import chute

    ds = (
        chute.MapDataset.range(40)
        .shard(chute.device.ShardByJaxProcess())
        .to_iter_dataset()
        .filter(lambda x: x % 4 != 3)
        .batch(4, drop_remainder=args.pipeline == "uneven-drop")
        .to_device(sharding)
    )
    result: dict = {"batches": []}
    try:
        for batch in ds:
            rows = multihost_utils.process_allgather(batch, tiled=True)
            result["batches"].append(np.asarray(rows).tolist())
    except chute.device.LockstepError as error:
        result["error"] = str(error)
    write_result(args, result)


if __name__ == "__main__":
    main()
