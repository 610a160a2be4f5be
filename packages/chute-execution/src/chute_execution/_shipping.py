"""Sending user code to worker processes: by reference where a worker can import it.

A worker process starts without the consumer's main script (it never runs it again),
so code defined there (a script's top level, a notebook cell, `python -c`, stdin)
cannot be found by name. Neither can code in a module that was loaded from a path a
worker would not search (a test module imported by file name, a module made with
`exec`). Functions and classes of such modules travel *by value* (their code, with
cloudpickle); those of importable modules travel *by reference* (module and name), as
plain pickle sends them. Objects that cannot travel at all (a lock, an open file, a
generator, a socket) are refused before any worker starts, with the stage and the
attribute path that holds them.

This is the one serializer for what a worker runs; every executor uses it.
"""

from __future__ import annotations

import functools
import importlib
import io
import os
import pickle
import sys
import threading
import types
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import cloudpickle

from chute_core import ChuteError

__all__ = ["ShippingError", "importable_in_workers", "ship", "unship"]


class ShippingError(ChuteError, TypeError):
    """Part of a pipeline cannot be sent to worker processes (it does not pickle).

    The message names the stage and the attribute path of the object that cannot
    travel, and says what to do instead.

    Example:
        >>> issubclass(ShippingError, TypeError)
        True
    """


_MAIN_NAMES = frozenset({"__main__", "__mp_main__"})


def _real(paths: Any) -> set[str]:
    return {os.path.realpath(path) for path in paths or ()}


def _found_again(name: str, spec: Any) -> bool:
    """Whether a fresh import of module `name` would find what `spec` found."""
    parent, _, _ = name.rpartition(".")
    path: Sequence[str] | None = None
    if parent:
        if not importable_in_workers(parent):
            return False
        path = getattr(sys.modules[parent], "__path__", None)
        if path is None:
            return False
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            found = find_spec(name, path, None)
        except Exception:  # A finder that cannot answer (e.g. a tool's own importer).
            continue
        if found is None:
            continue
        if spec.origin is None:  # A namespace package: the same folders.
            locations = _real(spec.submodule_search_locations)
            return found.origin is None and locations <= _real(found.submodule_search_locations)
        return found.origin is not None and _real([found.origin]) == _real([spec.origin])
    return False


def importable_in_workers(name: str) -> bool:
    """Whether a worker process can import module `name` and find what it defines.

    True for built-in and installed modules and for modules on `sys.path` (workers
    get the consumer's `sys.path`); false for the main script, a notebook, and a
    module loaded from a file that the import system would not find by its name.

    Example:
        >>> importable_in_workers("json"), importable_in_workers("__main__")
        (True, False)
    """
    if name in _MAIN_NAMES:
        return False
    module = sys.modules.get(name)
    if module is None:
        return False
    spec = getattr(module, "__spec__", None)
    if spec is None:
        return False
    if spec.origin in ("built-in", "frozen"):
        return True
    # Asking the finders costs file-system calls (a few ms for a plan's modules, at each
    # resharded restore): the answer is kept while what it was found from stays (see
    # `_lookup`) and the module's file is there. A file added ahead of it on an
    # unchanged `sys.path` (which would shadow it in a new process) is not noticed.
    parent, _, _ = name.rpartition(".")
    looked_up = _lookup(parent, spec)
    known = _IMPORTABLE.get(name)
    there = spec.origin is None or os.path.exists(spec.origin)
    if known is not None and known[0]() is module and known[1] == looked_up and there:
        found = known[2]
    else:
        found = _found_again(name, spec)
        _IMPORTABLE[name] = (weakref.ref(module), looked_up, found)
    return found and (not parent or importable_in_workers(parent))


def _lookup(parent: str, spec: Any) -> tuple[Any, ...]:
    """What `_found_again` reads besides the files.

    The module's spec, `sys.path`, the finders, and the parent package and its `__path__`.
    """
    package = sys.modules.get(parent) if parent else None
    folders = tuple(getattr(package, "__path__", None) or ())
    return spec, tuple(sys.path), tuple(map(id, sys.meta_path)), id(package), folders


_IMPORTABLE: dict[str, tuple[weakref.ref[Any], tuple[Any, ...], bool]] = {}
"""`importable_in_workers`' answers, by module name: (module, `_lookup`, answer)."""


_REGISTRY_LOCK = threading.Lock()
_FILES = io.FileIO | io.BufferedReader | io.BufferedWriter | io.BufferedRandom | io.TextIOWrapper


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]
    """cloudpickle, with the modules that workers cannot import sent by value.

    cloudpickle already sends `__main__`'s functions and classes by value; this
    also sends those of modules that are loaded here but not importable there
    (registering them with cloudpickle while it pickles), and collects each
    top-level class it sent by value in `classes` (see `unship`).
    """

    def __init__(self, file: Any) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.by_value: dict[str, bool] = {}
        self.registered: list[str] = []
        self.classes: list[type] = []

    @staticmethod
    def _registers(name: str) -> bool:
        """Whether module `name` must be registered with cloudpickle to go by value."""
        if name in _MAIN_NAMES or name not in sys.modules:
            return False  # cloudpickle sends these by value by itself.
        return name not in cloudpickle.list_registry_pickle_by_value()

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, _FILES):  # cloudpickle would send a file's whole contents.
            raise TypeError(f"cannot pickle an open file ({type(obj).__name__})")
        if isinstance(obj, type | types.FunctionType):
            name = getattr(obj, "__module__", None)
            if isinstance(name, str):
                by_value = self.by_value.get(name)
                if by_value is None:
                    by_value = self.by_value[name] = not importable_in_workers(name)
                    if by_value and self._registers(name):
                        cloudpickle.register_pickle_by_value(sys.modules[name])
                        self.registered.append(name)
                if by_value and isinstance(obj, type) and "." not in obj.__qualname__:
                    self.classes.append(obj)
        return super().reducer_override(obj)


def _dumps(obj: Any) -> bytes:
    """`(obj, classes sent by value)` pickled for a worker, in one pass.

    The list of classes is pickled after `obj`, by which time the pickler has filled
    it; each class in it is then a reference to the one already in `obj`.
    """
    with _REGISTRY_LOCK:
        buffer = io.BytesIO()
        pickler = _Pickler(buffer)
        try:
            pickler.dump((obj, pickler.classes))
        finally:
            for name in pickler.registered:
                cloudpickle.unregister_pickle_by_value(sys.modules[name])
        return buffer.getvalue()


def ship(obj: Any, parts: Sequence[tuple[str, Any]] = (), caller: str = "mp_prefetch") -> bytes:
    """`obj` as bytes that a worker process turns back into it with `unship`.

    Args:
        obj: what the workers run (a plan, a worker init function).
        parts: `(stage name, object)` pairs that make up `obj`, to name the stage
            that holds an object which cannot travel.
        caller: what the user called (`mp_prefetch`, `DataLoader(worker_count=2)`), to
            start error messages with.

    Raises:
        ShippingError: something in `obj` cannot be pickled; the message names the
            stage and the attribute path that holds it.

    Example:
        >>> double = lambda x: 2 * x  # Found by no import: it travels by value.
        >>> unship(ship(double))(21)
        42
    """
    try:
        return _dumps(obj)
    except Exception as error:
        raise _refusal(obj, parts, caller, error) from error


def unship(data: bytes) -> Any:
    """What `ship` sent; classes sent by value are made findable by name here too.

    A class defined in the consumer's `__main__` (say a record dataclass) is put into
    this process's module of the same name, so that elements made of it pickle by
    reference on their way back and arrive as instances of the consumer's own class.

    Example:
        >>> unship(ship({"a": [1, 2]}))
        {'a': [1, 2]}
    """
    obj, classes = pickle.loads(data)
    for cls in classes:
        module = _module(cls.__module__)
        if not hasattr(module, cls.__qualname__):
            setattr(module, cls.__qualname__, cls)
    return obj


def _module(name: str) -> types.ModuleType:
    """Module `name` of this process, or a stand-in for it (and for its packages).

    Pickle imports a class's module, and with it each package above it, before it
    looks the class up: a module that cannot be imported here gets an empty one.
    """
    module = sys.modules.get(name)
    if module is not None:
        return module
    parent, _, _ = name.rpartition(".")
    if parent:
        try:
            importlib.import_module(parent)
        except ImportError:
            _module(parent)
    module = types.ModuleType(name, "Stands in for a module that this process cannot import.")
    sys.modules[name] = module
    return module


# --- naming what cannot travel ---------------------------------------------------------

_MAX_DEPTH = 12


def _children(obj: Any) -> Iterator[tuple[str, Any]]:
    """The objects `obj` holds, each with the path from `obj` to it."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield f"[{key!r}]", value
        return
    if isinstance(obj, list | tuple | set | frozenset):
        for index, value in enumerate(obj):
            yield f"[{index}]", value
        return
    if isinstance(obj, functools.partial):
        yield ".func", obj.func
        for index, value in enumerate(obj.args):
            yield f".args[{index}]", value
        for key, value in obj.keywords.items():
            yield f".keywords[{key!r}]", value
        return
    if isinstance(obj, types.MethodType):
        yield ".__self__", obj.__self__
        yield ".__func__", obj.__func__
        return
    if isinstance(obj, types.FunctionType):
        code = obj.__code__
        for name, cell in zip(code.co_freevars, obj.__closure__ or (), strict=False):
            try:
                yield f".<closure variable {name}>", cell.cell_contents
            except ValueError:
                continue
        for name in code.co_names:
            if name in obj.__globals__:
                yield f".__globals__[{name!r}]", obj.__globals__[name]
        for index, value in enumerate(obj.__defaults__ or ()):
            yield f".__defaults__[{index}]", value
        for key, value in (obj.__kwdefaults__ or {}).items():
            yield f".__kwdefaults__[{key!r}]", value
        return
    state = getattr(obj, "__dict__", None)
    if isinstance(state, dict):
        for name, value in state.items():
            yield f".{name}", value
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(obj, name) and name not in ("__dict__", "__weakref__"):
                yield f".{name}", getattr(obj, name)


def _pickles(obj: Any) -> bool:
    if isinstance(obj, types.ModuleType):
        return True  # Sent by reference (or not at all): never the culprit.
    try:
        _dumps(obj)
    except Exception:
        return False
    return True


def _culprit(obj: Any, path: str, seen: set[int], depth: int = 0) -> tuple[str, Any]:
    """The deepest object under `obj` that does not pickle, and its path."""
    seen.add(id(obj))
    if depth < _MAX_DEPTH:
        for step, child in _children(obj):
            if id(child) in seen or _pickles(child):
                continue
            return _culprit(child, path + step, seen, depth + 1)
    return path, obj


def _refusal(
    obj: Any, parts: Sequence[tuple[str, Any]], caller: str, error: Exception
) -> ShippingError:
    stage, holder = "the pipeline", obj
    for name, part in parts:
        if not _pickles(part):
            stage, holder = name, part
            break
    path, culprit = _culprit(holder, "", set())
    what = f"{type(culprit).__module__}.{type(culprit).__qualname__}"
    where = f"its {path.strip()}" if path else "it"
    return ShippingError(
        f"{caller}: {stage} cannot be sent to worker processes: {where} is a {what}, which "
        f"cannot be pickled ({type(error).__name__}: {error}). A lock, an open file, a "
        "socket or a generator cannot travel to another process: create it in the worker "
        "instead (on first use, or in worker_init_fn), or leave it out of the pickled state "
        "with __getstate__/__setstate__."
    )
