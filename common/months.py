"""Calendar months in a time zone: where budgets and spend begin and end. Pure functions."""

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

UTC_ZONE = ZoneInfo("UTC")


def month_bounds(now: datetime, tz: ZoneInfo = UTC_ZONE) -> tuple[datetime, datetime]:
    """Start of ``now``'s calendar month in ``tz`` and of the next one (aware)."""
    local = now.astimezone(tz)
    first = local.date().replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return (
        datetime.combine(first, time(), tzinfo=tz),
        datetime.combine(following, time(), tzinfo=tz),
    )
