"""``{% live_workspace_topics %}``: subscribes a workspace list to the topics of what its
user sees (workspaces.live_topics.workspace_topics)."""

from django import template
from django.template import Context

from live.templatetags.live import live_topics
from workspaces.live_topics import workspace_topics

register = template.Library()


@register.simple_tag(takes_context=True)
def live_workspace_topics(context: Context) -> str:
    """Renders nothing."""
    request = context.get("request")
    if request is None or not request.user.is_authenticated:
        return ""
    return live_topics(context, workspace_topics(user=request.user))
