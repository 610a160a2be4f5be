"""One JAX process of a multi-host run of several scenarios (a script; tests start it).

In one run, on the same processes: real data (an ArrayRecord file of images) sharded
Loadax style with `shard(mesh, "data")` and with `ShardByJaxProcess` on three meshes;
uneven shards padded with a mask (a stream batch and a global batch); a local batch
that does not fit the sharding; and a transform that raises on process 1 only, after
which the processes must still be in step for what follows. Every global batch is
gathered to the host, and what each process saw is written to a JSON file.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from chute_testing.device import join_processes, write_result

GLOBAL_BATCH = 16


def normalize(record: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    return {"image": record["image"].astype(np.float32) / 255, "id": np.int32(record["id"])}


def fail_on_process_one(x: int) -> int:
    import jax

    if jax.process_index() == 1 and x == 21:  # Process 1's 11th element: its 3rd batch.
        raise RuntimeError("transform failed on element 21")
    return x


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    args = join_processes(parser)
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    from multihost_run import mesh_devices  # This script's folder is on sys.path.

    def sharding(kind: str) -> NamedSharding:
        devices, names = mesh_devices(kind, jax.devices())
        return NamedSharding(Mesh(devices, names), PartitionSpec("data"))

    paths = json.loads(args.data)
    result: dict[str, Any] = {"real": {}}
    for kind in ("1d", "2d", "2d-shared"):
        for sharder in ("mesh", "process"):
            if kind != "2d-shared" or sharder == "mesh":
                result["real"][f"{kind}/{sharder}"] = real_data(paths, sharding(kind), sharder)
    one_d = sharding("1d")
    if args.num_processes > 1:
        result["padded"] = padded(one_d)
        result["no_fit"] = no_fit(one_d)
        result["failing"] = failing(one_d)
        result["after_failing"] = padded(one_d)  # Still in step after the failure.
    result["global_padded"] = global_padded(one_d)
    write_result(args, result)


def gather(batch: Any) -> Any:
    import numpy as np
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(batch, tiled=True)).tolist()


def real_data(paths: list[str], sharding: Any, sharder: str) -> dict[str, Any]:
    """Rows `[id, sum of the image]` of every global batch; the shard this process read."""
    import numpy as np

    import chute
    from chute_sources import ArrayRecordSource

    ds = chute.MapDataset.source(ArrayRecordSource(paths)).seed(11).shuffle()
    if sharder == "mesh":
        ds = ds.shard(sharding.mesh, "data")  # Loadax's spelling.
        options = chute.device.shard_options_for_mesh(sharding.mesh, "data")
    else:
        options = chute.device.ShardByJaxProcess()
        ds = ds.shard(options)
    local = GLOBAL_BATCH // options.shard_count
    loader = ds.map(normalize).to_iter_dataset().batch(local, drop_remainder=True)
    batches = []
    for batch in loader.to_device(sharding):
        assert batch["image"].shape == (GLOBAL_BATCH, 4, 4, 3), batch["image"].shape
        ids = gather(batch["id"])
        sums = np.asarray(gather(batch["image"])).reshape(GLOBAL_BATCH, -1).sum(axis=1)
        batches.append([[i, float(s)] for i, s in zip(ids, sums, strict=True)])
    return {"shard": [options.shard_index, options.shard_count], "batches": batches}


def padded(sharding: Any) -> list[Any]:
    """Uneven shards (102 and 101 elements) in batches of 8, padded: (values, mask)."""
    import chute

    ds = chute.MapDataset.range(203).shard(chute.device.ShardByJaxProcess()).to_iter_dataset()
    return [[gather(x), gather(mask)] for x, mask in ds.batch(8, pad=True).to_device(sharding)]


def global_padded(sharding: Any) -> list[Any]:
    """203 elements in global batches of 16 built per process, the last one padded."""
    import chute

    ds = chute.MapDataset.range(203).batch(16, pad=True, sharding=sharding).to_iter_dataset()
    return [[gather(x), gather(mask)] for x, mask in ds.to_device(sharding)]


def no_fit(sharding: Any) -> dict[str, Any]:
    """Local batches of 6 rows, where each process holds 4 of 8 row blocks."""
    import chute

    ds = chute.MapDataset.range(40).shard(chute.device.ShardByJaxProcess()).to_iter_dataset()
    it = iter(ds.map(lambda i: {"id": i}).batch(6).to_device(sharding))
    try:
        next(it)
    except ValueError as error:
        return {"error": [type(error).__name__, str(error)]}
    return {"error": None}


def failing(sharding: Any) -> dict[str, Any]:
    """Process 1's transform raises at its third batch: both stop there, at once."""
    import chute

    ds = chute.MapDataset.range(64).shard(chute.device.ShardByJaxProcess()).to_iter_dataset()
    it = iter(ds.map(fail_on_process_one).batch(4).to_device(sharding))
    batches: list[Any] = []
    start = time.monotonic()
    try:
        for batch in it:
            batches.append(gather(batch))
    except Exception as error:
        return {
            "batches": batches,
            "error": [type(error).__name__, str(error), *getattr(error, "__notes__", [])],
            "seconds": time.monotonic() - start,
        }
    finally:
        it.close()
    return {"batches": batches, "error": None}


if __name__ == "__main__":
    main()
