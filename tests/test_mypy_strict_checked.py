"""scripts/mypy_strict_checked.py: a strict module mypy does not check is named."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "mypy_strict_checked", Path(__file__).resolve().parent.parent / "scripts/mypy_strict_checked.py"
)
checker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checker)


def test_a_strict_module_missing_from_files_is_named():
    checked = checker.checked_modules({"files": ["cloud", "workspaces/gpus.py", "cli/gpuportal"]})
    assert {"cloud.azure_vm", "workspaces.gpus", "gpuportal.__main__"} <= checked
    strict = ["cloud.*", "workspaces.gpus", "gpuportal.*", "workspaces.catalog", "teams.*"]
    assert checker.unchecked(strict, checked) == ["workspaces.catalog", "teams.*"]


def test_the_projects_strict_modules_are_all_checked():
    assert checker.main() == 0
