"""Runs 2 workers into a nearly full shared-memory folder: `python shm_full_run.py SEED...`.

Meant to run with `CHUTE_SHM_DIR` set to an empty tmpfs of `TMPFS_MIB` MiB mounted for
it alone (`fault_scenarios.run_shm_full` mounts one in a private mount namespace, so
nothing of it can outlive the run). For each seed it fills the tmpfs with a file until a
seeded number of slabs fits in what is free, then iterates
`range(400).map(FullArray(...)).mp_prefetch(2 workers)` with large arrays, pausing a
seeded time per element so that the workers run ahead and need more slabs than fit. It
prints one JSON line per seed: the elements received, the exception, the seconds from
the last element received to it, the seconds `close()` took to stop the workers, and
what was left in the folder apart from the filler.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import random
import re
import shutil
import sys
import time

TMPFS_MIB = 64
SETTLE = 10.0  # Seconds the workers get to go away after close(); a bound for hangs.


def plan(seed: int) -> dict[str, float | int]:
    """What `seed` chooses: array size, chunk size, the consumer's pace, the space left."""
    rng = random.Random(seed)
    element_mib = rng.choice([1.0, 1.5, 2.0])
    chunk = rng.choice([3, 4])
    slab_mib = max(4.0, element_mib * chunk)  # The transport's first slab is 4 MiB at least.
    # Room for 2 or 3 slabs: each worker finishes up to 2 chunks ahead, so they need 4.
    free_mib = slab_mib * rng.choice([2, 3]) + 1.0
    pause = rng.choice([0.005, 0.01, 0.02])
    return {
        "element_mib": element_mib,
        "chunk": chunk,
        "slab_mib": slab_mib,
        "free_mib": free_mib,
        "pause": pause,
    }


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def run(seed: int, folder: str) -> dict[str, object]:
    import chute
    from chute_testing.execution import FullArray

    chosen = plan(seed)
    filler = os.path.join(folder, "filler")
    with open(filler, "wb") as file:
        file.truncate(int((TMPFS_MIB - chosen["free_mib"]) * 2**20))
        os.posix_fallocate(file.fileno(), 0, os.fstat(file.fileno()).st_size)
    free_before = shutil.disk_usage(folder).free / 2**20
    size = int(chosen["element_mib"] * 2**20) // 8
    ds = (
        chute.MapDataset.range(400)
        .to_iter_dataset()
        .map(FullArray(size))
        .mp_prefetch(chute.MultiprocessingOptions(num_workers=2), chunk_size=int(chosen["chunk"]))
    )
    before = {p.pid for p in multiprocessing.active_children()}
    it = iter(ds)
    got: list[int] = []
    wrong = 0
    error: BaseException | None = None
    last = time.monotonic()
    workers: list[int] = []
    try:
        for array in it:
            if not workers:
                workers = sorted({p.pid for p in multiprocessing.active_children()} - before)
            wrong += int(array.shape != (size,) or array[0] != len(got) or array[-1] != len(got))
            got.append(int(array[0]))
            del array
            time.sleep(float(chosen["pause"]))
            last = time.monotonic()
    except Exception as caught:
        error = caught
    error_s = time.monotonic() - last
    # The workers run on after an error in the data (asking again meets it again).
    workers = workers or sorted({p.pid for p in multiprocessing.active_children()} - before)
    notes = "\n".join(getattr(error, "__notes__", []))
    failed = re.search(r"running chunk \d+ \(base positions (\d+)\.\.", notes)
    raised = {
        "error_type": type(error).__name__ if error is not None else None,
        "cause_type": type(error.__cause__).__name__ if error and error.__cause__ else None,
        "message": str(error) if error is not None else "",
        "failed_chunk_start": int(failed.group(1)) if failed else None,
    }
    start = time.monotonic()
    it.close()
    chute.stop_idle_workers()  # Parked for the next iterator if they stopped cleanly.
    while any(map(alive, workers)) and time.monotonic() - start < SETTLE:
        time.sleep(0.01)
    gone_s = time.monotonic() - start
    left = sorted(name for name in os.listdir(folder) if name != "filler")
    free_after_close = shutil.disk_usage(folder).free / 2**20
    del it, error  # The error's traceback holds the iterator's frames: a cycle.
    gc.collect()
    free_after_gc = shutil.disk_usage(folder).free / 2**20
    os.unlink(filler)
    return {
        "seed": seed,
        **chosen,
        "free_before_mib": free_before,
        "workers": workers,
        "got": len(got),
        "in_order": got == list(range(len(got))),
        "wrong": wrong,
        **raised,
        "error_s": error_s,
        "workers_alive": [pid for pid in workers if alive(pid)],
        "workers_gone_s": gone_s,
        "leftovers": left,
        "free_after_close_mib": free_after_close,
        "free_after_gc_mib": free_after_gc,
    }


def main() -> None:
    folder = os.environ["CHUTE_SHM_DIR"]
    for seed in map(int, sys.argv[1:]):
        print(json.dumps(run(seed, folder)), flush=True)


if __name__ == "__main__":
    main()
