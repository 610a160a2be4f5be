"""`chute demo`: train on real data, get preempted, resume, and match step for step.

1. scikit-learn's handwritten digits (shipped inside the package: no download) become
   ArrayRecord shards.
2. A small JAX MLP (optax's Adam) trains on a chute pipeline: a global shuffle every
   epoch, a random shift and noise per record, batches of 64, 2 worker processes,
   device prefetch. Every few steps the model, the optimizer and the data iterator are
   checkpointed together with Orbax.
3. The same training runs again and is killed (SIGKILL) part way, as a preempted
   machine would be; a new process resumes from the last checkpoint.
4. The resumed run's batches and losses are compared with the uninterrupted run's,
   step by step; a table shows steps/s, the share of time spent waiting for input, and
   held-out accuracy; the loss curves go to a PNG.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["Outcome", "preempt_and_compare", "run_demo"]

print = functools.partial(print, flush=True)  # Keeps lines in order with tqdm's.

_EXTRAS = ("optax", "sklearn", "matplotlib", "orbax.checkpoint")


def _missing_extras() -> list[str]:
    import importlib.util

    return [name for name in _EXTRAS if importlib.util.find_spec(name.split(".")[0]) is None]


def _train(
    module: str,
    work: Path,
    steps: int,
    save_every: int,
    log: Path,
    label: str,
    kill_at: int | None = None,
) -> dict[str, Any]:
    """Runs `python -m module` with a progress bar; kills it at step `kill_at`."""
    from tqdm import tqdm

    command = [
        sys.executable,
        "-m",
        module,
        str(work),
        str(steps),
        str(save_every),
        str(log),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    result: dict[str, Any] = {"killed_at": None, "resumed_from": 0}
    assert process.stdout is not None
    with tqdm(total=steps, desc=label, unit="step", leave=True, file=sys.stderr) as bar:
        for line in process.stdout:
            kind, _, value = line.strip().partition(" ")
            if kind == "resumed":
                result["resumed_from"] = int(value)
                bar.update(int(value) - bar.n)
            elif kind == "step":
                bar.update(int(value) - bar.n)
                if kill_at is not None and int(value) >= kill_at:
                    process.send_signal(signal.SIGKILL)  # A preempted machine.
                    result["killed_at"] = int(value)
                    break
            elif kind == "summary":
                result.update(json.loads(value))
    process.wait()
    if result["killed_at"] is not None and log.exists():
        # The kill lands a moment after the step was read: the process may have logged
        # a step or more past it by then. It was preempted after its last logged step.
        logged = [record["step"] for record in _read_log(log)]
        result["killed_at"] = max(logged[-1], result["killed_at"]) if logged else 0
    if result["killed_at"] is None and process.returncode != 0:
        raise RuntimeError(f"the training process failed (exit {process.returncode})")
    return result


def _read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _plot(
    path: Path,
    reference: list[dict[str, Any]],
    resumed: list[dict[str, Any]],
    killed_at: int,
    restored: int,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    axes.plot(
        [r["step"] for r in reference],
        [r["loss"] for r in reference],
        label="uninterrupted",
        linewidth=2.5,
        alpha=0.5,
    )
    axes.plot(
        [r["step"] for r in resumed],
        [r["loss"] for r in resumed],
        ".",
        markersize=3,
        label="preempted, then resumed",
    )
    axes.axvline(killed_at, color="red", linestyle="--", label=f"SIGKILL at step {killed_at}")
    axes.axvline(restored, color="gray", linestyle=":", label=f"restored step {restored}")
    axes.set_xlabel("step")
    axes.set_ylabel("training loss")
    axes.set_yscale("log")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """The two runs of a demo: the uninterrupted one, and the preempted then resumed one."""

    reference: dict[str, Any]  # The uninterrupted run's summary.
    resumed: dict[str, Any]  # The resumed process's summary.
    expected: list[dict[str, Any]]  # The uninterrupted run's log.
    got: list[dict[str, Any]]  # The preempted run's log (both of its processes).
    killed_at: int
    restored: int
    identical: bool

    def plot(self, path: Path) -> None:
        """Draws both runs' losses, the kill and the restored step, into a PNG."""
        _plot(path, self.expected, self.got, self.killed_at, self.restored)


def preempt_and_compare(
    module: str, work: Path, steps: int, save_every: int, kill_at: int, shared: tuple[str, ...]
) -> Outcome:
    """Trains uninterrupted; trains again, killed at `kill_at` and resumed; compares them.

    `module` is the training process (`python -m module WORK STEPS EVERY LOG`); the
    files `shared` of `work` are linked into each run's folder. Prints the verdict.
    """
    runs = []
    for run in ("uninterrupted", "preempted"):
        run_dir = work / run
        run_dir.mkdir(exist_ok=True)
        for name in shared:
            if not (run_dir / name).exists():
                os.symlink(work / name, run_dir / name)
        runs.append(run_dir)
    reference = _train(
        module, runs[0], steps, save_every, runs[0] / "log.jsonl", "run 1, uninterrupted"
    )
    first = _train(
        module,
        runs[1],
        steps,
        save_every,
        runs[1] / "log.jsonl",
        "run 2, until killed",
        kill_at=kill_at,
    )
    second = _train(module, runs[1], steps, save_every, runs[1] / "log.jsonl", "run 2, resumed")

    expected = {r["step"]: r for r in _read_log(runs[0] / "log.jsonl")}
    got = _read_log(runs[1] / "log.jsonl")
    mismatches = [r["step"] for r in got if expected.get(r["step"]) != r]
    restored = second["resumed_from"]
    resumed_steps = [r["step"] for r in got[len(got) - (steps - restored) :]]
    complete = resumed_steps == list(range(restored + 1, steps + 1))
    print()
    print(
        f"preempted at step {first['killed_at']}; the new process restored the checkpoint "
        f"of step {restored} and replayed {first['killed_at'] - restored} steps"
    )
    verdict = "identical" if not mismatches and complete else "DIFFERENT"
    print(
        f"run 2 vs run 1, step by step over {len(got)} logged steps: batches and losses "
        f"{verdict}" + (f" (first difference at step {mismatches[0]})" if mismatches else "")
    )
    return Outcome(
        reference,
        second,
        list(expected.values()),
        got,
        first["killed_at"],
        restored,
        verdict == "identical",
    )


def run_demo(
    folder: str | None = None, steps: int = 300, save_every: int = 25, kill_at: int | None = None
) -> int:
    """Runs the demo (see the module docs); returns the exit code (0: runs matched).

    Example:
        >>> callable(run_demo)
        True
    """
    missing = _missing_extras()
    if missing:
        print(
            f"chute demo: error: needs {', '.join(missing)}: pip install 'chute[demo]'",
            file=sys.stderr,
        )
        return 2
    import numpy as np

    from ._demo_data import write_digits

    if kill_at is None:
        kill_at = steps * 11 // 20 + save_every // 2  # Between two checkpoints.
    # Absolute: the runs' folders link to shared files by this path.
    work = Path(folder or tempfile.mkdtemp(prefix="chute-demo-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    paths, held_out = write_digits(str(work / "data"))
    np.savez(work / "held_out.npz", image=held_out["image"], label=held_out["label"])
    train_records = sum(1 for _ in __import__("chute").ArrayRecordSource(paths))
    (work / "data.json").write_text(json.dumps({"paths": paths, "train_records": train_records}))
    print(f"chute demo, in {work}")
    print(
        f"  data: scikit-learn's handwritten digits -> {len(paths)} ArrayRecord shards, "
        f"{train_records} training records, {len(held_out['label'])} held out"
    )
    print(
        "  pipeline: global shuffle per epoch -> random shift + noise per record -> "
        "batch(64) -> 2 worker processes -> device prefetch"
    )
    print(
        f"  model: MLP 64-128-10, Adam; Orbax checkpoints (model + iterator) every "
        f"{save_every} steps"
    )

    outcome = preempt_and_compare(
        "chute_cli._demo_train", work, steps, save_every, kill_at, ("data.json", "held_out.npz")
    )
    reference, second = outcome.reference, outcome.resumed
    print()
    print("| run | first step after | then steps/s | input wait | held-out accuracy |")
    print("|---|---|---|---|---|")
    for label, summary in (("uninterrupted", reference), ("resumed", second)):
        print(
            f"| {label} | {summary['first_step_s']:.1f} s | {summary['steps_per_s']:.0f} | "
            f"{summary['wait_fraction']:.1%} | {summary['accuracy']:.1%} |"
        )
    print(
        "first step: starting jax, Orbax and the workers, and compiling; input wait: the "
        "share of the time after it spent in next(iterator)"
    )
    plot = work / "loss.png"
    outcome.plot(plot)
    print(f"\nloss curves: {plot}")
    return 0 if outcome.identical else 1
