"""Names whose libraries are slow to import (array_record, orbax, jax) load on first use."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(module: str, names: dict[str, tuple[str, str]]) -> Callable[[str], Any]:
    """A module `__getattr__` giving `names[name] = (module, attribute)` when first asked.

    Example:
        >>> get = lazy_names("demo", {"sqrt": ("math", "sqrt")})
        >>> get("sqrt")(9.0)
        3.0
    """

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        where, attribute = names[name]
        return getattr(importlib.import_module(where), attribute)

    return __getattr__
