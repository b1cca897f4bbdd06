"""Rollups: each team's complete days priced once into DailySpend, with its DaySpend and
MonthSpend summaries and its rollup mark (SpendRollup), so the spend pages read sums, not
intervals; moved back after a late price correction. Days in the team's time zone."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.db import transaction
from django.db.models import Min, Q, Sum

from billing import metering
from billing.actual_costs import cost_estimates_refresh
from billing.live_spend import live_spend, rolled_through
from billing.models import DailySpend, DaySpend, Meter, MonthSpend, SpendRollup, UsageInterval
from billing.pricing import Zones, day_start
from teams.models import Team
from teams.selectors import team_timezones


def rollup_rebuild(
    *, now: datetime, team_ids: Iterable[int] | None = None, since: date | None = None
) -> int:
    """Rebuild each team's DailySpend for its complete days (up to yesterday in its time
    zone) from ``since``, or from the day after its rollup mark, or from its first usage;
    returns how many rows were written. Idempotent: a day rebuilt twice is replaced."""
    team_ids = list(team_ids if team_ids is not None else Team.objects.values_list("pk", flat=True))
    zones = team_timezones(team_ids=team_ids)
    marks = rolled_through(team_ids=team_ids)
    firsts = dict(
        UsageInterval.objects.filter(team_id__in=team_ids)
        .values_list("team_id")
        .annotate(Min("started_at"))
    )
    written = 0
    for team in team_ids:
        yesterday = now.astimezone(zones[team]).date() - timedelta(days=1)
        first = since or _next_day(marks.get(team)) or _local_day(firsts.get(team), zones[team])
        if first is None or first > yesterday:
            continue
        written += _rebuild_days(team, first, yesterday, zones, now)
    return written


def _next_day(day: date | None) -> date | None:
    return day + timedelta(days=1) if day else None


def _local_day(moment: datetime | None, tz: ZoneInfo) -> date | None:
    return moment.astimezone(tz).date() if moment else None


ROLLUP_CHUNK_DAYS = 7  # days priced per transaction: bounds memory for teams with many workspaces


def _rebuild_days(team: int, first: date, last: date, zones: Zones, now: datetime) -> int:
    written = 0
    while first <= last:
        chunk_last = min(last, first + timedelta(days=ROLLUP_CHUNK_DAYS - 1))
        written += _rebuild_chunk(team, first, chunk_last, zones, now)
        first = chunk_last + timedelta(days=1)
    return written


def _rebuild_chunk(team: int, first: date, last: date, zones: Zones, now: datetime) -> int:
    window = (day_start(first, zones[team]), day_start(last + timedelta(days=1), zones[team]))
    lines = live_spend(windows={team: window}, zones=zones)
    rows = [
        DailySpend(
            team_id=team,
            workspace_id=line.workspace_id,
            kind=line.kind,
            day=line.day,
            meter=line.meter,
            hours=round(line.hours, 4),
            cost=metering.to_cents(line.cost),
        )
        for line in lines
    ]
    with transaction.atomic():
        DailySpend.objects.filter(team_id=team, day__gte=first, day__lte=last).delete()
        DailySpend.objects.bulk_create(rows, batch_size=2000)
        _summarise(team, first, last)
        SpendRollup.objects.update_or_create(
            team_id=team, defaults={"rolled_through": last, "rebuilt_at": now}
        )
    return len(rows)


def _summarise(team: int, first: date, mark: date) -> None:
    """Keep DaySpend and MonthSpend equal to the sums of the team's DailySpend rows up to its
    new rollup ``mark``, after the days from ``first`` on changed (or the mark moved back to
    the day before ``first``). Call inside the transaction that moves the mark."""
    DaySpend.objects.filter(team_id=team, day__gte=first).delete()
    days = DailySpend.objects.filter(team_id=team, day__gte=first, day__lte=mark)
    DaySpend.objects.bulk_create(
        DaySpend(team_id=team, **row)
        for row in days.values("day", "kind").annotate(cost=Sum("cost"))
    )
    month = first.replace(day=1)
    MonthSpend.objects.filter(team_id=team, month__gte=month).delete()
    while month <= mark:
        following = (month + timedelta(days=32)).replace(day=1)
        rows = DailySpend.objects.filter(
            team_id=team, day__gte=month, day__lte=mark, day__lt=following
        )
        compute_hours = Sum("hours", filter=Q(meter=Meter.COMPUTE), default=0)
        sums = rows.values("workspace_id", "kind").annotate(cost=Sum("cost"), hours=compute_hours)
        MonthSpend.objects.bulk_create(
            (MonthSpend(team_id=team, month=month, **row) for row in sums), batch_size=2000
        )
        month = following


def rollup_invalidate(*, since: datetime) -> int:
    """After a late correction (a price effective from ``since``), let every team's days from
    ``since`` on be computed live again until the next rebuild, and price again the stored
    estimates of the UTC days from ``since`` on that Azure's costs were fetched for (see
    cost_estimates_refresh); returns teams affected."""
    cost_estimates_refresh(since=since)
    moved = 0
    for mark in SpendRollup.objects.all():
        zones = team_timezones(team_ids=[mark.team_id])
        day_before = since.astimezone(zones[mark.team_id]).date() - timedelta(days=1)
        if mark.rolled_through > day_before:
            with transaction.atomic():
                SpendRollup.objects.filter(pk=mark.pk).update(rolled_through=day_before)
                _summarise(mark.team_id, day_before + timedelta(days=1), day_before)
            moved += 1
    return moved
