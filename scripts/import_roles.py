"""An import-linter contract type (``roles``, registered in pyproject.toml's contract_types):
inside the apps, the modules that serve a request or run a job sit above the rules and reads
they call.

A module is *outer* when a part of its name after its app matches one of ``outer`` (fnmatch
patterns: "views", "*_views", "urls", "tasks", "management", ...): pages, URL maps, the API,
the admin, Celery tasks, management commands, system checks. Every other module of the apps
(services, selectors, models, backends, forms, hooks) is *inner* and imports no outer module,
of its own app or another; outer modules may import anything below them. Only direct imports
count (function-local ones included). ``ignore_imports`` lists exact "importer -> imported"
exceptions; one that no longer happens fails the contract, so the list stays exact.
"""

from __future__ import annotations

from fnmatch import fnmatch

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output


class RoleContract(Contract):
    type_name = "roles"

    containers = fields.ListField(subfield=fields.StringField())
    outer = fields.ListField(subfield=fields.StringField())
    ignore_imports = fields.ListField(subfield=fields.StringField(), required=False)

    def _is_outer(self, module: str) -> bool:
        for container in self.containers:
            if module == container or module.startswith(f"{container}."):
                tail = module[len(container) + 1 :].split(".") if module != container else []
                return any(fnmatch(part, p) for part in tail for p in self.outer)
        return False

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        ignored = {tuple(s.replace(" ", "").split("->")) for s in self.ignore_imports or []}
        found, used = [], set()
        for container in self.containers:
            for importer in sorted(graph.find_descendants(container) | {container}):
                if self._is_outer(importer):
                    continue
                for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                    if not self._is_outer(imported):
                        continue
                    if (importer, imported) in ignored:
                        used.add((importer, imported))
                        continue
                    lines = graph.get_import_details(importer=importer, imported=imported)
                    found.append((importer, imported, [d["line_number"] for d in lines]))
        unused = sorted(ignored - used)
        return ContractCheck(
            kept=not found and not unused,
            metadata={"found": found, "unused": unused},
            ignored_import_count=len(used),
        )

    def render_broken_contract(self, check: ContractCheck) -> None:
        for importer, imported, line_numbers in check.metadata["found"]:
            where = ", ".join(f"l.{n}" for n in line_numbers)
            output.print_error(f"{importer} -> {imported} ({where}): an inner module imports")
            output.print_error("  an outer one (a page, URL map, API, admin, task or command).")
        for importer, imported in check.metadata["unused"]:
            output.print_error(f"Ignored import {importer} -> {imported} no longer happens:")
            output.print_error("  remove it from ignore_imports.")
