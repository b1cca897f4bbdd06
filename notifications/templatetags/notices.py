"""Notice text on a page: each time marked in it (notifications.notice_text) in the reader's
zone."""

from django import template
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe

from common.templatetags.display import when
from notifications import notice_text

register = template.Library()


@register.filter
def notice_html(text: str) -> str:
    """The text, escaped, with each marked time shown by the portal's one time rule
    (``{% when %}``: the active time zone, UTC on hover)."""
    html: list[str] = []
    for part in notice_text.parts(text):
        if isinstance(part, str):
            html.append(escape(part))
            continue
        html.append(when(part, "time"))
    return mark_safe("".join(html))


@register.filter
def notice_plain(text: str) -> str:
    """The text with each marked time written in the active time zone (for a title)."""
    return notice_text.in_zone(text, timezone.get_current_timezone())
