"""Spend read from the database: DailySpend rollups up to each team's rollup mark, and the
UsageInterval rows after it priced live (fast paths for a one-day window, the reference
pricing of billing.pricing otherwise); the burn rate. Money in USD (Decimal); days are the
team's, in its time zone (the idle policy's ``timezone``, UTC by default)."""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Hashable, Iterable
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import reduce
from typing import NamedTuple, TypeVar
from uuid import UUID

from django.db.models import Count, DurationField, ExpressionWrapper, Q, QuerySet, Sum

from billing import live_sql, metering
from billing.charges import charge_burn_rate
from billing.models import DailySpend, Price, SpendRollup, UsageInterval
from billing.pricing import (
    INTERVAL_FIELDS,
    BookKey,
    IntervalRecord,
    LineKey,
    SpendLine,
    Total,
    Windows,
    Zones,
    add_priced,
    as_lines,
    book_key,
    changing,
    day_start,
    points,
    price_book,
)

_MICROSECOND = timedelta(microseconds=1)
_PER_HOUR = metering.MICROSECONDS_PER_HOUR
DayRanges = dict[int, tuple[date, date]]  # per team id: (first, last) local days
_V = TypeVar("_V", bound=Hashable)


def intervals_of(queryset: QuerySet[UsageInterval]) -> list[IntervalRecord]:
    return [IntervalRecord(*row) for row in queryset.values_list(*INTERVAL_FIELDS)]


def live_spend(*, windows: Windows, zones: Zones) -> list[SpendLine]:
    """Spend per team, workspace, day and meter computed from intervals and prices, each team
    over its own window ``(start, end)``; end is at most now. Two queries; two more when a
    window spans a local midnight or a price changes inside a one-day window.

    A window within one local day (the spend pages' today) is summed in SQL: the allocated
    time per workspace, meter and price, clipped to the window, priced at the price in
    effect over the window (in SQL on PostgreSQL, see billing.live_sql), so the rows read
    grow with the workspaces, not with their sessions. A window across local midnights, and
    a meter whose price changes inside its window, are priced interval by interval by the
    reference pricing (billing.pricing.add_priced)."""
    if not windows:
        return []
    one_day, split = spans(windows, zones)
    totals: dict[LineKey, Total] = {}
    moving = _add_day_sums(totals, one_day, zones)
    intervals = intervals_of(overlapping(split)) if split else []
    if moving:
        intervals += intervals_of(overlapping(one_day, keys=moving))
    add_priced(totals, intervals, price_book(book_key(i) for i in intervals), windows, zones)
    return as_lines(totals)


def spans(windows: Windows, zones: Zones) -> tuple[Windows, Windows]:
    """The windows within one local day of their team, and the others."""
    one_day = {t: w for t, w in windows.items() if not metering.local_midnights(*w, zones[t])}
    return one_day, {t: w for t, w in windows.items() if t not in one_day}


class _DaySum(NamedTuple):
    """A one-day window's spend of a workspace's meter: hours and USD (unrounded)."""

    team_id: int
    workspace_id: UUID
    kind: str
    meter: str
    hours: Decimal
    cost: Decimal


def _add_day_sums(totals: dict[LineKey, Total], windows: Windows, zones: Zones) -> set[BookKey]:
    """Add the one-day windows' spend per workspace and meter to ``totals``, except for the
    prices that change inside a window: returns their price book keys, to be priced
    interval by interval. Two queries (none without windows): on PostgreSQL the prices
    changing and the lines priced in SQL (exact numeric); elsewhere the sums and their
    prices, priced in Python (SQLite has no exact decimal arithmetic)."""
    if not windows:
        return set()
    rows: Iterable[_DaySum]
    if live_sql.available():
        moving = changing_prices(windows)
        # Left out for every team, not only those whose window the change falls in: the
        # caller prices these keys for all teams interval by interval (counted once).
        rows = (
            _DaySum(team, workspace, kind, meter, micro / _PER_HOUR, cost)
            for team, workspace, kind, meter, micro, cost in live_sql.day_lines(
                overlapping(windows).exclude(_of_keys(moving)), windows
            )
        )
    else:
        rows, moving = _day_sums_in_python(windows)
    days = {t: w[0].astimezone(zones[t]).date() for t, w in windows.items()}
    for r in rows:
        key = (r.team_id, r.workspace_id, r.kind, days[r.team_id], r.meter)
        if key in totals:
            totals[key].hours += r.hours
            totals[key].cost += r.cost
        else:  # kept whole: a sum would round SQL's exact cost to 28 digits before the cent
            totals[key] = Total(r.hours, r.cost)
    return moving


def _day_sums_in_python(windows: Windows) -> tuple[list[_DaySum], set[BookKey]]:
    """The one-day windows' sums (see _DaySum), and the price book keys changing inside a
    window (left out). Two queries."""
    sums = _clipped_sums(windows)
    book = price_book(book_key(s) for s in sums)
    moving = changing(book, windows.values())
    rates: dict[tuple[int, str, str, str, bool, Decimal], Decimal] = {}  # USD/hour
    rows = []
    for s in sums:
        if book_key(s) in moving:
            continue
        key = (s.team_id, *book_key(s), s.price_per_hour)
        if key not in rates:
            point = metering.price_at(points(book, s), windows[s.team_id][0])
            assert point is not None  # points() starts with the quoted price, at BEGINNING
            rates[key] = point.hourly
        micro = s.allocated // _MICROSECOND
        cost = metering.cost_of(micro, rates[key], (s.share_num, s.share_den))
        rows.append(_DaySum(s.team_id, s.workspace_id, s.kind, s.meter, micro / _PER_HOUR, cost))
    return rows, moving


def changing_prices(windows: Windows) -> set[BookKey]:
    """Price book keys with a price change strictly inside one of the windows (as
    billing.live_sql leaves out). One query."""
    bounds = list(windows.values())
    changes = Price.objects.filter(
        effective_start__gt=min(b[0] for b in bounds), effective_start__lt=max(b[1] for b in bounds)
    ).values_list("kind", "sku", "region", "spot", "effective_start")
    book: dict[BookKey, list[metering.PricePoint]] = defaultdict(list)
    for kind, sku, region, spot, start in changes:
        book[(kind, sku, region, spot)].append(metering.PricePoint(start, Decimal(0)))
    return changing(book, bounds)


class _Sum(NamedTuple):
    """Allocated time of one workspace's meter at one price within a team's window."""

    team_id: int
    workspace_id: UUID
    kind: str  # the workspace's
    meter: str
    price_kind: str
    sku: str
    region: str
    spot: bool
    share_num: int
    share_den: int
    price_per_hour: Decimal
    allocated: timedelta


def _clipped_sums(windows: Windows) -> list[_Sum]:
    """Per team, workspace, meter and price: the intervals' time within the team's window,
    summed in SQL (one query)."""
    clipped = ExpressionWrapper(live_sql.clipped(windows), output_field=DurationField())
    rows = (
        overlapping(windows)
        .values_list(*INTERVAL_FIELDS[:-3], "price_per_hour")
        .annotate(allocated=Sum(clipped))
    )
    return [_Sum(*row) for row in rows]


def overlapping(windows: Windows, keys: set[BookKey] | None = None) -> QuerySet[UsageInterval]:
    """UsageInterval rows of each team in ``windows`` that overlap its window; only those
    whose price book key is in ``keys``, when given."""
    query = Q(pk__in=[])
    for (start, end), teams in teams_by_value(windows).items():
        query |= Q(team_id__in=teams, started_at__lt=end) & (
            Q(ended_at__isnull=True) | Q(ended_at__gt=start)
        )
    if keys is not None:
        query &= _of_keys(keys)
    return UsageInterval.objects.filter(query)


def _of_keys(keys: set[BookKey]) -> Q:
    """UsageInterval rows whose price book key is one of ``keys`` (none without keys)."""
    return reduce(
        operator.or_,
        (Q(price_kind=k, sku=s, region=r, spot=spot) for k, s, r, spot in keys),
        Q(pk__in=[]),
    )


class _PriceKey(NamedTuple):
    team_id: int
    price_kind: str
    sku: str
    region: str
    spot: bool
    share_num: int
    share_den: int
    price_per_hour: Decimal


def team_burn_rate(*, team_ids: Iterable[int], now: datetime) -> dict[int, Decimal]:
    """The burn rate: USD/hour that Azure bills each team for at ``now``, the one definition
    every page and email shows ({team_id: Decimal}; teams burning nothing may be missing).

    What counts: every open UsageInterval (billing.meters.usage_meter), priced at the price
    in effect at ``now``. So a VM burns its compute while allocated (states.BILLABLE) and its
    OS disk from its first run until it is deleted, stopped or not; a MIG slice or namespace
    burns while running (states.BILLABLE_ON_AKS). A workspace pending approval, waiting for
    Azure (requested: it holds GPU quota, see team_gpus_in_use) or failed burns nothing.
    Open intervals are counted per meter price in SQL, so the rows read do not grow with the
    fleet; plus the team's shares, homes and held capacity reservations (billing.charges):
    five queries whatever the number of teams."""
    team_ids = list(team_ids)
    groups = [
        (_PriceKey(*row[:-1]), row[-1])
        for row in UsageInterval.objects.filter(team_id__in=team_ids, ended_at__isnull=True)
        .values(*_PriceKey._fields)
        .annotate(count=Count("pk"))
        .values_list(*_PriceKey._fields, "count")
    ]
    book = price_book(book_key(key) for key, _ in groups)
    rates: dict[int, Decimal] = defaultdict(Decimal)
    for key, count in groups:
        point = metering.price_at(points(book, key), now)
        assert point is not None  # points() starts with the quoted price, at BEGINNING
        rates[key.team_id] += point.hourly * key.share_num / key.share_den * count
    for team, rate in charge_burn_rate(team_ids=team_ids, now=now).items():
        rates[team] += rate
    return rates


def rolled_through(*, team_ids: Iterable[int]) -> dict[int, date]:
    """The last day of each team whose DailySpend rows are complete (teams never rolled up
    are missing)."""
    return dict(
        SpendRollup.objects.filter(team_id__in=team_ids).values_list("team_id", "rolled_through")
    )


def spend_between(
    *, team_ids: Iterable[int], first: date, last: date, now: datetime, zones: Zones
) -> list[SpendLine]:
    """Spend per team, workspace, day and meter for the days ``first``..``last`` of each team:
    from DailySpend up to the day it is rolled through, computed live after that."""
    return spend_over(days={t: (first, last) for t in team_ids}, now=now, zones=zones)


def spend_over(*, days: DayRanges, now: datetime, zones: Zones) -> list[SpendLine]:
    """Like spend_between, with each team's own days ``{team_id: (first, last)}``. Four
    queries, whatever the number of teams."""
    rolled = rolled_through(team_ids=list(days))
    lines = [
        SpendLine(*row)
        for row in DailySpend.objects.filter(rolled_filter(days, rolled)).values_list(
            "team_id", "workspace_id", "kind", "day", "meter", "hours", "cost"
        )
    ]
    return lines + live_spend(windows=live_windows(days, rolled, now, zones), zones=zones)


def live_windows(days: DayRanges, rolled: dict[int, date], now: datetime, zones: Zones) -> Windows:
    """Each team's stretch of ``days`` after its rollup mark, up to now: priced live."""
    windows = {}
    for team, (first, last) in days.items():
        live_first = max(first, rolled[team] + timedelta(days=1)) if team in rolled else first
        start = day_start(live_first, zones[team])
        end = min(now, day_start(last + timedelta(days=1), zones[team]))
        if start < end:
            windows[team] = (start, end)
    return windows


def rolled_filter(days: DayRanges, rolled: dict[int, date]) -> Q:
    """Rows of each team's rolled-up stretch of ``days``; teams with the same stretch share
    one condition, so an organisation's 200 teams in one time zone make one, not 200."""
    stretches = {
        team: (first, min(last, rolled[team]))
        for team, (first, last) in days.items()
        if team in rolled and rolled[team] >= first
    }
    query = Q(pk__in=[])
    for (first, last), teams in teams_by_value(stretches).items():
        query |= Q(team_id__in=teams, day__gte=first, day__lte=last)
    return query


def teams_by_value(per_team: dict[int, _V]) -> dict[_V, list[int]]:
    """{value: [team ids]} of ``{team_id: value}``: teams that share a window or a month
    share one SQL condition (Django compiles each condition in Python, per request)."""
    teams: dict[_V, list[int]] = defaultdict(list)
    for team, value in per_team.items():
        teams[value].append(team)
    return teams
