"""Count the places outside the backends that hard-code a workspace kind; exit 1 if any.

A workspace kind is one backend module in one registry (docs/adding-a-workspace-kind.md):
nothing else may branch on "vm", "mig" or "namespace", list them, or key a table by them, or a
fourth kind is silently treated as one of the three. This is the checklist's grep, made exact
and run over the whole tree by `make lint`:

- Python (product apps, the CLI, scripts): a comparison with a kind value ("vm", Kind.MIG...),
  a ``Literal`` of kind values, a dict keyed by two or more kind values, ``kind="vm"`` as a
  keyword or a ``"kind": "vm"`` entry, any ``Kind.<NAME>``, ``Kind.choices``/``Kind.values``,
  and a class named ``Kind`` (a fixed list of kinds);
- templates: a kind value quoted in a tag (``{% if kind == "vm" %}``) and a line naming two
  kinds' attributes (``costs.vm ... costs.mig``: columns per kind);
- our JavaScript (static/, not static/vendor/): a kind value compared or used as a key.

Not read: cloud/, whose "vm" is Azure's (a retail price's category, cloud.prices) and which
may not import workspaces (import-linter), so it cannot know the kinds.
A line may say why it names a kind with a comment ``# kind-ok: <why>`` (the CLI's preset
commands, kept for scripts): it is listed apart and does not fail the check.
Allowed: the backend modules themselves (workspaces/backends/, clusters/backends/), their own
templates (templates/workspaces/kinds/), migrations and tests.

Usage: python scripts/kind_branches.py [-v]   (-v lists every finding)
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = frozenset({"vm", "mig", "namespace"})
KIND_ATTRS = frozenset({"VM", "MIG", "NAMESPACE", "choices", "values"})
PYTHON_DIRS = (
    "agent",
    "api",
    "billing",
    "cli",
    "clusters",
    "common",
    "live",
    "portal",
    "scripts",
    "teams",
    "workspaces",
)
ALLOWED = (
    "workspaces/backends/",
    "clusters/backends/",
    "templates/workspaces/kinds/",
    "scripts/kind_branches.py",
)
TAG = re.compile(r"{[%{](.*?)[%}]}")
QUOTED_KIND = re.compile(r"""["'](vm|mig|namespace)["']""")
KIND_ATTR = re.compile(r"\.(vm|mig|namespace)\b")
JS_KIND = re.compile(
    r"""(?:[=!]==?\s*["'](?:vm|mig|namespace)["'])|(?:["'](?:vm|mig|namespace)["']\s*[=!]==?)"""
    r"""|(?:[{,]\s*["']?(?:vm|mig|namespace)["']?\s*:)"""
)


def _is_kind(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in KINDS
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "Kind"
        and node.attr in {"VM", "MIG", "NAMESPACE"}
    )


def _python(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for operand in operands:
                items = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else []
                if _is_kind(operand) or any(_is_kind(e) for e in items):
                    yield node.lineno, "comparison with a kind"
                    break
        elif isinstance(node, ast.Subscript) and getattr(node.value, "id", "") == "Literal":
            if any(isinstance(c, ast.Constant) and c.value in KINDS for c in ast.walk(node.slice)):
                yield node.lineno, "Literal of kinds"
        elif isinstance(node, ast.Dict):
            keyed = [k for k in node.keys if k is not None and _is_kind(k)]
            if len(keyed) >= 2:
                yield node.lineno, "table keyed by kind"
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "kind" and _is_kind(value):
                    yield key.lineno, '"kind": <a kind>'
        elif isinstance(node, ast.keyword) and node.arg == "kind" and _is_kind(node.value):
            yield node.lineno, "kind=<a kind>"
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "Kind"
            and node.attr in KIND_ATTRS
        ):
            yield node.lineno, f"Kind.{node.attr}"
        elif isinstance(node, ast.ClassDef) and node.name == "Kind":
            yield node.lineno, "class Kind (a fixed list of kinds)"


def _template(text: str) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(text.splitlines(), 1):
        tags = " ".join(TAG.findall(line))
        if QUOTED_KIND.search(tags):
            yield number, "kind quoted in a template tag"
        elif len(set(KIND_ATTR.findall(tags))) >= 2:
            yield number, "a column per kind"


def _javascript(text: str) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(text.splitlines(), 1):
        if JS_KIND.search(line):
            yield number, "kind in JavaScript"


def _files() -> Iterator[Path]:
    for folder in PYTHON_DIRS:
        yield from (ROOT / folder).rglob("*.py")
    yield from (ROOT / "templates").rglob("*.html")
    yield from (p for p in (ROOT / "static").rglob("*.js") if "vendor" not in p.parts)


def _skipped(relative: str) -> bool:
    return relative.startswith(ALLOWED) or "/migrations/" in relative or "/tests/" in relative


PRAGMA = "# kind-ok:"


def findings() -> list[tuple[str, int, str]]:
    """Every (path, line, what) outside the allowed places, sorted; ``what`` starts with
    "allowed: " where the line carries PRAGMA."""
    found = []
    for path in _files():
        relative = path.relative_to(ROOT).as_posix()
        if _skipped(relative):
            continue
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".py":
            hits = _python(ast.parse(text, filename=relative))
        elif path.suffix == ".html":
            hits = _template(text)
        else:
            hits = _javascript(text)
        lines = text.splitlines()
        for line, what in hits:
            said = PRAGMA in lines[line - 1]
            found.append((relative, line, f"allowed: {what}" if said else what))
    return sorted(set(found))


def main(argv: list[str]) -> int:
    everything = findings()
    found = [f for f in everything if not f[2].startswith("allowed: ")]
    allowed = len(everything) - len(found)
    files = sorted({path for path, _, _ in found})
    for path, line, what in everything if "-v" in argv else found:
        print(f"{path}:{line}: {what}")
    print(
        f"kind branches outside the backends: {len(found)} in {len(files)} files"
        f" ({allowed} allowed by a {PRAGMA} comment)"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
