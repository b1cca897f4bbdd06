"""``{% live_topic "ws" workspace.pk %}`` names a topic the page shows; ``{% live_config %}``,
last in base.html (after every block has named its topics), writes the signed subscription
that static/live.js streams. Every logged-in page follows ``user:<id>`` (notices, header)."""

from collections.abc import Iterable

from django import template
from django.http import HttpRequest
from django.template import Context
from django.urls import reverse
from django.utils.html import format_html

from live import stamps, tokens

register = template.Library()


def _topics(request: HttpRequest) -> set[str]:
    # Kept on the request: every tag of one page adds to the same set.
    topics: set[str] = request.__dict__.setdefault("_live_topics", set())
    return topics


@register.simple_tag(takes_context=True)
def live_topic(context: Context, kind: str, key: object = None) -> str:
    """Subscribe the page to topic ``kind[:key]``; renders nothing."""
    request = context.get("request")
    if request is not None:
        _topics(request).add(stamps.topic(kind, key))
    return ""


@register.simple_tag(takes_context=True)
def live_topics(context: Context, topics: Iterable[str]) -> str:
    """Subscribe the page to every topic in the list ``topics``; renders nothing."""
    request = context.get("request")
    if request is not None:
        _topics(request).update(topics)
    return ""


@register.simple_tag(takes_context=True)
def live_config(context: Context) -> str:
    """The hidden element live.js reads: token, version at render, stream and poll URLs."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if request is None or user is None or not user.is_authenticated:
        return ""
    topics = sorted(_topics(request) | {stamps.topic("user", user.pk)})
    try:
        version = stamps.current_version(topics)
    except Exception:  # noqa: BLE001 (a cache outage must not break the page, its 500 page included)
        version = ""  # unknown: the stream tells the page to refresh once the cache answers
    return format_html(
        '<div id="live-config" hidden data-token="{}" data-version="{}" data-stream="{}"'
        ' data-poll="{}"></div>',
        tokens.sign(user_id=user.pk, topics=topics),
        version,
        reverse("live-stream"),
        reverse("live-poll"),
    )
