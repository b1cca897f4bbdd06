"""The Content-Security-Policy: every answer carries it (django-csp), it allows no inline
script or style and no other origin, and no template holds what it would block. The browser
tests (conftest's _no_csp_violations) check the rendered pages in Chromium."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted(ROOT.glob("*/templates/**/*.html")) + sorted(ROOT.glob("templates/**/*.html"))


def _policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {d.split()[0]: d.split()[1:] for d in header.split(";") if d.strip()}


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/accounts/login/", "/api/v1/docs", "/healthz"])
def test_every_answer_carries_a_strict_policy(client, path):
    policy = _policy(client.get(path))
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"] and policy["style-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    assert policy["form-action"] == ["'self'"] and policy["base-uri"] == ["'self'"]
    assert "'unsafe-inline'" not in str(policy) and "'unsafe-eval'" not in str(policy)


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", re.I)
HANDLER = re.compile(r"\son[a-z]+\s*=", re.I)
STYLE = re.compile(r"\sstyle\s*=|<style", re.I)
# An htmx event filter ("change[target.name=='x']", evaluated as JavaScript), hx-on, js: values.
EVAL_TRIGGER = re.compile(
    r"hx-trigger=\"(?:[^\"]*,)?\s*[\w.:-]+\[|hx-on|hx-vals=['\"]js:|javascript:", re.I
)
DJANGO_TAGS = re.compile(r"\{#.*?#\}|\{%.*?%\}", re.S)  # comments and tags are not markup


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_template_holds_what_the_policy_blocks(template):
    text = DJANGO_TAGS.sub("", template.read_text())
    for rule, what in (
        (INLINE_SCRIPT, "an inline <script>"),
        (HANDLER, "an on…= handler"),
        (STYLE, "a style attribute or <style>"),
        (EVAL_TRIGGER, "htmx or a link that needs eval"),
    ):
        assert not rule.search(text), f"{what}: move it to static/ (the CSP blocks it)"
