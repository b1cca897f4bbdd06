"""scripts/mypy_strict_checked.py and scripts/local_imports.py: the typing and import rules
that `make lint` enforces name what breaks them."""

import ast
import importlib.util
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _load(name):
    sys.path.insert(0, str(SCRIPTS))  # local_imports imports mypy_strict_checked
    try:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPTS))
    return module


checker = _load("mypy_strict_checked")
local_imports = _load("local_imports")

CONFIG = {
    "strict": True,
    "files": ["cloud", "workspaces", "cli/gpuportal"],
    "overrides": [
        {"module": ["rules", "rules.*"], "implicit_reexport": True},
        {"module": ["workspaces.models", "workspaces.backends.*"], "ignore_errors": True},
    ],
}


def test_a_product_module_outside_files_is_named():
    found = checker.problems({**CONFIG, "files": ["cloud", "workspaces", "cli/gpuportal"]})
    assert "teams.models is a product module but not in [tool.mypy] files" in found
    assert not any(line.startswith("workspaces.") for line in found)


def test_strict_off_and_a_stale_not_yet_entry_are_named():
    config = {
        **CONFIG,
        "strict": False,
        "overrides": [{"module": ["workspaces.gone", "teams.*"], "ignore_errors": True}],
    }
    found = checker.problems(config)
    assert "[tool.mypy] strict is not true" in found
    assert "not-yet entry workspaces.gone matches no product module; delete it" in found
    assert not any("teams.*" in line for line in found)


def test_the_not_yet_list_is_what_is_not_strict():
    modules = {"workspaces.models", "workspaces.backends.vm", "workspaces.states", "teams.x"}
    strict = checker.strict_modules(CONFIG, modules)
    # teams.x is not in files: mypy never shows its errors, so it is not strict either.
    assert strict == {"workspaces.states"}


def test_the_project_keeps_its_typing_rules():
    assert checker.main() == 0


def _scan(source):
    lines = source.splitlines()
    return [
        (node.lineno, reason)
        for node, reason in local_imports.local_imports(ast.parse(source), lines)
    ]


def test_a_function_local_import_needs_a_comment_on_it_or_above():
    source = """import os


def plain():
    from workspaces import models
    return models


def explained():
    # A real cycle: workspaces.tasks imports this module.
    from workspaces.tasks import advance
    from workspaces import chains  # and this one for the same reason
    return advance, chains


class Config:
    def ready(self):
        # Signals, once the app registry is ready.
        from workspaces import hooks
        from workspaces import live_topics

        x = 1
        from workspaces import late
"""
    assert _scan(source) == [
        (5, False),
        (11, True),
        (12, True),
        (19, True),
        (20, True),
        (23, False),
    ]


def test_the_product_has_no_unexplained_function_local_import():
    assert local_imports.main([]) == 0
