"""Structural descriptions of pipelines: what a fingerprint hashes (never a `repr`).

An iterator describes its pipeline through the attribute `chute_pipeline`: a
zero-argument callable returning `{"kind": ..., "stages": [{"op": ..., "params": {...},
"inputs": [[stage, ...], ...]}, ...]}` whose parameter values may be any objects
(`chute.IterDataset` and `chute.DataLoader` iterators carry one). `describe_pipeline`
turns the values into JSON that identifies them by structure:

- numbers, strings, None, lists, dicts and ranges as themselves; NumPy arrays by dtype,
  shape and a hash of their bytes (arrays over 1 MiB by dtype and shape only);
- functions and classes by `module.qualname`; `functools.partial` by its function and
  arguments; bound methods by their function and object;
- an object whose class defines `__chute_identity__()` by what that returns: the
  owner says what identifies the data (a bucket source: its objects' URLs, sizes and
  versions); None leaves the object out (`StorageOptions`: how data is reached, and
  credentials, never identify it, so they never reach a checkpoint);
- dataclasses by class and fields; other objects by class, length, data files (name
  and size) and identity-like attributes (ranges, arrays, files, dataclasses, chute
  objects); transform objects also by their public numbers, strings and flags, while
  sources never by such scalars (counters and flags that change while reading);
- performance knobs (the parameters a stage's declared traits list as performance,
  `chute_core.StageTraits.performance`; for an op nobody declared,
  `PERFORMANCE_PARAMETERS`: worker and thread counts, buffer sizes) are left out: they
  never change the elements, so a checkpoint restores across them.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import hashlib
import inspect
import json
import math
import os
import sys
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from chute_core import StageTraits, is_declared, stage_traits
from chute_samplers import upstream_iterators

__all__ = [
    "PERFORMANCE_PARAMETERS",
    "PIPELINE_ATTRIBUTE",
    "STAGE_TRAITS_ATTRIBUTE",
    "describe_pipeline",
    "describe_value",
    "fingerprint",
    "stage_traits_of",
]

PIPELINE_ATTRIBUTE = "chute_pipeline"
"""The iterator attribute holding a zero-argument callable that describes its pipeline."""

STAGE_TRAITS_ATTRIBUTE = "chute_stage_traits"
"""The iterator attribute (beside `chute_pipeline`) mapping ops of its pipeline to what
they do in it (`chute_core.StageTraits`), where that depends on the pipeline: a
`chute.DataLoader`'s `operation` stages keep positions unless one is a flat map. A
checkpoint carries them with the declared traits (never in its fingerprint)."""

PERFORMANCE_PARAMETERS = frozenset(
    {
        "buffer_size",
        "cpu_buffer_size",
        "device",  # to_device: where batches go, not which (differs with the host count).
        "device_buffer_size",
        "lockstep",
        "num_threads",
        "num_workers",
        "per_worker_buffer_size",
        "read_options",
        "rows",  # batch(sharding=...): this process's part of each global batch.
        "worker_buffer_size",
        "worker_count",
    }
)
"""Stage parameters that never change the elements; left out of descriptions."""

_PLAIN = (int, float, str, bool, type(None))
_SMALL_ARRAY = 1 << 20
_LONG_SEQUENCE = 64
_MAX_DEPTH = 4
_MAX_WRAPPERS = 16
_CACHE: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_IDENTITY = "__chute_identity__"
_NO_IDENTITY = object()


def describe_pipeline(iterator: object) -> dict[str, Any]:
    """The JSON structural description of the pipeline that `iterator` runs.

    An iterator without a description that wraps one (its one parent, found by
    `chute_samplers.upstream_iterators`: an attribute that is a checkpointable
    iterator) is described as the wrapped pipeline plus a stage naming the wrapper's
    class; any other iterator by its class only. Descriptions are computed once per
    iterator (sources do not change while read).

    Example:
        >>> import chute
        >>> it = iter(chute.MapDataset.range(4).shuffle(seed=3).to_iter_dataset())
        >>> [(s["op"], s["params"]) for s in describe_pipeline(it)["stages"]][:2]
        [('source', {'source': {'class': 'chute_sources.RangeSource', 'len': 4, \
'attributes': {'_range': {'range': [0, 4, 1]}}}}), ('shuffle', {'seed': 3})]
    """
    try:
        cached = _CACHE.get(iterator)
    except TypeError:  # Not weakly referenceable or not hashable: no cache.
        cached = None
    if cached is None:
        cached = _describe_iterator(iterator, 0)
        try:
            _CACHE[iterator] = cached
        except TypeError:
            pass
    return copy.deepcopy(cached)


def stage_traits_of(iterator: object) -> dict[str, StageTraits]:
    """The traits `iterator`'s pipeline gives its own ops (`STAGE_TRAITS_ATTRIBUTE`).

    Found on the iterator that describes the pipeline, through wrappers as
    `describe_pipeline` finds it; empty when it gives none.

    Example:
        >>> import chute
        >>> stage_traits_of(iter(chute.MapDataset.range(3).to_iter_dataset()))
        {}
    """
    for _ in range(_MAX_WRAPPERS + 1):
        if getattr(iterator, PIPELINE_ATTRIBUTE, None) is not None:
            found = getattr(iterator, STAGE_TRAITS_ATTRIBUTE, None)
            if not isinstance(found, Mapping):
                return {}
            return {
                str(op): traits for op, traits in found.items() if isinstance(traits, StageTraits)
            }
        inner = _wrapped(iterator)
        if inner is None:
            return {}
        iterator = inner
    return {}


def _describe_iterator(iterator: object, depth: int) -> dict[str, Any]:
    make = getattr(iterator, PIPELINE_ATTRIBUTE, None)
    if make is None:
        inner = _wrapped(iterator)
        if inner is None or depth >= _MAX_WRAPPERS:
            return {"kind": "iterator", "class": _qualified(type(iterator)), "stages": []}
        described = _describe_iterator(inner, depth + 1)
        wrapper = {"op": "wrapper", "params": {"class": _qualified(type(iterator))}}
        described["stages"].append(wrapper)
        return described
    raw = make() if callable(make) else make
    if not isinstance(raw, Mapping) or not isinstance(raw.get("stages"), list | tuple):
        raise TypeError(
            f"{type(iterator).__name__}.{PIPELINE_ATTRIBUTE} must describe the pipeline as "
            f"{{'kind': ..., 'stages': [...]}}, got {raw!r:.200}."
        )
    return {"kind": str(raw.get("kind", "pipeline")), "stages": _stages(raw["stages"])}


def _wrapped(iterator: object) -> object | None:
    """The one iterator `iterator` reads from (`chute_samplers.upstream_iterators`)."""
    parents = upstream_iterators(iterator)
    return parents[0] if len(parents) == 1 else None


def _stages(stages: Any) -> list[dict[str, Any]]:
    described = []
    for item in stages:
        params = item.get("params", {})
        op = str(item["op"])
        performance = stage_traits(op).performance if is_declared(op) else PERFORMANCE_PARAMETERS
        entry: dict[str, Any] = {
            "op": op,
            "params": {
                str(key): describe_value(value)
                for key, value in dict(params).items()
                if key not in performance
            },
        }
        inputs = item.get("inputs", ())
        if inputs:
            entry["inputs"] = [_stages(branch) for branch in inputs]
        described.append(entry)
    return described


def fingerprint(pipeline: Mapping[str, Any]) -> str:
    """A hash of a JSON pipeline description (hex BLAKE2b of its canonical JSON).

    Example:
        >>> fingerprint({"kind": "x", "stages": []}) == fingerprint({"stages": [], "kind": "x"})
        True
    """
    text = json.dumps(pipeline, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def describe_value(value: Any, depth: int = 0) -> Any:
    """A JSON value that identifies `value` by structure (see the module docs).

    Example:
        >>> import functools, operator
        >>> describe_value(functools.partial(operator.add, 1))
        {'partial': {'function': 'operator.add'}, 'args': [1], 'keywords': {}}
        >>> describe_value(range(2, 9, 3))
        {'range': [2, 9, 3]}
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _describe_path(value) if _is_data_file(value) else value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, np.generic):
        return describe_value(value.item(), depth)
    if isinstance(value, np.ndarray):
        return _describe_array(value)
    if isinstance(value, np.dtype):
        return {"dtype": str(value)}
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        return {"bytes": len(data), "blake2b": hashlib.blake2b(data, digest_size=16).hexdigest()}
    if isinstance(value, range):
        return {"range": [value.start, value.stop, value.step]}
    if isinstance(value, os.PathLike):
        return _describe_path(os.fspath(value))
    if depth > _MAX_DEPTH:
        return {"class": _qualified(type(value))}
    if isinstance(value, list | tuple):
        return _describe_sequence(value, depth)
    if isinstance(value, Mapping):
        return {str(key): describe_value(item, depth + 1) for key, item in value.items()}
    if isinstance(value, set | frozenset):
        items = [describe_value(item, depth + 1) for item in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, enum.Enum):
        return {"enum": _qualified(type(value)), "name": value.name}
    identity = _declared_identity(value)
    if identity is not _NO_IDENTITY:
        described: dict[str, Any] = {"class": _qualified(type(value))}
        if identity is not None:
            described["identity"] = describe_value(identity, depth + 1)
        return described
    return _describe_object(value, depth)


def _declared_identity(value: Any) -> Any:
    """What `value.__chute_identity__()` says identifies it; `_NO_IDENTITY` if undeclared."""
    declared = getattr(type(value), _IDENTITY, None)
    if declared is None or isinstance(value, type):
        return _NO_IDENTITY
    return declared(value)


def _describe_object(value: Any, depth: int) -> Any:
    if isinstance(value, functools.partial):
        return {
            "partial": describe_value(value.func, depth + 1),
            "args": [describe_value(arg, depth + 1) for arg in value.args],
            "keywords": {
                key: describe_value(arg, depth + 1) for key, arg in value.keywords.items()
            },
        }
    if isinstance(value, type):
        return {"class": _qualified(value)}
    if inspect.ismethod(value):
        return {
            "method": _qualified(value.__func__),
            "self": describe_value(value.__self__, depth + 1),
        }
    if callable(value) and hasattr(value, "__qualname__"):
        return {"function": _qualified(value)}
    if dataclasses.is_dataclass(value):
        fields = {
            field.name: describe_value(getattr(value, field.name), depth + 1)
            for field in dataclasses.fields(value)
        }
        return {"class": _qualified(type(value)), "fields": fields}
    described: dict[str, Any] = {"class": _qualified(type(value))}
    if hasattr(type(value), "__len__"):
        try:
            described["len"] = len(value)
        except Exception:  # An endless or closed source: its class identifies it.
            pass
    source = hasattr(type(value), "__getitem__") and hasattr(type(value), "__len__")
    attributes = {
        name: describe_value(item, depth + 1)
        for name, item in sorted(_attributes(value).items())
        if (_declared_identity(item) is not None and _identity_like(item, depth))
        or (not source and not name.startswith("_") and isinstance(item, _PLAIN))
    }
    if attributes:
        described["attributes"] = attributes
    return described


def _attributes(value: Any) -> dict[str, Any]:
    found = dict(getattr(value, "__dict__", {}))
    for cls in type(value).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if name not in found and hasattr(value, name):
                found[name] = getattr(value, name)
    return {name: item for name, item in found.items() if not name.startswith("__")}


def _identity_like(value: Any, depth: int) -> bool:
    """Whether an attribute says which data an object reads (not how far it got)."""
    if _declared_identity(value) is not _NO_IDENTITY:
        return True
    if isinstance(value, range | np.ndarray | os.PathLike):
        return True
    if isinstance(value, str):
        return _is_data_file(value)
    if isinstance(value, list | tuple):
        return bool(value) and all(_identity_like(item, depth) for item in value[:_LONG_SEQUENCE])
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return True
    module = type(value).__module__ or ""
    return depth < _MAX_DEPTH and module.split(".")[0].startswith("chute")


def _is_data_file(text: str) -> bool:
    return os.sep in text and not text.startswith("/dev/shm") and os.path.isfile(text)


def _describe_path(path: str) -> Any:
    if path.startswith("/dev/shm") or not os.path.isfile(path):
        return {"path": os.path.basename(path)}
    return {"file": os.path.basename(path), "size": os.path.getsize(path)}


def _describe_sequence(value: list[Any] | tuple[Any, ...], depth: int) -> Any:
    if len(value) <= _LONG_SEQUENCE:
        if all(isinstance(item, str) and _is_data_file(item) for item in value) and value:
            return [_describe_path(item) for item in value]
        return [describe_value(item, depth + 1) for item in value]
    # Long: an in-memory source or a selector. Scalars are hashed (cheaply, as JSON);
    # records are identified by type and length, like any source.
    described: dict[str, Any] = {"sequence": type(value).__name__, "len": len(value)}
    if all(isinstance(item, _PLAIN) for item in value):
        text = json.dumps(value).encode()
        described["blake2b"] = hashlib.blake2b(text, digest_size=16).hexdigest()
    return described


def _describe_array(array: np.ndarray[Any, Any]) -> dict[str, Any]:
    described: dict[str, Any] = {"array": str(array.dtype), "shape": list(array.shape)}
    if array.nbytes <= _SMALL_ARRAY and array.dtype != object:
        data = np.ascontiguousarray(array).tobytes()
        described["blake2b"] = hashlib.blake2b(data, digest_size=16).hexdigest()
    return described


def _exported_by(module: str, name: str, obj: Any) -> bool:
    found = sys.modules.get(module)
    return found is not None and "." not in name and getattr(found, name, None) is obj


def _qualified(obj: Any) -> str:
    """`module.qualname`, by the shortest public module that exports `obj`.

    So `chute_sources._range.RangeSource` is `chute_sources.RangeSource` and
    `_operator.neg` is `operator.neg`: moving code between private modules keeps
    fingerprints, hence checkpoints, valid. What moved from `chute_sources` to
    `chute_core` (which `chute_sources` still exports) keeps its `chute_sources` name.
    """
    module = getattr(obj, "__module__", None) or "?"
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    name = name or type(obj).__qualname__
    if module.startswith("chute_core.") and _exported_by("chute_sources", name, obj):
        return f"chute_sources.{name}"  # Its name before chute_core: checkpoints stay valid.
    parts = module.split(".")
    candidates = [".".join(parts[:size]) for size in range(1, len(parts))]
    candidates.append(module.lstrip("_"))
    for candidate in candidates:
        found = sys.modules.get(candidate)
        if found is not None and "." not in name and getattr(found, name, None) is obj:
            return f"{candidate}.{name}"
    return f"{module}.{name}"
