"""``{% kind_tabs kind %}``: the tabs of the request pages, one per workspace kind (in
workspaces.models.Kind's order), each linking to its backend's request page; ``kind`` is the
current one."""

from django import template

from workspaces.backends import backend_for
from workspaces.models import Kind

register = template.Library()


@register.inclusion_tag("workspaces/_kind_tabs.html")
def kind_tabs(kind: str) -> dict:
    tabs = [(value, backend_for(value).request_url, label) for value, label in Kind.choices]
    return {"kind": kind, "tabs": tabs}
