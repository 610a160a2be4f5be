"""A slice `[i::n]` as a shard stage: Grain's way to shard a `MapDataset`, `ds[i::n]`.

A slice stage (`StageTraits.stride` names its parameter, which shows the slice as
`[start:stop:step]`) with start `i`, no stop and step `n > i` reads positions `i, i + n,
...`: shard `i` of `n` by stride, as `.shard(i, n)` does. Resharding gives such a stage
the shard parameters `STRIDE` (names no op has), and reads and writes its index and
count in the slice's text.

Example:
    >>> stride_of({"op": "slice", "params": {"": "[1::4]"}}, ""), stride_text(0, 3)
    ((1, 4), '[0::3]')
    >>> stride_of({"op": "slice", "params": {"": "[1:9:4]"}}, "") is None  # A stop: no shard.
    True
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["STRIDE", "stride_of", "stride_text"]

STRIDE = ("[index]", "[count]")
"""The shard parameter names resharding gives a stride slice (its text holds both)."""

_SHARD = re.compile(r"\[(\d+)::(\d+)\]")


def stride_of(stage: Mapping[str, Any], name: str) -> tuple[int, int] | None:
    """`(i, n)` if the stage's parameter `name` shows a slice `[i::n]` with `0 <= i < n`."""
    params = stage.get("params")
    text = params.get(name) if isinstance(params, Mapping) else None
    found = _SHARD.fullmatch(text) if isinstance(text, str) and len(text) < 64 else None
    if found is None:
        return None
    index, count = int(found[1]), int(found[2])
    return (index, count) if index < count else None


def stride_text(index: int | None, count: int) -> str:
    """The slice text of shard `index` of `count` (`[*::count]`: the index blanked)."""
    return f"[{'*' if index is None else index}::{count}]"
