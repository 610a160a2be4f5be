"""Names of a package loaded on first use: what is slow to import waits until it is used.

A package lists which of its names come from which module (`lazy_attributes`), and the
function returned is its module-level `__getattr__` (PEP 562): the first use of such a
name imports its module and keeps the value, so that importing the package stays fast
(pyarrow, array_record, jax, orbax load only for those who read their formats or
devices).

Example:
    >>> import sys, types
    >>> package = types.ModuleType("docs_lazy")
    >>> sys.modules["docs_lazy"] = package
    >>> package.__getattr__ = lazy_attributes("docs_lazy", {"dumps": "json"})
    >>> package.dumps([1])
    '[1]'
    >>> "dumps" in vars(package)  # Kept: the next use is a plain attribute.
    True
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(module: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` of package `module` that loads each of `names` from its module.

    Args:
        module: the package's `__name__`.
        names: name -> the module it is defined in (`".x"` relative to the package, or an
            absolute module name).
    """

    def __getattr__(name: str) -> Any:
        source = names.get(name)
        if source is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source, module), name)
        setattr(sys.modules[module], name, value)
        return value

    return __getattr__
