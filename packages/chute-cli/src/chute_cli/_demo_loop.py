"""The demos' training loop: train, checkpoint model and iterator together, resume.

A demo's training process builds a `Task` (its model, its pipeline, how to hash a
batch and what to measure at the end) and hands it to `train`, which resumes from the
latest Orbax checkpoint if there is one, appends `{"step", "loss", "batch"}` to the log
at every step, prints `step N` for the parent's progress bar and, at the end,
`summary {...}` (the timings and the task's own figures).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["Task", "train"]


@dataclasses.dataclass(frozen=True)
class Task:
    """What a demo trains: its state, its step, its data and its final figures.

    Attributes:
        state: the model's parameters and optimizer state (a pytree).
        step: `(state, batch) -> (state, loss)`, jitted.
        dataset: the pipeline (an `IterDataset`) of device batches.
        digest: a short hash of a batch, to compare runs step by step.
        evaluate: `state -> {name: figure}` at the end (e.g. held-out accuracy).
        tokens: how many real (not padding) items a batch holds, for a rate; None: none.

    Example:
        >>> task = Task({}, lambda s, b: (s, 0.0), [], str, lambda s: {})
        >>> task.tokens is None
        True
    """

    state: Any
    step: Callable[[Any, Any], tuple[Any, Any]]
    dataset: Any
    digest: Callable[[Any], str]
    evaluate: Callable[[Any], dict[str, float]]
    tokens: Callable[[Any], int] | None = None


def train(
    work: Path, steps: int, save_every: int, log_path: Path, task: Task, launched: float
) -> None:
    """Trains (or resumes training) `task` for `steps` steps; see the module docs."""
    import orbax.checkpoint as ocp
    from absl import logging as absl_logging

    import chute

    # Orbax notes (as a warning) that the killed run left a partial checkpoint behind,
    # which it then ignores: expected here, so not shown.
    absl_logging.set_verbosity(absl_logging.ERROR)
    state = task.state
    iterator = iter(task.dataset)
    manager = ocp.CheckpointManager(
        work / "checkpoints", options=ocp.CheckpointManagerOptions(max_to_keep=3)
    )
    step = manager.latest_step() or 0
    if step:
        restored = manager.restore(
            step,
            args=ocp.args.Composite(
                model=ocp.args.StandardRestore(state),
                data=chute.checkpoint.CheckpointRestore(iterator),
            ),
        )
        state = restored["model"]
        print(f"resumed {step}", flush=True)
    waited = 0.0
    items = 0
    started = time.perf_counter()
    first_step = step + 1  # Timing starts after it: compiling and starting workers.
    with open(log_path, "a") as log:
        while step < steps:
            before = time.perf_counter()
            batch = next(iterator)
            if step == first_step:
                waited, items, started = 0.0, 0, before
            else:
                waited += time.perf_counter() - before
            state, loss = task.step(state, batch)
            if task.tokens is not None:
                items += task.tokens(batch)
            step += 1
            record = {"step": step, "loss": float(loss), "batch": task.digest(batch)}
            log.write(json.dumps(record) + "\n")
            log.flush()
            if step % save_every == 0:
                manager.save(
                    step,
                    args=ocp.args.Composite(
                        model=ocp.args.StandardSave(state),
                        data=chute.checkpoint.CheckpointSave(iterator),
                    ),
                )
            print(f"step {step}", flush=True)
    manager.wait_until_finished()
    seconds = time.perf_counter() - started
    summary = {
        "first_step_s": started - launched,
        "steps_per_s": (step - first_step) / seconds,
        "wait_fraction": waited / seconds,
        **task.evaluate(state),
    }
    if task.tokens is not None:
        summary["tokens_per_s"] = items / seconds
    print("summary " + json.dumps(summary), flush=True)
