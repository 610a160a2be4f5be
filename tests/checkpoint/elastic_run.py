"""One JAX process of an elastic checkpoint run (a script; `test_multihost_elastic.py`).

`--save DIR` runs two pipelines to the end, saving each after `SAVE_AT` global batches
into DIR, with `chute_checkpoint.save` and with an Orbax `CheckpointManager`.
`--restore DIR` restores both pipelines from DIR (saved by another number of
processes), each way, and runs them to the end. Every global batch is gathered to the
host; what this process saw is written to a JSON file.

The pipelines: `global` is batched with `batch(16, sharding=...)` (each process builds
its rows of global batch `b`; the state is `b`); `stride` shards with
`ShardByJaxProcess` and batches 8 elements per process.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from chute_testing.device import join_processes, write_result

SAVE_AT = 3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--save")
    parser.add_argument("--restore")
    args = join_processes(parser)
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), PartitionSpec("data"))
    result: dict[str, Any] = {"save": {}, "restore": {}}
    for name, ds in pipelines(sharding).items():
        if args.save:
            result["save"][name] = save(ds, Path(args.save) / name)
        if args.restore:
            result["restore"][name] = restore(ds, Path(args.restore) / name)
    write_result(args, result)


def pipelines(sharding: Any) -> dict[str, Any]:
    import chute
    from chute_testing.execution import AddNoise

    source = chute.MapDataset.range(203).seed(7).shuffle()
    return {
        "global": source.random_map(AddNoise())
        .batch(16, drop_remainder=True, sharding=sharding)
        .to_iter_dataset()
        .to_device(sharding),
        "stride": source.shard(chute.device.ShardByJaxProcess(drop_remainder=True))
        .to_iter_dataset()
        .batch(8, drop_remainder=True)
        .to_device(sharding),
    }


def gather(batch: Any) -> list[Any]:
    import numpy as np
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(batch, tiled=True)).tolist()


def save(ds: Any, folder: Path) -> list[Any]:
    """The whole run; saved after `SAVE_AT` batches (both ways), then on to the end."""
    import orbax.checkpoint as ocp

    import chute_checkpoint

    batches = []
    with ocp.CheckpointManager(folder / "orbax") as manager:
        it = iter(ds)
        for batch in it:
            batches.append(gather(batch))
            if len(batches) == SAVE_AT:
                chute_checkpoint.save(it, folder / "files")
                manager.save(SAVE_AT, args=chute_checkpoint.CheckpointSave(it))
        manager.wait_until_finished()
    return batches


def restore(ds: Any, folder: Path) -> dict[str, list[Any]]:
    """The rest of the run, restored from files and from Orbax."""
    import orbax.checkpoint as ocp

    import chute_checkpoint

    from_files = chute_checkpoint.restore(iter(ds), folder / "files")
    with ocp.CheckpointManager(folder / "orbax") as manager:
        step = manager.latest_step()
        from_orbax = manager.restore(step, args=chute_checkpoint.CheckpointRestore(iter(ds)))
    return {
        "files": [gather(batch) for batch in from_files],
        "orbax": [gather(batch) for batch in from_orbax],
        "step": step,
    }


if __name__ == "__main__":
    main()
