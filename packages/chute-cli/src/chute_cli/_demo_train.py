"""The demo's training process: `python -m chute_cli._demo_train WORK_DIR STEPS SAVE_EVERY LOG`.

Trains a small MLP on the digits pipeline of `_demo_data` with the loop of
`_demo_loop` (Orbax checkpoints of the model, the optimizer and the data iterator every
SAVE_EVERY steps, resuming from the latest). A batch's hash covers its labels and
pixels; the summary adds the held-out accuracy.
"""

from __future__ import annotations

import json
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["batch_digest", "main", "model"]

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


def model() -> tuple[dict[str, Any], Any, Any]:
    """The demo's model: its training state, its jitted step and its `logits`.

    The step is `(state, batch) -> (state, loss)`: an MLP's cross-entropy, one Adam step.

    Example:
        >>> state, step, logits = model()
        >>> batch = {"x": np.zeros((2, 64), np.float32), "label": np.array([1, 2])}
        >>> state, loss = step(state, batch)
        >>> logits(state["params"], batch["x"]).shape, float(loss) > 0
        ((2, 10), True)
    """
    import jax
    import jax.numpy as jnp
    import optax

    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    params = {
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
    def train_step(state: dict[str, Any], batch: dict[str, Any]) -> tuple[Any, jax.Array]:
        def loss_fn(params: dict[str, jax.Array]) -> jax.Array:
            scores = logits(params, batch["x"])
            return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(scores, batch["label"]))

        loss, grads = jax.value_and_grad(loss_fn)(state["params"])
        updates, opt_state = optimizer.update(grads, state["opt_state"], state["params"])
        return {
            "params": optax.apply_updates(state["params"], updates),
            "opt_state": opt_state,
        }, loss

    return {"params": params, "opt_state": optimizer.init(params)}, train_step, logits


def main(work: Path, steps: int, save_every: int, log_path: Path) -> None:
    """Trains (or resumes training) for `steps` steps; see the module docs."""
    launched = time.perf_counter()
    import jax
    import jax.numpy as jnp

    from ._demo_data import pipeline
    from ._demo_loop import Task, train

    info = json.loads((work / "data.json").read_text())
    epochs = -(-steps * 64 // info["train_records"]) + 1
    state, train_step, logits = model()

    def evaluate(state: dict[str, Any]) -> dict[str, float]:
        held_out = np.load(work / "held_out.npz")
        x = jnp.asarray(held_out["image"].reshape(-1, 64).astype(np.float32) / 16.0)
        predicted = np.asarray(jnp.argmax(logits(state["params"], x), axis=1))
        return {"accuracy": float((predicted == held_out["label"]).mean())}

    task = Task(
        state=state,
        step=train_step,
        dataset=pipeline(info["paths"], epochs, workers=2).to_device(jax.devices()[0]),
        digest=batch_digest,
        evaluate=evaluate,
    )
    train(work, steps, save_every, log_path, task, launched)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
