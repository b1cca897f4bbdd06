"""``{% workspace_apps workspace %}``: the workspace page's Apps panel (apps_proxy.selectors)."""

from typing import Any

from django import template

from apps_proxy.models import ShareLevel
from apps_proxy.selectors import workspace_apps as apps_of

register = template.Library()


@register.inclusion_tag("apps_proxy/_workspace_apps.html", takes_context=True)
def workspace_apps(context: dict[str, Any], workspace: Any) -> dict[str, Any]:
    request = context["request"]
    return {
        "workspace": workspace,
        "apps": apps_of(user=request.user, workspace=workspace),
        "levels": ShareLevel.choices,
        "csrf_token": context.get("csrf_token"),
    }
