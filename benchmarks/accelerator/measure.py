"""chute on a machine with an accelerator: host-to-device, worker scaling, input wait.

`python -m benchmarks.accelerator.measure --out DIR [--dry-run]` (what `run.sh` calls)
writes `accelerator.json` and `accelerator.md` under DIR and prints the table. Every
figure is a ratio to a baseline measured in the same run:

1. host-to-device: image-pipeline batches (128 x 56 x 56 x 3 float32) put on the device
   by a plain `jax.device_put` loop and by chute's `to_device` prefetch (target >= 0.9x
   of the loop), beside what the device itself moves from pinned host memory (CuPy's
   `memcpyAsync`, where CuPy and a CUDA device are there).
2. worker scaling: the image pipeline (ArrayRecord -> shuffle -> decode -> random
   crop/flip -> normalise -> batch) with 0, 2, 4, 8 and 14 worker processes, in images/s
   after the first batch, and its efficiency against a plain loop on one core times the
   number of workers.
3. input wait: a jitted training step of a small convolutional model in bfloat16, fed
   by that pipeline with 8 workers and `to_device` prefetch, against the same steps on
   batches already on the device. The model's depth is chosen so that one step takes
   longer than the pipeline needs for a batch (a loader can only hide itself behind a
   step that is longer than its own time per batch); the share of time lost to input
   (target < 2%) is 1 - resident time / fed time.

`--dry-run` runs the same code on the CPU backend with small sizes and 2 workers, so
that CI keeps it working. Data is generated where it runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
from functools import partial
from typing import Any

import numpy as np

__all__ = ["DRY", "FULL", "Sizes", "main"]

CROP = 56
CLASSES = 10


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How big each measurement is.

    Attributes:
        images: records written to the ArrayRecord files.
        plain_images: images in the timed plain loop (the one-core baseline).
        batch: images per batch.
        worker_counts: the worker counts of the scaling measurement.
        seconds: how long each worker count runs after its first batch.
        transfer_batches: batches in each host-to-device pass.
        transfer_repeats: host-to-device passes of each kind (alternating, medians).
        feed_workers: workers feeding the training steps (one of `worker_counts`).
        steps: training steps timed, resident and fed.
        width: the model's channels.
        depths: the model depths tried, smallest first, until a step outlasts a batch.
    """

    images: int
    plain_images: int
    batch: int
    worker_counts: tuple[int, ...]
    seconds: float
    transfer_batches: int
    transfer_repeats: int
    feed_workers: int
    steps: int
    width: int
    depths: tuple[int, ...]


FULL = Sizes(
    images=32768,
    plain_images=8192,
    batch=128,
    worker_counts=(0, 2, 4, 8, 14),
    seconds=4.0,
    transfer_batches=128,
    transfer_repeats=7,
    feed_workers=8,
    steps=200,
    width=256,
    depths=(1, 2, 4, 8, 16, 32, 64),
)
DRY = Sizes(
    images=1024,
    plain_images=512,
    batch=32,
    worker_counts=(0, 2),
    seconds=1.0,
    transfer_batches=8,
    transfer_repeats=3,
    feed_workers=2,
    steps=10,
    width=8,
    depths=(1, 2),
)


# --- 1. host to device -------------------------------------------------------------------


def _pinned_copy_gbps(batch_bytes: int, count: int) -> tuple[float | None, str]:
    """GB/s of `count` back-to-back copies of `batch_bytes` from pinned host memory.

    Timed with CUDA events around CuPy's `memcpyAsync` (the device's own figure, no
    framework in the way); None with the reason where CuPy or a CUDA device is missing.
    """
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed"
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return None, "no CUDA device"
    except cupy.cuda.runtime.CUDARuntimeError as error:
        return None, f"no CUDA device ({error})"
    host = cupy.cuda.alloc_pinned_memory(batch_bytes)
    device = cupy.cuda.alloc(batch_bytes)
    stream = cupy.cuda.Stream(non_blocking=True)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    kind = cupy.cuda.runtime.memcpyHostToDevice
    seconds = []
    for _ in range(4):
        start.record(stream)
        for _ in range(count):
            cupy.cuda.runtime.memcpyAsync(device.ptr, host.ptr, batch_bytes, kind, stream.ptr)
        end.record(stream)
        end.synchronize()
        seconds.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    return batch_bytes * count / statistics.median(seconds[1:]) / 1e9, "CuPy memcpyAsync"


def host_to_device(sizes: Sizes, device: Any) -> dict[str, Any]:
    """A plain `jax.device_put` loop against chute's `to_device`, on the same batches.

    Each pass is timed whole, from `iter()` (chute's thread start included) to the last
    batch on the device; passes alternate, medians. `to_device` runs with its defaults
    and, as variants, with other host buffer sizes (`cpu_buffer_size`).
    """
    import jax

    import chute

    rng = np.random.default_rng(0)
    shape = (sizes.batch, CROP, CROP, 3)
    batches = [rng.standard_normal(shape, dtype=np.float32) for _ in range(sizes.transfer_batches)]
    total = sum(b.nbytes for b in batches)
    dataset = chute.MapDataset.source(batches).to_iter_dataset()

    def plain() -> None:
        jax.block_until_ready([jax.device_put(b, device) for b in batches])

    def ours(**options: int) -> Any:
        return lambda: jax.block_until_ready(list(dataset.to_device(device, **options)))

    runs = {"plain": plain, "to_device": ours()}
    runs.update({f"cpu_buffer_size={n}": ours(cpu_buffer_size=n) for n in (0, 4, 8, 16)})
    timings: dict[str, list[float]] = {name: [] for name in runs}
    for run in runs.values():
        run()  # Warm: the first transfers, the first thread.
    for repeat in range(sizes.transfer_repeats):
        for name, run in runs.items() if repeat % 2 == 0 else reversed(runs.items()):
            start = time.perf_counter()
            run()
            timings[name].append(time.perf_counter() - start)
    gbps = {name: total / statistics.median(t) / 1e9 for name, t in timings.items()}
    ratio = statistics.median(
        p / o for p, o in zip(timings["plain"], timings["to_device"], strict=True)
    )
    pinned, pinned_how = _pinned_copy_gbps(batches[0].nbytes, len(batches))
    return {
        "batch_shape": list(shape),
        "batches": len(batches),
        "plain_gbps": gbps.pop("plain"),
        "chute_gbps": gbps.pop("to_device"),
        "ratio": ratio,
        "target": ">= 0.9",
        "met": ratio >= 0.9,
        "variants_gbps": gbps,
        "pinned_gbps": pinned,
        "pinned_how": pinned_how,
    }


# --- 2. worker scaling ---------------------------------------------------------------------


def worker_scaling(sizes: Sizes, paths: list[str]) -> dict[str, Any]:
    """Images/s of the image pipeline per worker count, against a one-core plain loop."""
    from ._work import (
        parallel_plain_images_per_second,
        pipeline_images_per_second,
        plain_images_per_second,
    )

    plain = plain_images_per_second(paths, sizes.batch, sizes.plain_images)
    rows = []
    for workers in sizes.worker_counts:
        first, rate, consumer_cpu = pipeline_images_per_second(
            paths, sizes.batch, workers, sizes.seconds
        )
        side_by_side = (
            parallel_plain_images_per_second(paths, sizes.batch, workers, sizes.seconds)
            if workers > 1
            else plain
        )
        rows.append(
            {
                "workers": workers,
                "first_batch_s": first,
                "images_per_second": rate,
                "ratio_to_plain": rate / plain,
                "efficiency": rate / (plain * max(workers, 1)),
                "plain_loops_side_by_side": side_by_side,
                "ratio_to_side_by_side": rate / side_by_side,
                "consumer_cpu": consumer_cpu,
            }
        )
    return {"plain_images_per_second": plain, "rows": rows}


# --- 3. input wait -------------------------------------------------------------------------


def _conv(x: Any, w: Any, stride: int = 1) -> Any:
    import jax

    return jax.lax.conv_general_dilated(
        x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def _init(width: int, depth: int) -> dict[str, Any]:
    """A stem convolution (stride 2), `depth` residual 3x3 blocks, a linear head; bf16."""
    import jax
    import jax.numpy as jnp

    stem, blocks, head = jax.random.split(jax.random.key(0), 3)
    scale = (2.0 / (9 * width)) ** 0.5
    return {
        "stem": (jax.random.normal(stem, (3, 3, 3, width)) * 0.2).astype(jnp.bfloat16),
        "blocks": (jax.random.normal(blocks, (depth, 3, 3, width, width)) * scale).astype(
            jnp.bfloat16
        ),
        "head": (jax.random.normal(head, (width, CLASSES)) * 0.05).astype(jnp.bfloat16),
    }


def _loss(params: dict[str, Any], batch: dict[str, Any]) -> Any:
    import jax
    import jax.numpy as jnp

    x = jax.nn.relu(_conv(batch["image"].astype(jnp.bfloat16), params["stem"], stride=2))

    def block(x: Any, w: Any) -> tuple[Any, None]:
        return x + jax.nn.relu(_conv(x, w)), None

    x, _ = jax.lax.scan(block, x, params["blocks"])
    logits = (x.mean(axis=(1, 2)) @ params["head"]).astype(jnp.float32)
    labels = jax.nn.one_hot(batch["label"], CLASSES)
    return -(labels * jax.nn.log_softmax(logits)).sum(axis=-1).mean()


def _make_step() -> Any:
    import jax

    @partial(jax.jit, donate_argnums=0)
    def step(params: dict[str, Any], batch: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        loss, grads = jax.value_and_grad(_loss)(params, batch)
        return jax.tree.map(lambda p, g: p - 1e-3 * g.astype(p.dtype), params, grads), loss

    return step


def _resident_seconds(step: Any, params: Any, batches: list[Any], steps: int) -> tuple[Any, float]:
    """(params, wall time of `steps` steps on batches already on the device)."""
    import jax

    params, loss = step(params, batches[0])
    jax.block_until_ready(loss)
    start = time.perf_counter()
    for i in range(steps):
        params, loss = step(params, batches[i % len(batches)])
    jax.block_until_ready((params, loss))
    return params, time.perf_counter() - start


def input_wait(sizes: Sizes, paths: list[str], device: Any, batch_seconds: float) -> dict[str, Any]:
    """The share of a training loop's time lost to input, with workers and `to_device`."""
    import jax

    from ._work import image_pipeline

    step = _make_step()
    pipeline = image_pipeline(paths, sizes.batch, sizes.feed_workers)
    it = iter(pipeline)
    resident = [jax.device_put(next(it), device) for _ in range(4)]
    it.close()
    # The shallowest model whose step outlasts the pipeline's time per batch (x1.5).
    for depth in sizes.depths:
        params = jax.device_put(_init(sizes.width, depth), device)
        probe = min(20, sizes.steps)
        params, seconds = _resident_seconds(step, params, resident, probe)
        if seconds / probe >= 1.5 * batch_seconds:
            break
    params, resident_seconds = _resident_seconds(step, params, resident, sizes.steps)

    fed = iter(pipeline.to_device(device, device_buffer_size=2))
    params, loss = step(params, next(fed))  # The workers' start, out of the timing.
    jax.block_until_ready(loss)
    waited, start = 0.0, time.perf_counter()
    for _ in range(sizes.steps):
        before = time.perf_counter()
        batch = next(fed)
        waited += time.perf_counter() - before
        params, loss = step(params, batch)
    jax.block_until_ready((params, loss))
    fed_seconds = time.perf_counter() - start
    fed.close()
    share = max(0.0, 1.0 - resident_seconds / fed_seconds)
    return {
        "workers": sizes.feed_workers,
        "width": sizes.width,
        "depth": depth,
        "pipeline_ms_per_batch": batch_seconds * 1e3,
        "step_ms_resident": resident_seconds / sizes.steps * 1e3,
        "step_ms_fed": fed_seconds / sizes.steps * 1e3,
        "wait_share": share,
        "next_share": waited / fed_seconds,
        "step_outlasts_batch": resident_seconds / sizes.steps >= batch_seconds,
        "target": "< 0.02",
        "met": share < 0.02,
    }


# --- the run -------------------------------------------------------------------------------


def _machine(device: Any) -> dict[str, Any]:
    import jax

    import chute

    return {
        "date": datetime.date.today().isoformat(),
        "device": device.device_kind,
        "backend": jax.default_backend(),
        "cores": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "numpy": np.__version__,
        "chute": chute.__version__,
    }


def table(results: dict[str, Any]) -> str:
    """The results as Markdown (a part that failed shows its error)."""
    m = results["machine"]
    lines = [
        f"{'Dry run (CPU backend, small sizes)' if results['dry_run'] else 'Measured'} "
        f"{m['date']} on {m['device']} ({m['backend']}), {m['cores']} cores; "
        f"Python {m['python']}, jax {m['jax']}, NumPy {m['numpy']}.",
        "",
    ]
    for name, write in (
        ("host_to_device", _host_to_device_table),
        ("worker_scaling", _scaling_table),
        ("input_wait", _wait_table),
    ):
        got = results[name]
        lines += [f"{name}: failed: {got['error']}"] if "error" in got else write(got)
        lines.append("")
    return "\n".join(lines)


def _host_to_device_table(h2d: dict[str, Any]) -> list[str]:
    pinned = "n/a" if h2d["pinned_gbps"] is None else f"{h2d['pinned_gbps']:.1f} GB/s"
    shape = " x ".join(map(str, h2d["batch_shape"]))
    return [
        f"Host to device, {h2d['batches']} batches of {shape} float32:",
        "",
        "| plain `jax.device_put` loop | chute `to_device` | ratio (target >= 0.9) "
        f"| pinned copy ({h2d['pinned_how']}) |",
        "| --- | --- | --- | --- |",
        f"| {h2d['plain_gbps']:.2f} GB/s | {h2d['chute_gbps']:.2f} GB/s | {h2d['ratio']:.2f} "
        f"| {pinned} |",
        "",
        "`to_device` with other host buffers: "
        + ", ".join(f"{name} {value:.2f} GB/s" for name, value in h2d["variants_gbps"].items())
        + ".",
    ]


def _scaling_table(scaling: dict[str, Any]) -> list[str]:
    lines = [
        f"Worker scaling (plain loop on one core: {scaling['plain_images_per_second']:,.0f}"
        " images/s):",
        "",
        "| workers | first batch | images/s | x plain loop | efficiency "
        "| as many plain loops side by side | chute / those | consumer CPU |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in scaling["rows"]:
        lines.append(
            f"| {row['workers']} | {row['first_batch_s'] * 1e3:.0f} ms "
            f"| {row['images_per_second']:,.0f} | {row['ratio_to_plain']:.2f} "
            f"| {row['efficiency']:.2f} | {row['plain_loops_side_by_side']:,.0f} "
            f"| {row['ratio_to_side_by_side']:.2f} | {row['consumer_cpu']:.0%} |"
        )
    return lines


def _wait_table(wait: dict[str, Any]) -> list[str]:
    return [
        f"Input wait, {wait['workers']} workers and `to_device`, a bf16 convolutional model"
        f" ({wait['depth']} residual blocks of {wait['width']} channels):",
        "",
        "| step, batches on device | step, fed by chute | pipeline per batch "
        "| time lost to input (target < 2%) | time in `next()` |",
        "| --- | --- | --- | --- | --- |",
        f"| {wait['step_ms_resident']:.2f} ms | {wait['step_ms_fed']:.2f} ms "
        f"| {wait['pipeline_ms_per_batch']:.2f} ms | {wait['wait_share']:.1%} "
        f"| {wait['next_share']:.1%} |",
    ]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the three measurements; writes accelerator.json and accelerator.md to --out."""
    parser = argparse.ArgumentParser(prog="benchmarks.accelerator.measure")
    parser.add_argument("--out", required=True, help="folder for the JSON and Markdown")
    parser.add_argument("--dry-run", action="store_true", help="CPU backend, small sizes")
    args = parser.parse_args(argv)
    sizes = DRY if args.dry_run else FULL
    if args.dry_run:
        os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    from ._work import write_images

    device = jax.devices()[0]
    if not args.dry_run and device.platform == "cpu":
        raise SystemExit(
            "no accelerator: jax sees only the CPU (its devices: "
            f"{jax.devices()}); use --dry-run to run on the CPU"
        )
    os.makedirs(args.out, exist_ok=True)
    results: dict[str, Any] = {"dry_run": args.dry_run, "machine": _machine(device)}
    failed: list[str] = []

    def part(name: str, measure: Any, *args: Any) -> None:
        """Runs one measurement; a failure is recorded and the next part still runs."""
        try:
            results[name] = measure(*args)
        except Exception as error:  # One run on a lent machine: keep what the others give.
            failed.append(name)
            results[name] = {"error": f"{type(error).__name__}: {error}"}
            traceback.print_exc()
        print(f"{name}: {results[name]}", flush=True)

    with tempfile.TemporaryDirectory(prefix="chute-accelerator-") as folder:
        started = time.perf_counter()
        paths = write_images(folder, sizes.images)
        print(f"wrote {sizes.images:,} images in {time.perf_counter() - started:.1f} s", flush=True)
        part("host_to_device", host_to_device, sizes, device)
        part("worker_scaling", worker_scaling, sizes, paths)
        rows = results["worker_scaling"].get("rows", [])
        feed = [r["images_per_second"] for r in rows if r["workers"] == sizes.feed_workers]
        # Without the scaling figure, size the model for a 1 ms batch.
        batch_seconds = sizes.batch / feed[0] if feed else 1e-3
        part("input_wait", input_wait, sizes, paths, device, batch_seconds)
    results["seconds"] = time.perf_counter() - started
    with open(os.path.join(args.out, "accelerator.json"), "w") as f:
        json.dump(results, f, indent=2)
    markdown = table(results)
    with open(os.path.join(args.out, "accelerator.md"), "w") as f:
        f.write(markdown)
    print(markdown, flush=True)
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)} (see above; the others are in {args.out})")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
