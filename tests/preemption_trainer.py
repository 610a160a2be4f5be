"""A training loop that checkpoints its data iterator every k steps (see test_preemption.py).

Run as `python preemption_trainer.py FOLDER VARIANT SAVE_EVERY RUN`. It resumes from the
last checkpoint in FOLDER if there is one, appends `step <batch as JSON>` to
FOLDER/records.log for every batch, saves every SAVE_EVERY steps, and prints
"done" at the end of the epoch. The test kills it with SIGKILL at random moments.
Variants: "plain" (chute_checkpoint.save), "workers" (mp_prefetch with 2 or 3 workers,
alternating between runs) and "orbax" (an asynchronous CheckpointManager).
"""

from __future__ import annotations

import json
import multiprocessing
import operator
import sys
import time
from pathlib import Path
from typing import Any

import chute
import chute_checkpoint

SIZE = 400
BATCH = 4
STEP_SECONDS = 0.01  # The "training" of one batch.


def dataset(variant: str, run: int = 0) -> Any:
    """The pipeline; its output never depends on the variant or the run."""
    ds = chute.MapDataset.range(SIZE).seed(11).shuffle().to_iter_dataset().map(operator.neg)
    ds = ds.filter(operator.truth)
    if variant == "workers":
        workers = 2 + run % 2
        ds = ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=workers), chunk_size=8)
    return ds.batch(BATCH)


def main(folder: Path, variant: str, save_every: int, run: int) -> None:
    iterator = iter(dataset(variant, run))
    step = 0
    manager = None
    if variant == "orbax":
        import orbax.checkpoint as ocp

        options = ocp.CheckpointManagerOptions(max_to_keep=2)
        manager = ocp.CheckpointManager(folder / "orbax", options=options)
        latest = manager.latest_step()
        if latest is not None:
            manager.restore(latest, args=chute_checkpoint.CheckpointRestore(iterator))
            step = latest
    elif (folder / "latest").exists():
        step = int((folder / "latest").read_text())
        chute_checkpoint.restore(iterator, folder / "ckpt" / str(step))
    announced = False
    with open(folder / "records.log", "a") as log:
        for batch in iterator:
            step += 1
            log.write(f"{step} {json.dumps(batch.tolist())}\n")
            log.flush()
            if not announced:
                workers = [p.pid for p in multiprocessing.active_children()]
                print(json.dumps({"resumed_from": step - 1, "workers": workers}), flush=True)
                announced = True
            time.sleep(STEP_SECONDS)
            if step % save_every == 0:
                if manager is not None:
                    manager.save(step, args=chute_checkpoint.CheckpointSave(iterator))
                else:
                    chute_checkpoint.save(iterator, folder / "ckpt" / str(step))
                    chute_checkpoint.write_atomic(folder / "latest", str(step))
    if manager is not None:
        manager.wait_until_finished()
        manager.close()
    print("done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
