"""asv benchmark of the runtime autotuner on `chute demo`'s training loop (issue 32).

The demo's pipeline (ArrayRecord digits: a global shuffle per epoch, a random shift and
noise per record, `batch(64)` before `to_iter_dataset()`, `mp_prefetch`, `to_device`) fed
to the demo's training step (a jitted MLP and Adam, on the CPU here), one step per batch,
waiting for each step's loss as the demo's loop does. The target is that of
`bench_autotune` on this loop: starting from no workers, within 10 s the autotuner
reaches >= 0.9x the steps per second of the best fixed configuration (0, 1 or 2
workers, measured in the same call; each rate that of its run's last 3 s), and over
those 10 s it does no worse than a fixed 0 workers (>= 1.0x), the default before
the autotuner.

What the demo does beside each step is left out: its per-step digest of the batch and
its log line, so the figures are those of input and training alone. Without the demo's
extra (`chute[demo]`: optax and scikit-learn) the benchmark is skipped.
"""

from __future__ import annotations

import importlib.util
import tempfile
from typing import Any

import chute
from chute_cli.digits_demo import model, pipeline, write_digits

from . import bench_autotune  # Not its class by name: asv would run it here again.

EPOCHS = 1000  # More than any run reads (1,437 records an epoch, 22 batches).


class DemoAutotune(bench_autotune.RuntimeAutotune):
    """The demo's training loop, autotuned from no workers, against fixed configurations.

        `RuntimeAutotune`'s measurement and `track_`s, over steps of the training loop (the
    next iterator's too: the loop's next epoch).
    """

    def setup(self) -> None:
        missing = [name for name in ("optax", "sklearn") if importlib.util.find_spec(name) is None]
        if missing:  # asv skips a benchmark whose setup raises NotImplementedError.
            raise NotImplementedError(f"the demo's extra is not installed: no {missing}")
        import jax

        self.folder = tempfile.mkdtemp(prefix="chute-bench-autotune-demo-")
        self.paths, _ = write_digits(self.folder)
        self.device = jax.devices()[0]
        self.start, self.step, _ = model()

    def _dataset(self, workers: int, autotune: Any) -> chute.IterDataset:
        """The demo's pipeline with `workers` (tuned from there with `autotune`)."""
        return pipeline(self.paths, EPOCHS, workers, autotune).to_device(self.device)

    def _rates(self, dataset: chute.IterDataset, seconds: float) -> tuple[float, float]:
        """Steps per second of a new iterator of `dataset` over its whole run and its last
        3 s (the step compiled before)."""
        iterator = iter(dataset)
        state, loss = self.step(self.start, next(iterator))
        float(loss)

        def train(batch: Any) -> int:
            nonlocal state
            state, loss = self.step(state, batch)
            float(loss)  # The demo logs each step's loss, so it waits for the step.
            return 1

        return bench_autotune.timed_rates(iterator, seconds, train)
