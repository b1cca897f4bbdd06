"""``{% kind_tabs kind %}``: the tabs of the request pages, one per registered workspace kind
(in the registry's order), each linking to its backend's request page; ``kind`` is the current
one."""

from typing import Any

from django import template

from workspaces.backends import kind_choices, request_path

register = template.Library()


@register.inclusion_tag("workspaces/_kind_tabs.html")
def kind_tabs(kind: str) -> dict[str, Any]:
    tabs = [(value, request_path(value), label) for value, label in kind_choices()]
    return {"kind": kind, "tabs": tabs}
