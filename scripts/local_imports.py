"""Fails when a product module imports inside a function without a comment saying why.

A function-local import hides a dependency (and an import cycle) from the reader and from
import-linter's picture of the layers. It is allowed where there is a reason, given by a comment
on the import's first line or on the line just above: AppConfig.ready() registering signals,
a dependency heavy to load and rarely used, a real cycle that is documented. Run by
``make lint``; prints the count and each import without a reason, and exits 1 if there is any.
``-v`` also lists the imports that have a reason.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from mypy_strict_checked import ROOT, product_modules

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
IMPORTS = (ast.Import, ast.ImportFrom)


def has_comment(lines: list[str], lineno: int) -> bool:
    """Whether 1-based ``lineno`` carries a comment, or the line just above is one."""
    above = lines[lineno - 2].strip() if lineno >= 2 else ""
    return "#" in lines[lineno - 1] or above.startswith("#")


def local_imports(tree: ast.AST, lines: list[str]) -> list[tuple[ast.stmt, bool]]:
    """(import, has a reason) for every import inside a function of ``tree``, at any depth.

    A reason is a comment on the import's line or just above it; one above a block of
    imports (consecutive statements, as in AppConfig.ready()) covers the block.
    """
    found: list[tuple[ast.stmt, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for field in ("body", "orelse", "finalbody", "handlers"):
            block_reason = False
            previous: ast.AST | None = None
            statements = getattr(node, field, None)
            for child in statements if isinstance(statements, list) else []:
                if in_function and isinstance(child, IMPORTS):
                    adjacent = isinstance(previous, IMPORTS)
                    reason = has_comment(lines, child.lineno) or (adjacent and block_reason)
                    block_reason = reason
                    found.append((child, reason))
                previous = child
        for child in ast.iter_child_nodes(node):
            visit(child, in_function or isinstance(child, FUNCTIONS))

    visit(tree, False)
    return found


def scan(path: Path) -> list[tuple[int, str, bool]]:
    """(line, import text, has a reason) for each function-local import in ``path``."""
    lines = path.read_text().splitlines()
    return [
        (node.lineno, lines[node.lineno - 1].strip(), reason)
        for node, reason in local_imports(ast.parse("\n".join(lines)), lines)
    ]


def main(argv: list[str]) -> int:
    unexplained = explained = 0
    for path in sorted(product_modules().values()):
        for lineno, text, reason in scan(path):
            where = f"{path.relative_to(ROOT)}:{lineno}: {text}"
            if reason:
                explained += 1
                if "-v" in argv:
                    print(f"  with a reason: {where}")
            else:
                unexplained += 1
                print(f"function-local import without a why-comment: {where}")
    print(f"function-local imports: {unexplained} without a reason, {explained} with one")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
