"""A training process for the metrics tests: serves metrics, runs epochs until killed.

`python serve_pipeline.py PORT [--pace SECONDS]`: serves chute's metrics on PORT, then
iterates a pipeline with two worker processes, epoch after epoch, sleeping `--pace`
seconds per batch (the training step), and prints `ready` after the first batch.
"""

import argparse
import sys
import time

import numpy as np

import chute


def features(x: int) -> np.ndarray:
    """A record's features: the work the workers do."""
    time.sleep(0.0005)
    return np.full(64, x, dtype=np.float32)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--pace", type=float, default=0.01)
    args = parser.parse_args()
    chute.metrics.serve(args.port)
    ds = (
        chute.MapDataset.range(100_000)  # An epoch outlasts the tests: one iterator.
        .shuffle(seed=0)
        .to_iter_dataset()
        .map(features)
        .mp_prefetch(chute.MultiprocessingOptions(num_workers=2))
        .batch(32)
    )
    ready = False
    while True:
        for _ in ds.iter(metrics="train"):
            if not ready:
                print("ready", flush=True)
                ready = True
            time.sleep(args.pace)


if __name__ == "__main__":
    sys.exit(main())
