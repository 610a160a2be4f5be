"""A model of `ray_prefetch` throughput vs CPU nodes, from costs measured on this machine.

`uv run python -m benchmarks.compare.ray_scaling [--images 4096] [--cores-per-node 8]`
builds the image pipeline of the asv benchmarks (ArrayRecord 64x64 images: shuffle ->
decode -> crop/flip -> normalise, chunks of 128 images, batch(128)) and measures:

- `work`: CPU seconds one core spends on one chunk (the plan run in this process);
- `driver`: CPU seconds the consumer spends per chunk when a local Ray cluster does the
  work (submitting, waiting, reading the results in place, slicing batches): this
  process's CPU time over the chunks, with 2 Ray workers;
- `wall`: the measured wall time per chunk with 2 Ray workers, beside the model's.

The model: Ray's own cost per chunk (`overhead`: scheduling, the task's start, putting
its result) is what the 2 cores spent beyond the work and the driver's part, `2 * wall -
work - driver`, counted on the workers' side. With `n` nodes of `c` cores, chunks then
complete at most `n * c / (work + overhead)` per second, and the consumer takes at most
`1 / driver` of them per second (it is one process): throughput is the smaller. It leaves
out the network (a 128-image chunk of float32 56x56x3 is 4.8 MB: a 10 Gb/s link carries
~260 chunks/s) and assumes the training step keeps up.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

import chute

from ..bench_execution_workers import image_pipeline, write_images
from ..bench_ray import start_ray

CHUNK = 128


def _cpu_and_wall(run) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    """Measures the costs and prints the model's predictions."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4096)
    parser.add_argument("--cores-per-node", type=int, default=8)
    args = parser.parse_args()
    import ray

    folder = tempfile.mkdtemp(prefix="chute-ray-scaling-")
    try:
        pipeline = image_pipeline(write_images(folder, args.images))
        chunks = args.images // CHUNK
        local = pipeline.mp_prefetch(chute.MultiprocessingOptions(0), chunk_size=CHUNK)
        list(local.batch(CHUNK))  # Warm: the files are in the page cache.
        work, _ = _cpu_and_wall(lambda: list(local.batch(CHUNK)))
        work /= chunks
        start_ray()
        on_ray = pipeline.ray_prefetch(chute.RayOptions(num_workers=2), chunk_size=CHUNK)
        list(on_ray.batch(CHUNK))  # Warm: the Ray workers have loaded chute and the plan.
        driver, wall = _cpu_and_wall(lambda: list(on_ray.batch(CHUNK)))
        driver, wall = driver / chunks, wall / chunks
        ray.shutdown()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # On this machine the driver, the Ray workers and Ray's own processes share 2 cores:
    # all the CPU a chunk costs is at most 2 cores x its wall time. What is not the work
    # or the driver's part is Ray's per-task cost, counted on the workers' side.
    overhead = max(0.0, 2 * wall - work - driver)
    per_core = 1 / (work + overhead)
    print(f"chunks of {CHUNK} images, {chunks} chunks")
    print(f"work     per chunk, one core:        {work * 1000:7.1f} ms")
    print(f"driver   per chunk, the consumer:    {driver * 1000:7.1f} ms")
    print(f"wall     per chunk, 2 Ray workers:   {wall * 1000:7.1f} ms")
    print(f"overhead per chunk, Ray (2 x wall - work - driver): {overhead * 1000:.1f} ms")
    ceiling = 1 / driver
    cores = args.cores_per_node
    for nodes in (1, 8, 64):
        rate = min(nodes * cores * per_core, ceiling)
        bound = "the cores" if nodes * cores * per_core < ceiling else "the consumer"
        print(
            f"{nodes:>3} nodes x {cores} cores: {rate:6.0f} chunks/s = "
            f"{rate * CHUNK:7.0f} images/s (bound by {bound})"
        )


if __name__ == "__main__":
    main()
