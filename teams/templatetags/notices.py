"""Notice text on a page: each time marked in it (teams.notice_text) in the reader's zone."""

from datetime import UTC

from django import template
from django.utils import timezone
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

from teams import notice_text

register = template.Library()


@register.filter
def notice_html(text: str) -> str:
    """The text, escaped, with each marked time as <time datetime=…> in the active time zone
    and the time in UTC on hover."""
    html = []
    for part in notice_text.parts(text):
        if isinstance(part, str):
            html.append(escape(part))
            continue
        utc = part.astimezone(UTC)
        html.append(
            format_html(
                '<time datetime="{}" title="{} UTC">{}</time>',
                part.isoformat(),
                utc.strftime("%Y-%m-%d %H:%M"),
                notice_text.clock(part, timezone.get_current_timezone()),
            )
        )
    return mark_safe("".join(html))


@register.filter
def notice_plain(text: str) -> str:
    """The text with each marked time written in the active time zone (for a title)."""
    return notice_text.in_zone(text, timezone.get_current_timezone())
