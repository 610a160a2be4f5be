"""The text demo's training process: `python -m chute_cli._demo_text_train WORK STEPS EVERY LOG`.

Trains a tiny decoder-only transformer on the packed token rows of `_demo_text_data`
with the loop of `_demo_loop`. Packing puts several texts in a row: attention stays
within a text (its segment id), positions restart with each text, and the loss counts
only predictions of a token of the same text. The summary adds the held-out loss (on
the held-out docstrings, packed the same way) and tokens/s.
"""

from __future__ import annotations

import json
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["main", "rows_digest"]

WIDTH = 64
HEADS = 4
LAYERS = 2
LEARNING_RATE = 3e-3


def rows_digest(batch: dict[str, Any]) -> str:
    """A short hash of a batch's tokens and segment ids, to compare runs step by step.

    Example:
        >>> rows = {"text": np.zeros((2, 4), np.int32), "text_segment_ids": np.ones((2, 4))}
        >>> rows_digest(rows)
        '1a176d45'
    """
    data = np.asarray(batch["text"]).tobytes() + np.asarray(batch["text_segment_ids"]).tobytes()
    return f"{zlib.crc32(data):08x}"


def main(work: Path, steps: int, save_every: int, log_path: Path) -> None:
    """Trains (or resumes training) for `steps` steps; see the module docs."""
    launched = time.perf_counter()
    import jax
    import jax.numpy as jnp
    import optax

    from ._demo_loop import Task, train
    from ._demo_text_data import SEQUENCE, VOCAB, text_pipeline

    info = json.loads((work / "data.json").read_text())

    def init(key: jax.Array) -> dict[str, Any]:
        keys = iter(jax.random.split(key, 2 + 4 * LAYERS))

        def dense(shape: tuple[int, int]) -> jax.Array:
            scale = 1.0 / float(np.sqrt(shape[0]))
            return jax.random.normal(next(keys), shape) * scale

        return {
            "embed": jax.random.normal(next(keys), (VOCAB, WIDTH)) * 0.02,
            "position": jax.random.normal(next(keys), (SEQUENCE, WIDTH)) * 0.02,
            "layers": [
                {
                    "qkv": dense((WIDTH, 3 * WIDTH)),
                    "out": dense((WIDTH, WIDTH)),
                    "up": dense((WIDTH, 4 * WIDTH)),
                    "down": dense((4 * WIDTH, WIDTH)),
                }
                for _ in range(LAYERS)
            ],
        }

    def norm(x: jax.Array) -> jax.Array:
        return (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5)

    def logits(params: dict[str, Any], batch: dict[str, Any]) -> jax.Array:
        tokens, segments = batch["text"], batch["text_segment_ids"]
        x = params["embed"][tokens] + params["position"][batch["text_positions"]]
        length = tokens.shape[1]
        causal = jnp.tril(jnp.ones((length, length), bool))
        same_text = segments[:, :, None] == segments[:, None, :]
        mask = (causal & same_text & (segments[:, :, None] > 0))[:, None]
        for layer in params["layers"]:
            q, k, v = jnp.split(norm(x) @ layer["qkv"], 3, axis=-1)
            q, k, v = (t.reshape(*t.shape[:2], HEADS, -1).transpose(0, 2, 1, 3) for t in (q, k, v))
            scores = jnp.where(mask, q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1]), -1e9)
            mixed = (jax.nn.softmax(scores, -1) @ v).transpose(0, 2, 1, 3).reshape(x.shape)
            x = x + mixed @ layer["out"]
            x = x + jax.nn.gelu(norm(x) @ layer["up"]) @ layer["down"]
        unembed: jax.Array = params["embed"].T
        return norm(x) @ unembed

    def loss_fn(params: dict[str, Any], batch: dict[str, Any]) -> jax.Array:
        scores = logits(params, batch)[:, :-1]
        targets, segments = batch["text"][:, 1:], batch["text_segment_ids"]
        counted = (segments[:, 1:] == segments[:, :-1]) & (segments[:, 1:] > 0)
        losses = optax.softmax_cross_entropy_with_integer_labels(scores, targets)
        return jnp.sum(losses * counted) / jnp.maximum(jnp.sum(counted), 1)

    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(LEARNING_RATE))

    @jax.jit
    def train_step(state: dict[str, Any], batch: dict[str, Any]) -> tuple[Any, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(state["params"], batch)
        updates, opt_state = optimizer.update(grads, state["opt_state"], state["params"])
        return {
            "params": optax.apply_updates(state["params"], updates),
            "opt_state": opt_state,
        }, loss

    held_out_loss = jax.jit(loss_fn)

    def evaluate(state: dict[str, Any]) -> dict[str, float]:
        rows = text_pipeline(info["held_out"], info["tokenizer"], epochs=1, workers=0)
        losses = [float(held_out_loss(state["params"], batch)) for batch in rows]
        return {"held_out_loss": float(np.mean(losses))}

    def real_tokens(batch: dict[str, Any]) -> int:
        return int(np.count_nonzero(np.asarray(batch["text_segment_ids"])))

    epochs = -(-steps * 16 * SEQUENCE // info["train_tokens"]) + 1
    pipeline = text_pipeline(info["train"], info["tokenizer"], epochs, workers=2)
    params = init(jax.random.PRNGKey(0))
    task = Task(
        state={"params": params, "opt_state": optimizer.init(params)},
        step=train_step,
        dataset=pipeline.to_device(jax.devices()[0]),
        digest=rows_digest,
        evaluate=evaluate,
        tokens=real_tokens,
    )
    train(work, steps, save_every, log_path, task, launched)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
