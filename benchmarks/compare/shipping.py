"""Code defined where workers cannot import it vs in a module: first batch and plan size.

`uv run python -m benchmarks.compare.shipping [--repeats 7]` times, in fresh processes
taking turns, the first batch of a pipeline with 2 workers (range of 512 in-memory
32x32x3 images -> shuffle -> map -> batch(32)) whose map is defined in an importable
module (it travels by reference) or in `__main__` without a file, as a notebook cell
is (it travels by value), and prints the medians, their ratio and the size of each
shipped plan.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODULE = """
import numpy as np
import chute


def augment(record):
    image = record["image"].astype(np.float32) / 255
    return {"image": image[::-1], "label": record["label"]}


def records():
    rng = np.random.default_rng(0)
    return [
        {"image": rng.integers(0, 256, (32, 32, 3), dtype=np.uint8), "label": i}
        for i in range(512)
    ]


def make():
    workers = chute.MultiprocessingOptions(num_workers=2)
    return (
        chute.MapDataset.source(records()).seed(0).shuffle().to_iter_dataset()
        .map(augment).mp_prefetch(workers).batch(32)
    )
"""

RUN = """
import json, sys, time
from chute_execution import ChunkPlan, ship
from chute_transforms import MapIter
if sys.argv[1] == "module":
    sys.path.insert(0, sys.argv[2])
    from pipeline_module import augment, make, records
else:
    exec(compile(open(sys.argv[2] + "/pipeline_module.py").read(), "<cell>", "exec"))
ds = make()
start = time.perf_counter()
next(iter(ds))
ms = (time.perf_counter() - start) * 1000
# What the workers receive: the records and the map, cut in chunks (the planner's plan).
plan = ChunkPlan(records(), [(MapIter, (augment,), {})], 64)
print(json.dumps({"ms": ms, "plan_bytes": len(ship(plan))}))
"""


def main() -> None:
    """Runs the comparison and prints its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "pipeline_module.py"), "w") as file:
            file.write(MODULE)
        runs: dict[str, list[dict[str, float]]] = {"module": [], "__main__": []}
        for _ in range(args.repeats):
            for where in runs:
                done = subprocess.run(
                    [sys.executable, "-c", RUN, where, folder],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs[where].append(json.loads(done.stdout))
    medians = {w: statistics.median(r["ms"] for r in rs) for w, rs in runs.items()}
    for where, results in runs.items():
        times = sorted(round(r["ms"], 1) for r in results)
        print(
            f"{where:>8}: first batch median {medians[where]:.1f} ms {times}, "
            f"plan {int(results[0]['plan_bytes']):,} bytes"
        )
    print(f"ratio __main__ / module: {medians['__main__'] / medians['module']:.2f}")


if __name__ == "__main__":
    main()
