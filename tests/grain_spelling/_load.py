"""Runs a seed test module with its `chute` spelled `import chute.grain.python as grain`.

The seed tests (`tests/test_seed_*.py`) port the seeds' guide examples with `grain.X`
written `chute.X`. Loaded again here, their module-level names `chute`,
`chute_samplers` and `chute_transforms` are replaced by `GrainSpelling`, which answers
with `chute.grain.python` (then `chute.grain.experimental`, and `chute.grain`'s
submodules): so every guide example runs through the Grain namespace. The few names
the tests use to make their data (`write_array_record`, ...) are not Grain's; they
come from chute, and only those (`HELPERS`).
"""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path
from typing import Any

import chute
import chute.grain
from chute.grain import experimental, python

HELPERS = frozenset({"write_array_record", "FileInstruction", "ParquetStream"})
"""Names the seed tests use to build their stand-in data (not guide code)."""


class GrainSpelling(types.ModuleType):
    """A module whose names are `chute.grain.python`'s (see the module docs)."""

    def __init__(self) -> None:
        super().__init__("grain")

    def __getattr__(self, name: str) -> Any:
        for namespace in (python, experimental, chute.grain):
            if hasattr(namespace, name):
                return getattr(namespace, name)
        if name in HELPERS:
            return getattr(chute, name)
        raise AttributeError(f"chute.grain (as grain.python) has no {name!r}")


CHUTE_ONLY = frozenset(
    {
        "test_guide_names_are_available_from_chute",
        # These check chute's own mixture placement (`chute_samplers.MixSchedule`); under
        # Grain's spelling `MapDataset.mix` places and sizes as Grain does, which
        # tests/test_grain_mix_and_strings.py checks against Grain's own sequences.
        "test_map_dataset_mix_example",
        "test_multi_epoch_mix_of_repeated_datasets",
        "test_global_shuffle_of_mixed_repeated_datasets",
    }
)
"""Seed tests about chute's own spelling or behaviour (not run here)."""


def load_seed_module(name: str) -> dict[str, Any]:
    """The namespace of `tests/<name>.py`, loaded anew with the Grain spelling."""
    path = Path(__file__).resolve().parents[1] / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"grain_spelling_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    spelling = GrainSpelling()
    for global_name in ("chute", "chute_samplers", "chute_transforms"):
        if global_name in module.__dict__:
            module.__dict__[global_name] = spelling
    return {
        key: value
        for key, value in module.__dict__.items()
        if not key.startswith("__") and key not in CHUTE_ONLY
    }
