"""Pipelines whose checkpoints of earlier chute versions must keep restoring.

Only standard-library functions travel in them (`operator`, `functools.partial`,
`itertools.repeat`), so their fingerprints do not depend on where a test module lives.
`python tests/checkpoint_compat/pipelines.py FOLDER` writes, for each pipeline, a
checkpoint taken mid-stream and the elements that follow it
(`FOLDER/<name>/process_0-of-1.json` and `FOLDER/<name>/next.json`), as chute writes
them today. `test_checkpoint_compat.py` restores every folder kept in this directory.
"""

from __future__ import annotations

import functools
import itertools
import json
import operator
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import chute

STEPS = 7  # Elements read before the checkpoint.
NEXT = 5  # Elements after it that the checkpoint must lead to.


def _ints(n: int = 60) -> chute.MapDataset[int]:
    return chute.MapDataset.range(n)


def _sequences() -> chute.MapDataset[dict[str, np.ndarray]]:
    """Token sequences of 1 to 5 tokens, from a list (a source described by its length)."""
    return chute.MapDataset.source(
        [{"tokens": np.arange(1 + i % 5, dtype=np.int32)} for i in range(60)]
    )


PIPELINES: dict[str, Callable[[], Any]] = {
    "map_dataset": lambda: _ints().seed(7).shuffle().map(operator.neg).batch(4).to_iter_dataset(),
    "stream_ops": lambda: (
        _ints()
        .to_iter_dataset()
        .map(functools.partial(operator.mul, 3))
        .filter(functools.partial(operator.lt, 10))
        .flat_map(functools.partial(itertools.repeat, times=2))
        .seed(2)
        .window_shuffle(6)
        .batch(3)
    ),
    "skip_errors": lambda: (
        _ints()
        .seed(5)
        .shuffle()
        .to_iter_dataset()
        .map(functools.partial(operator.floordiv, 120))
        .skip_errors(max_failures=3)
    ),
    "repeat_slice_limit": lambda: (
        _ints(20).slice(slice(2, 18, 3)).repeat(3).to_iter_dataset().limit(15)
    ),
    "mix_and_interleave": lambda: chute.IterDataset.mix(
        [
            chute.IterDataset.interleave(
                [_ints(10).to_iter_dataset(), _ints(30).to_iter_dataset()], cycle_length=2
            ),
            _ints(40).map(operator.neg).to_iter_dataset(),
        ],
        [2, 1],
    ),
    "map_mix_select": lambda: (
        chute.MapDataset.mix([_ints(10), _ints(30)], [1, 3]).seed(1).shuffle().to_iter_dataset()
    ),
    "workers_state": lambda: (
        _ints()
        .seed(3)
        .shuffle()
        .to_iter_dataset()
        .map(operator.neg)
        .mp_prefetch(num_workers=0, chunk_size=4)
        .batch(2)
    ),
    "pack": lambda: _sequences().to_iter_dataset().pack(8),
    "rebatch_unbatch": lambda: _ints().batch(5).to_iter_dataset().rebatch(4).unbatch(),
    "data_loader": lambda: chute.DataLoader(
        data_source=chute.RangeDataSource(start=0, stop=40, step=1),
        sampler=chute.IndexSampler(
            num_records=40,
            num_epochs=2,
            shard_options=chute.NoSharding(),
            shuffle=True,
            seed=4,
        ),
        operations=[chute.BatchTransform(batch_size=3)],
        worker_count=0,
        error_budget=chute.ErrorBudget(max_failures=2),
    ),
}


def plain(value: Any) -> Any:
    """An element as JSON: arrays as lists, dicts and tuples kept apart."""
    if isinstance(value, np.ndarray | np.generic):
        return {"array": np.asarray(value).tolist(), "dtype": str(np.asarray(value).dtype)}
    if isinstance(value, dict):
        return {"dict": {str(k): plain(v) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return {type(value).__name__: [plain(v) for v in value]}
    return value


def write(folder: Path) -> None:
    """Writes each pipeline's mid-stream checkpoint and the elements after it."""
    from chute_checkpoint import save

    for name, make in PIPELINES.items():
        it = iter(make())
        for _ in range(STEPS):
            next(it)
        target = folder / name
        save(it, target, process_index=0, process_count=1)
        expected = [plain(next(it)) for _ in range(NEXT)]
        (target / "next.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    write(Path(sys.argv[1]))
