"""The seed tests of `tests/test_seed_sources.py`, through `chute.grain` (see `_load`)."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_grain_load", Path(__file__).with_name("_load.py"))
_load = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_load)
globals().update(_load.load_seed_module("test_seed_sources"))
