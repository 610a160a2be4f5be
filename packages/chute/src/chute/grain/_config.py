"""`chute.grain.config`: Grain's configuration flags, each on chute's counterpart.

Grain reads its flags (`--grain_<name>`, or `grain.config.update(name, value)`); chute
accepts the same names and values. Two of them turn on what chute has for the purpose
(see `chute._debug`):

- `py_debug_mode` (bool): every new iterator times its stages (as
  `ds.iter(stats=True)`) and logs the per-stage summary to the `chute` logger (INFO)
  every 60 s and when it ends.
- `py_dataset_visualization_output_dir` (str or None): `""` logs each new iterator's
  pipeline (INFO); a folder gets each pipeline as a text file (Grain refuses a folder
  there); None turns it off.

The others configure Grain's TensorFlow loaders (`tf_*`) or relay a worker's SIGTERM to
the main process (`py_relay_sigterm_to_main`). chute has no TensorFlow loader, and its
workers end with their consumer by themselves. So they are accepted, checked and kept,
and change nothing. Unknown names raise a `ValueError` that lists the known ones.
"""

from __future__ import annotations

from typing import Any

from .._debug import SWITCHES

__all__ = ["Config", "config"]

# name -> (type, default). Bool flags take bools, int flags ints, the folder a str or None.
_FLAGS: dict[str, tuple[type, Any]] = {
    "py_debug_mode": (bool, False),
    "py_dataset_visualization_output_dir": (str, None),
    "py_relay_sigterm_to_main": (bool, False),
    "tf_interleaved_shuffle": (bool, False),
    "tf_interleaved_shuffle_block_size": (int, 10),
    "tf_interleaved_shuffle_parallel_blocks": (int, 10),
    "tf_lookup_batch_size": (int, 100),
    "tf_lookup_num_parallel_calls": (int, -1),
    "tf_lookup_fast_warmup": (bool, False),
    "tf_optimized_sequential_read": (bool, False),
    "tf_prefetch_buffer_size": (int, -1),
}


class Config:
    """Grain's configuration object: `update(name, value)`, and each flag as an attribute.

    Example:
        >>> import chute.grain as grain
        >>> grain.config.py_debug_mode
        False
        >>> grain.config.update("tf_lookup_batch_size", 50)
        >>> grain.config.get_or_default("tf_lookup_batch_size")
        50
        >>> grain.config.update("tf_lookup_batch_size", 100)
        >>> grain.config.update("py_debug", True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: Unrecognized config option: py_debug (Grain's flags: py_debug_mode, ...)
    """

    def __init__(self) -> None:
        object.__setattr__(
            self, "_values", {name: default for name, (_, default) in _FLAGS.items()}
        )

    def update(self, name: str, value: Any) -> None:
        """Sets flag `name` (Grain's name without `grain_`) to `value`.

        Raises:
            ValueError: `name` is not one of Grain's flags.
            TypeError: `value` is not of the flag's type.
        """
        kind, _ = _FLAGS.get(name, (None, None)) if isinstance(name, str) else (None, None)
        if kind is None:
            raise ValueError(_unknown(name))
        ok = (
            isinstance(value, bool)
            if kind is bool
            else isinstance(value, int) and not isinstance(value, bool)
            if kind is int
            else value is None or isinstance(value, str)
        )
        if not ok:
            wanted = {bool: "a bool", int: "an int", str: "a str (a folder, or '') or None"}
            raise TypeError(
                f"grain.config.update: {name} takes {wanted[kind]}, got {value!r} "
                f"({type(value).__name__})."
            )
        self._values[name] = value
        if name == "py_debug_mode":
            SWITCHES.stats = value
        elif name == "py_dataset_visualization_output_dir":
            SWITCHES.pipeline_to = value

    def get_or_default(self, name: str) -> Any:
        """The flag's value (its default until `update` sets it)."""
        return self.__getattr__(name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # Python's own lookups (copy, hasattr of dunders, ...).
            raise AttributeError(name)
        values = object.__getattribute__(self, "_values")
        if name not in values:
            raise ValueError(_unknown(name))
        return values[name]

    def __setattr__(self, name: str, value: Any) -> None:
        raise ValueError(f"grain.config: set flags with config.update({name!r}, value).")

    def __repr__(self) -> str:
        return f"Config({self._values!r})"


def _unknown(name: object) -> str:
    return f"Unrecognized config option: {name} (Grain's flags: {', '.join(_FLAGS)})"


config = Config()
"""The process's configuration (Grain's `grain.config`)."""
