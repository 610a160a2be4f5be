"""An import-linter contract: no package imports another package's private modules.

chute's packages talk to each other through public names only: a package's own
namespace (`chute_sources`) and its deliberate seams (`chute_sources.internal`). A
module whose path has a segment starting with `_` below the package
(`chute_core._shm`, `chute_execution._transport.slab`) is private to its package;
this contract lists every import of one from any other root package. The layers
contract cannot say this: it checks which layers import which, not through which door.

Configured in pyproject.toml as the contract type `private_modules`; `lint-imports`
puts the repository root on `sys.path`, which is how it finds this module.
"""

from __future__ import annotations

import grimp
from importlinter import Contract, ContractCheck, fields, output

__all__ = ["PrivateModulesContract"]


def _is_private(module: str) -> bool:
    return any(part.startswith("_") and part != "__init__" for part in module.split(".")[1:])


class PrivateModulesContract(Contract):
    """Forbids imports of `package._private...` from outside `package`.

    Configuration options:
        - packages: the root packages whose private modules are protected.
    """

    type_name = "private_modules"
    packages = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        """Lists every import of a private module from outside its package."""
        illegal: list[tuple[str, str, tuple[int, ...]]] = []
        for package in self.packages:  # type: ignore[attr-defined]
            for module in sorted(graph.find_descendants(package)):
                if not _is_private(module):
                    continue
                for importer in sorted(graph.find_modules_that_directly_import(module)):
                    if importer == package or importer.startswith(package + "."):
                        continue
                    details = graph.get_import_details(importer=importer, imported=module)
                    lines = tuple(detail["line_number"] for detail in details)
                    illegal.append((importer, module, lines))
        return ContractCheck(kept=not illegal, metadata={"illegal": illegal})

    def render_broken_contract(self, check: ContractCheck) -> None:
        """Prints each illegal import with its line numbers."""
        output.print_error("Imports of another package's private modules:", bold=False)
        output.new_line()
        for importer, module, lines in check.metadata["illegal"]:
            where = ", ".join(map(str, lines))
            output.print_error(f"- {importer} -> {module} (l.{where})", bold=False)
        output.new_line()
        output.print("Import the package's public names, or its `internal` seams module, instead.")
