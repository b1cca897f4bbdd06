"""The portal's one way to show money, times and labels; a builtin of every template
(portal/settings.py TEMPLATES), so no ``{% load %}`` is needed.

- ``{{ amount|usd }}`` → '$5,000.00'; ``{{ price|usd_hour }}`` → '$0.0123' (any rate per hour:
  prices, burn rates, ceilings; common.words.HOURLY_PLACES).
- ``{% when at %}`` → ``<time datetime="2026-11-24T07:45:00Z" title="2026-11-24 07:45 UTC">
  24 Nov 2026 08:45 CET</time>``: the user's zone (portal/middleware.py), UTC on hover.
- ``{{ status|label }}`` → 'Pending approval'; ``{{ "A100"|with_article }}`` → 'an A100';
  ``{{ n|counted:"GPU" }}`` → '1 GPU' / '2 GPUs'.
"""

from datetime import UTC, date, datetime

from django import template
from django.utils import dateformat, timezone
from django.utils.html import format_html

from common import words

register = template.Library()

# Named shapes of a shown time; each ends with the zone's abbreviation, so a time never
# stands without its zone.
_FORMATS = {
    "datetime": "j M Y H:i T",
    "seconds": "j M Y H:i:s T",
    "short": "j M H:i T",
    "time": "H:i T",
    "time_seconds": "H:i:s T",
    "date": "j M Y",
    "day": "j M",
}


@register.filter
def usd(amount: object, places: int | str = 2) -> str:
    """'$1,234.57'; '' for None, '' or anything that is not a number."""
    try:
        return words.usd(amount, int(places))
    except (TypeError, ValueError):
        return words.usd(amount)


@register.filter(is_safe=True)
def sentence(text: object) -> str:
    """``{{ reason|sentence }}``: the text with one full stop at its end, never two."""
    return words.sentence(text)


@register.filter
def usd_hour(amount: object) -> str:
    """A rate per hour: '$3.6730' (common.words.usd_hourly, the one rule for hourly money)."""
    return words.usd_hourly(amount)


@register.simple_tag
def when(value: object, style: str = "datetime") -> str:
    """A ``<time>`` element for ``value`` (aware or naive-UTC datetime, or a date) in the
    active time zone, with its ISO UTC instant in ``datetime`` and the UTC time in ``title``.

    ``style`` is one of _FORMATS ('datetime', 'seconds', 'short', 'time', 'time_seconds',
    'date', 'day'); an unknown one falls back to 'datetime'. None or '' gives ''.
    """
    if value is None or value == "":
        return ""
    shape = _FORMATS.get(style, _FORMATS["datetime"])
    if not isinstance(value, datetime):
        if isinstance(value, date):  # a calendar day has no zone to convert
            return format_html(
                '<time datetime="{}">{}</time>', value.isoformat(), dateformat.format(value, shape)
            )
        return str(value)
    if timezone.is_naive(value):
        value = value.replace(tzinfo=UTC)
    at_utc = value.astimezone(UTC)
    local = timezone.localtime(value)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        at_utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
        at_utc.strftime("%Y-%m-%d %H:%M UTC"),
        _local(local, shape),
    )


def _local(local: datetime, shape: str) -> str:
    # Django's "T" writes nothing for a local time that occurs twice (the hour the clocks go
    # back): 02:30 would stand without saying CEST or CET. The datetime's own tzname() knows
    # which of the two it is (astimezone sets fold).
    if not shape.endswith(" T"):
        return dateformat.format(local, shape)
    return f"{dateformat.format(local, shape[:-2])} {local.tzname() or ''}".rstrip()


@register.filter
def label(value: object) -> str:
    """A stored enum value (status, kind, decision, role, pool status) in words."""
    return words.label(value)


@register.filter
def with_article(word: object) -> str:
    """'an A100', 'a T4'."""
    return words.with_article(word)


@register.filter
def counted(number: object, noun: str) -> str:
    """``{{ n|counted:"GPU" }}`` → '1 GPU', '3 GPUs'; ``"child,children"`` names the plural."""
    singular, _, plural = str(noun).partition(",")
    return words.counted(number, singular, plural)
