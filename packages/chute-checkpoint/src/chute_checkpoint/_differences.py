"""What differs between two pipeline descriptions: the lines of a `PipelineMismatchError`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._document_shape import check_pipeline

__all__ = ["pipeline_differences"]


def pipeline_differences(
    saved: Mapping[str, Any], current: Mapping[str, Any], limit: int = 5
) -> list[str]:
    """What differs between two pipeline descriptions, one line each (at most `limit`).

    Raises:
        CheckpointFormatError: a description is not of the shape `describe_pipeline`
            gives (the message names the stage and what is wrong).

    Example:
        >>> a = {"kind": "Loader", "stages": [{"op": "resize", "params": {"size": 1}}]}
        >>> b = {"kind": "Loader", "stages": [{"op": "resize", "params": {"size": 2}}]}
        >>> pipeline_differences(a, b)
        ["stage 0 (resize): parameter 'size' differs: the checkpoint has 1, this pipeline has 2"]
    """
    check_pipeline(saved, "the checkpoint")
    check_pipeline(current, "this pipeline")
    found: list[str] = []
    for key in ("kind", "class"):
        if saved.get(key) != current.get(key):
            found.append(
                f"the pipeline {key} differs: the checkpoint has {_show(saved.get(key))}, this "
                f"pipeline has {_show(current.get(key))}"
            )
    _diff_stages(list(saved.get("stages", [])), list(current.get("stages", [])), "", found)
    return found[:limit]


def _diff_stages(saved: list[Any], current: list[Any], where: str, found: list[str]) -> None:
    for number, (old, new) in enumerate(zip(saved, current, strict=False)):
        if old.get("op") != new.get("op"):
            found.append(
                f"{where}stage {number}: the checkpoint has {old.get('op')!r}, this pipeline "
                f"has {new.get('op')!r}"
            )
            return  # The stages after a changed one would all be reported; stop here.
        label = f"{where}stage {number} ({new.get('op')})"
        old_params, new_params = old.get("params", {}), new.get("params", {})
        for key in sorted(set(old_params) | set(new_params)):
            at = ""
            if key not in old_params or key not in new_params:
                before = _show(old_params[key]) if key in old_params else "no such parameter"
                after = _show(new_params[key]) if key in new_params else "no such parameter"
            elif old_params[key] != new_params[key]:
                at, before, after = _first_difference(old_params[key], new_params[key])
            else:
                continue
            found.append(
                f"{label}: parameter {key!r} differs{f' at {at}' if at else ''}: the "
                f"checkpoint has {before}, this pipeline has {after}"
            )
        old_inputs, new_inputs = old.get("inputs", []), new.get("inputs", [])
        if len(old_inputs) != len(new_inputs):
            found.append(
                f"{label}: the checkpoint has {len(old_inputs)} inputs, this pipeline has "
                f"{len(new_inputs)}"
            )
        for branch, (a, b) in enumerate(zip(old_inputs, new_inputs, strict=False)):
            _diff_stages(a, b, f"{label} input [{branch}]: ", found)
    if len(saved) > len(current):
        missing = ", ".join(str(item.get("op")) for item in saved[len(current) :])
        found.append(f"{where}the checkpoint has more stages; this pipeline lacks: {missing}")
    elif len(current) > len(saved):
        extra = ", ".join(str(item.get("op")) for item in current[len(saved) :])
        found.append(f"{where}this pipeline has stages the checkpoint lacks: {extra}")


def _show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 200 else text[:197] + "..."


def _first_difference(old: Any, new: Any, at: str = "") -> tuple[str, str, str]:
    """Where two JSON values first differ (`.key` / `[i]` from the top), and both there.

    So a long description (a source's) shows the field that changed, e.g. an object's
    version, not two texts that look the same up to where they are cut.
    """
    if isinstance(old, dict) and isinstance(new, dict) and old.keys() == new.keys():
        for key in old:
            if old[key] != new[key]:
                return _first_difference(old[key], new[key], f"{at}.{key}")
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for number, (a, b) in enumerate(zip(old, new, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{at}[{number}]")
    return at, _show(old), _show(new)
