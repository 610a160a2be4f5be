"""The demo's training process: `python -m chute.cli._demo_train WORK_DIR STEPS SAVE_EVERY LOG`.

Trains a small MLP on the digits pipeline of `_demo_data`, checkpointing the model,
the optimizer and the data iterator together with Orbax every SAVE_EVERY steps, and
resuming from the latest checkpoint if there is one. Every step appends
`{"step", "loss", "batch"}` (a hash of the batch's labels and pixels) to LOG and prints
`step N` for the parent's progress bar; at the end it prints `summary {...}`.
"""

from __future__ import annotations

import json
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["batch_digest", "main"]

HIDDEN = 128
LEARNING_RATE = 3e-3


def batch_digest(batch: dict[str, Any]) -> str:
    """A short hash of a batch's pixels and labels, to compare runs step by step.

    Example:
        >>> batch_digest({"x": np.zeros((2, 64), np.float32), "label": np.array([1, 2])})
        'c237a51a'
    """
    data = np.asarray(batch["x"]).tobytes() + np.asarray(batch["label"]).tobytes()
    return f"{zlib.crc32(data):08x}"


def main(work: Path, steps: int, save_every: int, log_path: Path) -> None:
    """Trains (or resumes training) for `steps` steps; see the module docs."""
    launched = time.perf_counter()
    import jax
    import jax.numpy as jnp
    import optax
    import orbax.checkpoint as ocp
    from absl import logging as absl_logging

    import chute

    # Orbax notes (as a warning) that the killed run left a partial checkpoint behind,
    # which it then ignores: expected here, so not shown.
    absl_logging.set_verbosity(absl_logging.ERROR)

    from ._demo_data import pipeline

    info = json.loads((work / "data.json").read_text())
    epochs = -(-steps * 64 // info["train_records"]) + 1

    def init(key: jax.Array) -> dict[str, jax.Array]:
        k1, k2 = jax.random.split(key)
        return {
            "w1": jax.random.normal(k1, (64, HIDDEN)) * (1 / 8),
            "b1": jnp.zeros(HIDDEN),
            "w2": jax.random.normal(k2, (HIDDEN, 10)) * (1 / HIDDEN**0.5),
            "b2": jnp.zeros(10),
        }

    def logits(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
        hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
        return hidden @ params["w2"] + params["b2"]

    optimizer = optax.adam(LEARNING_RATE)

    @jax.jit
    def train_step(state: dict[str, Any], x: jax.Array, y: jax.Array) -> tuple[Any, jax.Array]:
        def loss_fn(params: dict[str, jax.Array]) -> jax.Array:
            losses = optax.softmax_cross_entropy_with_integer_labels(logits(params, x), y)
            return jnp.mean(losses)

        loss, grads = jax.value_and_grad(loss_fn)(state["params"])
        updates, opt_state = optimizer.update(grads, state["opt_state"], state["params"])
        return {
            "params": optax.apply_updates(state["params"], updates),
            "opt_state": opt_state,
        }, loss

    params = init(jax.random.PRNGKey(0))
    state: dict[str, Any] = {"params": params, "opt_state": optimizer.init(params)}
    dataset = pipeline(info["paths"], epochs, workers=2).to_device(jax.devices()[0])
    iterator = iter(dataset)
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
    started = time.perf_counter()
    first_step = step + 1  # Timing starts after it: compiling and starting workers.
    with open(log_path, "a") as log:
        while step < steps:
            before = time.perf_counter()
            batch = next(iterator)
            if step == first_step:
                waited, started = 0.0, before
            else:
                waited += time.perf_counter() - before
            state, loss = train_step(state, batch["x"], batch["label"])
            step += 1
            record = {"step": step, "loss": float(loss), "batch": batch_digest(batch)}
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
    held_out = np.load(work / "held_out.npz")
    x = jnp.asarray(held_out["image"].reshape(-1, 64).astype(np.float32) / 16.0)
    predicted = np.asarray(jnp.argmax(logits(state["params"], x), axis=1))
    summary = {
        "first_step_s": started - launched,
        "steps_per_s": (step - first_step) / seconds,
        "wait_fraction": waited / seconds,
        "accuracy": float((predicted == held_out["label"]).mean()),
    }
    print("summary " + json.dumps(summary), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
