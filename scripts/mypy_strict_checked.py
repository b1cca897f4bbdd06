"""Fails when the product's typing drifts from "strict by default, with a shrinking not-yet list".

pyproject.toml's [tool.mypy] turns ``strict`` on for every module and lists the whole product in
``files``; one override, the "not yet" list, relaxes the modules not typed yet. This script
(run by ``make lint``) exits 1, naming the cause, when:

- a product module is not among the files mypy checks (with ``follow_imports = "silent"`` an
  unlisted module is typed but its errors are never shown: it looks checked and is not);
- ``strict`` is not on in [tool.mypy];
- a not-yet entry matches no product module (a stale entry hides nothing; delete it).

So a new module is strict unless someone adds it to the not-yet list by name, in review. To take
a module off the list, delete its line and run mypy. ``scripts/mypy_share.py`` prints the share.

``--ready`` (not in ``make lint``: it runs mypy a second time, a minute) checks every module as
if the not-yet list were empty and exits 1 naming the not-yet modules that already pass: their
lines can go.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The product: every top-level package (the Django apps, the VM agent) and the CLI, less these.
NOT_PRODUCT = ("benchmarks", "cloudsim", "tests")
CLI = "cli/gpuportal"


# An override setting any of these off (or ignore_errors on) relaxes strict: a not-yet entry.
STRICT_FLAGS = (
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "disallow_untyped_calls",
    "disallow_any_generics",
    "warn_return_any",
)


def load_config() -> dict[str, Any]:
    """pyproject.toml's [tool.mypy] table."""
    config: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    return config


def module_name(path: Path) -> str:
    """The dotted name mypy gives ``path``: its folders up to the first without __init__.py."""
    parts = [path.stem] if path.name != "__init__.py" else []
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def _python_files(entries: list[str]) -> list[Path]:
    """Every .py file the ``entries`` (files or folders) name, migrations left out."""
    paths: list[Path] = []
    for entry in entries:
        target = ROOT / entry
        found = [target] if target.is_file() else sorted(target.rglob("*.py"))
        paths += [p for p in found if "migrations" not in p.relative_to(ROOT).parts]
    return paths


def product_roots() -> list[str]:
    """The product's folders: a new app is product code, and so strict, from its first line."""
    packages = [
        p.name
        for p in sorted(ROOT.iterdir())
        if (p / "__init__.py").exists() and p.name not in NOT_PRODUCT
    ]
    return [*packages, CLI]


def product_modules() -> dict[str, Path]:
    """Dotted name -> file of every product module."""
    return {module_name(path): path for path in _python_files(product_roots())}


def checked_modules(config: dict[str, Any]) -> set[str]:
    """Every module the ``files`` entries name, less the migrations."""
    return {module_name(path) for path in _python_files(config["files"])}


def matches(pattern: str, module: str) -> bool:
    """Whether an override's ``pkg.mod`` or ``pkg.*`` pattern names ``module``."""
    if pattern.endswith(".*"):
        prefix = pattern[:-2]
        return module == prefix or module.startswith(prefix + ".")
    return module == pattern


def _patterns(override: dict[str, Any]) -> list[str]:
    module = override["module"]
    return [module] if isinstance(module, str) else list(module)


def relaxed_patterns(config: dict[str, Any]) -> list[str]:
    """The module patterns of every override that relaxes strict: the not-yet list."""
    return [
        pattern
        for override in config.get("overrides", [])
        if override.get("ignore_errors") or any(override.get(f) is False for f in STRICT_FLAGS)
        for pattern in _patterns(override)
    ]


def strict_modules(config: dict[str, Any], modules: set[str]) -> set[str]:
    """The ``modules`` mypy checks strictly under ``config``.

    With ``strict`` on, every checked module not on the not-yet list; without it (the scheme
    before issue 30), every checked module a strict override names.
    """
    checked = modules & checked_modules(config)
    if config.get("strict"):
        relaxed = relaxed_patterns(config)
        return {m for m in checked if not any(matches(p, m) for p in relaxed)}
    strict = [
        pattern
        for override in config.get("overrides", [])
        if override.get("disallow_untyped_defs")
        for pattern in _patterns(override)
    ]
    return {m for m in checked if any(matches(p, m) for p in strict)}


def problems(config: dict[str, Any]) -> list[str]:
    """One line per way the config drifts from the scheme (module docstring)."""
    modules = set(product_modules())
    found = [
        f"{m} is a product module but not in [tool.mypy] files"
        for m in sorted(modules - checked_modules(config))
    ]
    if not config.get("strict"):
        found.append("[tool.mypy] strict is not true")
    found += [
        f"not-yet entry {p} matches no product module; delete it"
        for p in relaxed_patterns(config)
        if not any(matches(p, m) for m in modules)
    ]
    return found


def ready(config: dict[str, Any]) -> list[str]:
    """The not-yet modules that pass strict now: mypy run on a copy of pyproject.toml whose
    not-yet override is gone (under var/, which git ignores)."""
    text = (ROOT / "pyproject.toml").read_text()
    start = text.index("# NOT YET STRICT")
    end = text.index("ignore_errors = true\n", start) + len("ignore_errors = true\n")
    copy = ROOT / "var" / "mypy_ready.toml"
    copy.parent.mkdir(exist_ok=True)
    copy.write_text(text[:start] + text[end:])
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(copy)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode > 1:  # mypy itself failed (2): no answer about any module
        raise SystemExit(run.stdout + run.stderr)
    failing = {
        module_name(ROOT / m[1])
        for m in re.finditer(r"^([^:\s]+\.py):\d+: error", run.stdout, re.M)
    }
    modules = product_modules()
    relaxed = relaxed_patterns(config)
    return sorted(m for m in modules if m not in failing and any(matches(p, m) for p in relaxed))


def main() -> int:
    if "--ready" in sys.argv[1:]:
        passing = ready(load_config())
        for module in passing:
            print(f"pyproject.toml: {module} passes strict; delete it from the not-yet list")
        return 1 if passing else 0
    found = problems(load_config())
    for line in found:
        print(f"pyproject.toml: {line}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
