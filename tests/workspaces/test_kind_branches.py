"""scripts/kind_branches.py: a kind named outside the backends is found, in Python, templates
and JavaScript; the tree has none (make lint runs it)."""

import ast
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "kind_branches", Path(__file__).resolve().parents[2] / "scripts/kind_branches.py"
)
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


def _python(source):
    return [what for _, what in check._python(ast.parse(source))]


def test_python_branches_on_a_kind_are_found():
    assert _python('if body.kind == "vm": pass') == ["comparison with a kind"]
    assert _python("x = kind in (Kind.MIG, 'other')") == [
        "comparison with a kind",
        "Kind.MIG",
    ]
    assert _python('kind: Literal["vm", "mig", "namespace"]') == ["Literal of kinds"]
    assert _python('NEEDS = {"vm": [1], "mig": [2]}') == ["table keyed by kind"]
    assert _python('Option(kind="mig")') == ["kind=<a kind>"]
    assert _python('body = {"kind": "namespace"}') == ['"kind": <a kind>']
    assert _python("choices = Kind.choices") == ["Kind.choices"]
    # What is not a kind branch: a kind held in a variable, a field named namespace.
    assert _python('b = backend_for(ws.kind); x = ws.namespace; y = {"namespace": 1}') == []


def test_template_and_javascript_kinds_are_found():
    assert [w for _, w in check._template('{% if kind == "vm" %}x{% endif %}')] == [
        "kind quoted in a template tag"
    ]
    columns = "<td>{{ costs.vm|usd }}</td><td>{{ costs.mig|usd }}</td>"
    assert [w for _, w in check._template(columns)] == ["a column per kind"]
    assert list(check._template("{{ workspace.namespace }}")) == []
    assert list(check._javascript('const c = { vm: "#fff", mig: "#000" };'))
    assert list(check._javascript('if (kind === "mig") {}'))
    assert not list(check._javascript("const kinds = data.kinds || {};"))


def test_the_tree_has_no_kind_branch_outside_the_backends():
    found = [f for f in check.findings() if not f[2].startswith("allowed: ")]
    assert found == []
