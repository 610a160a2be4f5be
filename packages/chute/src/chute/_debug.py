"""Process-wide switches for looking at pipelines while they run (`chute.grain.config`).

Grain users turn on its debug mode and pipeline visualization with
`grain.config.update(...)`; `chute.grain.config` maps those flags onto these switches,
which every iterator made afterwards reads:

- `stats`: each iterator times its stages, as `ds.iter(stats=True)` does, and logs its
  per-stage summary (`Stats`) to the `chute` logger at INFO: every `LOG_EVERY` seconds
  while it runs, and once when it ends.
- `pipeline_to`: each new iterator shows its pipeline (the stages, as `repr(ds)` gives
  them): logged to the `chute` logger at INFO when it is `""`, written to a new file
  `pipeline-<pid>-<n>.txt` in that folder otherwise.

Iterators made before a switch changes keep what they were made with.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
from collections.abc import Sequence

from ._pipeline import Stage, render

__all__ = ["LOG_EVERY", "LOGGER", "SWITCHES", "Switches", "show_pipeline"]

LOGGER = logging.getLogger("chute")
"""Where the switches' output goes (INFO)."""

LOG_EVERY = 60.0
"""Seconds between two summaries of a running iterator (Grain's debug mode's period)."""


@dataclasses.dataclass
class Switches:
    """What every new iterator of this process shows (see the module docstring)."""

    stats: bool = False
    pipeline_to: str | None = None


SWITCHES = Switches()
"""The process's switches; `chute.grain.config.update` sets them."""

_files = itertools.count()


def show_pipeline(kind: str, stages: Sequence[Stage]) -> None:
    """Logs or writes the pipeline of a new iterator, if `SWITCHES.pipeline_to` says so.

    Example:
        >>> from chute._pipeline import stage
        >>> show_pipeline("MapDataset", [stage("source", n=3)])  # Off: nothing happens.
    """
    where = SWITCHES.pipeline_to
    if where is None:
        return
    text = render(kind, stages)
    if where == "":
        LOGGER.info("chute pipeline:\n%s", text)
        return
    os.makedirs(where, exist_ok=True)
    path = os.path.join(where, f"pipeline-{os.getpid()}-{next(_files)}.txt")
    with open(path, "x", encoding="utf-8") as file:
        file.write(text + "\n")
    LOGGER.info("chute pipeline written to %s", path)
