"""One JAX process of a run that stops unevenly and continues on another count.

A script, started by `test_multihost_uneven.py` as several processes. Two chains run
side by side from the same pipeline: `files` saves and restores with
`chute_checkpoint.save`/`restore`, `orbax` with an Orbax `CheckpointManager`.

- `--restore DIR` continues each chain from DIR (saved by another number of processes);
  `--resharded DIR` also restores a third iterator from DIR, a folder that
  `reshard_directory` wrote for this process count.
- `--stops a,b,c` makes process `i` stop after its own number of batches and save both
  chains into `--save DIR`; without it, every chain runs to the end.

A third chain, `mix`, runs a mixture of two sharded streams (saved and restored with
files). What each chain delivered (the records of its batches) goes to the result.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from chute_testing.device import join_processes, write_result

SIZE = 300


def keep(x: int) -> bool:
    return x % 5 != 0


def pipeline() -> Any:
    import chute

    ds = chute.MapDataset.range(SIZE).seed(7).shuffle()
    ds = ds.shard(chute.device.ShardByJaxProcess()).to_iter_dataset()
    return ds.filter(keep).batch(4)


def mixture() -> Any:
    """Two domains, each sharded by process and shuffled, mixed 2:1, in batches of 4."""
    import chute

    shard = chute.device.ShardByJaxProcess()
    web = chute.MapDataset.range(SIZE).seed(1).shuffle().shard(shard).to_iter_dataset()
    code = chute.MapDataset.range(1000, 1000 + SIZE).seed(2).shuffle().shard(shard)
    return chute.IterDataset.mix([web, code.to_iter_dataset().filter(keep)], [2, 1]).batch(4)


def take(it: Any, count: int | None) -> list[int]:
    """The records of `count` batches of `it` (None: all that are left)."""
    records: list[int] = []
    if count == 0:
        return records
    for number, batch in enumerate(it):
        records += batch.tolist()
        if count is not None and number + 1 == count:
            break
    return records


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--restore")
    parser.add_argument("--resharded")
    parser.add_argument("--stops")
    parser.add_argument("--save")
    args = join_processes(parser)
    import jax
    import orbax.checkpoint as ocp

    import chute_checkpoint

    me = jax.process_index()
    stop = None if args.stops is None else int(args.stops.split(",")[me])
    files, orbax, mix = iter(pipeline()), iter(pipeline()), iter(mixture())
    result: dict[str, Any] = {}
    if args.restore:
        folder = Path(args.restore)
        chute_checkpoint.restore(files, folder / "files")
        chute_checkpoint.restore(mix, folder / "mix")
        with ocp.CheckpointManager(folder / "orbax") as manager:
            step = manager.latest_step()
            orbax = manager.restore(step, args=chute_checkpoint.CheckpointRestore(orbax))
    if args.resharded:
        resharded = chute_checkpoint.restore(iter(pipeline()), Path(args.resharded))
        result["resharded"] = take(resharded, stop)
    result["files"], result["orbax"] = take(files, stop), take(orbax, stop)
    result["mix"] = take(mix, stop)
    if args.save:
        folder = Path(args.save)
        chute_checkpoint.save(files, folder / "files")
        chute_checkpoint.save(mix, folder / "mix")
        with ocp.CheckpointManager(folder / "orbax") as manager:
            manager.save(1, args=chute_checkpoint.CheckpointSave(orbax))
            manager.wait_until_finished()
    write_result(args, result)


if __name__ == "__main__":
    main()
