"""Prints how much of the product mypy checks strictly: modules and lines, strict over total.

The product is ``product_roots()`` in scripts/mypy_strict_checked.py (the apps, the agent and
the CLI; not tests, cloudsim, benchmarks or migrations). A module counts as strict when mypy
checks it (``files``) and no override relaxes it (the "not yet" list) -- or, under the scheme
before issue 30, when a strict override names it. Lines are physical lines of the .py file.
Run: ``python scripts/mypy_share.py [-v]`` (``-v`` lists the modules not strict, largest first).
"""

from __future__ import annotations

import sys

from mypy_strict_checked import ROOT, load_config, product_modules, strict_modules


def main(argv: list[str]) -> int:
    config = load_config()
    modules = product_modules()
    strict = strict_modules(config, set(modules))
    lines = {name: len(path.read_text().splitlines()) for name, path in modules.items()}
    strict_lines = sum(lines[m] for m in strict)
    total_lines = sum(lines.values())
    print(
        f"strict modules: {len(strict)}/{len(modules)} ({100 * len(strict) / len(modules):.0f} %); "
        f"strict lines: {strict_lines}/{total_lines} ({100 * strict_lines / total_lines:.0f} %)"
    )
    if "-v" in argv:
        for name in sorted(set(modules) - strict, key=lambda m: -lines[m]):
            print(f"  not strict: {name} ({lines[name]} lines, {modules[name].relative_to(ROOT)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
