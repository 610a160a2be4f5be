"""What the fluent datasets remember about themselves: stages (for `print`) and seeds."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import Any

__all__ = ["Stage", "derive_seed", "render", "show_fn"]

_MASK64 = (1 << 64) - 1


@dataclasses.dataclass(frozen=True)
class Stage:
    """One step of a pipeline as `print(ds)` shows it: a name, its parameters, inputs."""

    name: str
    params: tuple[tuple[str, str], ...] = ()
    inputs: tuple[tuple[Stage, ...], ...] = ()

    def line(self) -> str:
        """The stage on one line, e.g. `shuffle(seed=3)`."""
        params = ", ".join(f"{key}={value}" if key else value for key, value in self.params)
        return f"{self.name}({params})"


def stage(name: str, **params: Any) -> Stage:
    """Builds a `Stage`, showing each parameter with `repr` (functions by name)."""
    return Stage(name, tuple((key, _show(value)) for key, value in params.items()))


def _show(value: Any) -> str:
    if callable(value) and not isinstance(value, type):
        return show_fn(value)
    return repr(value)


def show_fn(fn: object) -> str:
    """A short readable name for a user's function or transform object."""
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


def render(kind: str, stages: Sequence[Stage]) -> str:
    """The pipeline as a readable chain: one stage a line, each input of a mix indented.

    Example:
        >>> print(render("MapDataset", [stage("source", n=3), stage("shuffle", seed=1)]))
        MapDataset
          source(n=3)
          .shuffle(seed=1)
    """
    return "\n".join([kind, *_lines(stages, "  ")])


def _lines(stages: Sequence[Stage], indent: str) -> list[str]:
    lines = []
    for number, item in enumerate(stages):
        lines.append(f"{indent}{'.' if number else ''}{item.line()}")
        for branch_number, branch in enumerate(item.inputs):
            label = f"[{branch_number}] "
            branch_lines = _lines(branch, indent + "  " + " " * len(label))
            lines.append(f"{indent}  {label}{branch_lines[0].lstrip()}")
            lines.extend(branch_lines[1:])
    return lines


def derive_seed(seed: int, salt: int) -> int:
    """A seed for the `salt`-th stage of a pipeline whose default seed is `seed`.

    Stable across processes, platforms and versions (BLAKE2b of both numbers).

    Example:
        >>> derive_seed(0, 1) == derive_seed(0, 1) != derive_seed(0, 2)
        True
    """
    data = f"chute.stage_seed:{seed}:{salt}".encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") & _MASK64
