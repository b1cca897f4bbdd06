"""Local times in a time zone, as the schedules and quiet hours mean them: "08:30 on
weekdays in Europe/Berlin" is 07:30 UTC in winter and 06:30 UTC in summer (zoneinfo; a local
time that a spring-forward skips is taken as the same wall time after the change, as
zoneinfo's fold=0 does)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def weekday_set(text: str) -> frozenset[int]:
    """{0..6} from "0,1,2,3,4" (Monday 0); raises ValueError for anything else."""
    days = frozenset(int(d) for d in text.split(",") if d.strip())
    if not days or not days <= set(range(7)):
        raise ValueError("Weekdays are 0 (Monday) to 6 (Sunday), comma-separated.")
    return days


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``; raises ValueError for an unknown one."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not a time zone (e.g. Europe/Berlin).") from None


def next_at(*, at: time, weekdays: frozenset[int], tz: ZoneInfo, after: datetime) -> datetime:
    """The first instant (UTC) after ``after`` that is ``at`` local time in ``tz`` on one of
    ``weekdays``."""
    day = after.astimezone(tz).date()
    for offset in range(8):
        candidate_day = day + timedelta(days=offset)
        if candidate_day.weekday() not in weekdays:
            continue
        local = datetime.combine(candidate_day, at, tzinfo=tz)
        # Round-trip through UTC: a skipped wall time comes out as the time after the change.
        instant = local.astimezone(UTC)
        if instant > after:
            return instant
    raise AssertionError("some weekday comes within 8 days")


def within(
    *, start: time, end: time, weekdays: frozenset[int], tz: ZoneInfo, now: datetime
) -> datetime | None:
    """When the window ``start``..``end`` (local, on ``weekdays`` of its start; past midnight
    when ``end`` <= ``start``) that holds ``now`` ends (UTC), or None when ``now`` is outside
    every such window."""
    local = now.astimezone(tz)
    for back in (0, 1):
        day = local.date() - timedelta(days=back)
        if day.weekday() not in weekdays:
            continue
        begins = datetime.combine(day, start, tzinfo=tz)
        ends_day = day if end > start else day + timedelta(days=1)
        ends = datetime.combine(ends_day, end, tzinfo=tz)
        if begins.astimezone(UTC) <= now < ends.astimezone(UTC):
            return ends.astimezone(UTC)
    return None
