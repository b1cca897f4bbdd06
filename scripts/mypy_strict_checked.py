"""Fails when a module under mypy's strict override is not among the files mypy checks.

With ``follow_imports = "silent"`` (pyproject.toml), a module that is only imported is typed
but its errors are never shown: listing it as strict without listing it in ``files`` looks
checked and is not. Run by ``make lint``; exits 1 naming each such module.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STRICT = "disallow_untyped_defs"  # the option that marks an override strict


def module_name(path: Path) -> str:
    """The dotted name mypy gives ``path``: its folders up to the first without __init__.py."""
    parts = [path.stem] if path.name != "__init__.py" else []
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def checked_modules(config: dict) -> set[str]:
    """Every module the ``files`` entries name, less the ``exclude`` patterns' folders."""
    excluded = [e.strip("/") for e in config.get("exclude", [])]
    modules = set()
    for entry in config["files"]:
        target = ROOT / entry
        paths = [target] if target.is_file() else sorted(target.rglob("*.py"))
        for path in paths:
            if not any(f"/{e}/" in f"/{path.relative_to(ROOT)}" for e in excluded):
                modules.add(module_name(path))
    return modules


def unchecked(patterns: list[str], modules: set[str]) -> list[str]:
    """The strict ``patterns`` (``pkg.mod`` or ``pkg.*``) that match no checked module."""
    missing = []
    for pattern in patterns:
        if pattern.endswith(".*"):
            prefix = pattern[:-2]
            hit = any(m == prefix or m.startswith(prefix + ".") for m in modules)
        else:
            hit = pattern in modules
        if not hit:
            missing.append(pattern)
    return missing


def main() -> int:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = [
        pattern
        for override in config.get("overrides", [])
        if override.get(STRICT)
        for pattern in (
            [override["module"]] if isinstance(override["module"], str) else override["module"]
        )
    ]
    missing = unchecked(strict, checked_modules(config))
    for pattern in missing:
        print(f"pyproject.toml: {pattern} is strict for mypy but not in [tool.mypy] files")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
