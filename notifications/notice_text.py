"""Times inside a notice's text, shown in each reader's time zone.

A notice's text is written once but read in two places: on a page, where every time follows
the reader's time zone (the ``tz`` cookie, portal/middleware.py) with UTC on hover, and in its
email, where the team's time zone is used (as the idle policy's times are). So a service puts
``mark(at)`` in the text where a time belongs, and each reader renders the marks: ``in_zone``
for an email, the ``notice_html`` template filter (notifications/templatetags/notices.py) for a
page. Pure functions: no ORM, no clock.
"""

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

MARK = re.compile(r"\[\[time:([0-9T:+.\-]{19,40})\]\]")


def mark(at: datetime) -> str:
    """The placeholder for the aware time ``at`` inside a notice's text."""
    return f"[[time:{at.astimezone(UTC).isoformat()}]]"


def parts(text: str) -> Iterator[str | datetime]:
    """``text`` split into its plain pieces (str) and its marked times (aware datetimes); a
    mark that is no valid time stays text."""
    start = 0
    for found in MARK.finditer(text):
        try:
            at = datetime.fromisoformat(found[1])
        except ValueError:
            continue
        if at.tzinfo is None:
            continue
        yield text[start : found.start()]
        yield at
        start = found.end()
    yield text[start:]


def clock(at: datetime, zone: ZoneInfo) -> str:
    """How a notice shows a time: "13:40 CET"."""
    return at.astimezone(zone).strftime("%H:%M %Z")


def in_zone(text: str, zone: ZoneInfo) -> str:
    """``text`` with every marked time written as in ``clock`` (for an email, or a title)."""
    return "".join(p if isinstance(p, str) else clock(p, zone) for p in parts(text))
