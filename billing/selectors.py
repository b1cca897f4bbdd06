"""Spend, burn rate and budget runway, from UsageInterval rows priced by Price rows (Azure
Retail Prices API) and the DailySpend rollups. Money in USD (Decimal); days and months are
the team's, in its time zone (the idle policy's ``timezone``, UTC by default)."""

from __future__ import annotations

import heapq
import operator
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from functools import reduce
from typing import NamedTuple
from zoneinfo import ZoneInfo

from django.core.paginator import Paginator
from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    OuterRef,
    Q,
    Subquery,
    Sum,
)

from billing import csv_export, live_sql, metering
from billing.models import (
    ActualCost,
    ActualCostDay,
    DailySpend,
    DaySpend,
    EstimatedCost,
    MonthSpend,
    Price,
    PriceKind,
    SpendRollup,
    UsageInterval,
)
from common.months import month_bounds
from teams.filters import TeamFilter
from teams.models import Team
from teams.selectors import team_timezones
from workspaces.models import Kind, Workspace

CENT = metering.CENT
_BEGINNING = datetime(1970, 1, 1, tzinfo=UTC)


def day_start(day: date, tz: ZoneInfo) -> datetime:
    return datetime.combine(day, time(), tzinfo=tz)


class SpendLine(NamedTuple):
    """Cost of one workspace's meter on one day of its team's time zone (USD, unrounded). A
    tuple: pages build thousands of them per request."""

    team_id: int
    workspace_id: object
    kind: str  # the workspace's: vm, mig or namespace
    day: date
    meter: str
    hours: Decimal
    cost: Decimal


def price_book(keys) -> dict[tuple, list[metering.PricePoint]]:
    """Price points (USD/hour, sorted by start) per price book key (kind, sku, region, spot)
    for the given keys (see _book_key), in one query; none without keys."""
    if not keys:
        return {}
    rows = Price.objects.filter(
        kind__in={k[0] for k in keys}, sku__in={k[1] for k in keys}, region__in={k[2] for k in keys}
    ).order_by("effective_start")
    book: dict[tuple, list] = defaultdict(list)
    for p in rows:
        book[(p.kind, p.sku, p.region, p.spot)].append(
            metering.PricePoint(p.effective_start, p.hourly)
        )
    return book


def _points(book: dict, interval) -> list[metering.PricePoint]:
    """The interval's price points; before the first (or with none) the price quoted when it
    opened applies, so spend never goes unpriced."""
    quoted = metering.PricePoint(_BEGINNING, interval.price_per_hour)
    return [quoted, *book.get(_book_key(interval), [])]


class _Interval(NamedTuple):
    """A UsageInterval row as the pricing loops read it (tuples: cheap for many rows)."""

    team_id: int
    workspace_id: object
    kind: str  # the workspace's
    meter: str
    price_kind: str
    sku: str
    region: str
    spot: bool
    share_num: int
    share_den: int
    started_at: datetime
    ended_at: datetime | None
    price_per_hour: Decimal


_INTERVAL_FIELDS = _Interval._fields


def _intervals(queryset) -> list[_Interval]:
    return [_Interval._make(row) for row in queryset.values_list(*_INTERVAL_FIELDS)]


def live_spend(
    *, windows: dict[int, tuple[datetime, datetime]], zones: dict[int, ZoneInfo]
) -> list[SpendLine]:
    """Spend per team, workspace, day and meter computed from intervals and prices, each team
    over its own window ``(start, end)``; end is at most now. Two queries; two more when a
    window spans a local midnight or a price changes inside a one-day window.

    A window within one local day (the spend pages' today) is summed in SQL: the allocated
    time per workspace, meter and price, clipped to the window, priced at the price in
    effect over the window (in SQL on PostgreSQL, see billing.live_sql), so the rows read
    grow with the workspaces, not with their sessions. A window across local midnights, and
    a meter whose price changes inside its window, are priced interval by interval, cut at
    each midnight and price change."""
    if not windows:
        return []
    one_day, split = _spans(windows, zones)
    totals: dict[tuple, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    changing = _add_day_sums(totals, one_day, zones)
    intervals = _intervals(_overlapping(split)) if split else []
    if changing:
        intervals += _intervals(_overlapping(one_day, keys=changing))
    book = price_book({_book_key(i) for i in intervals})
    points: dict[tuple, list[metering.PricePoint]] = {}
    midnights = {t: metering.local_midnights(*w, zones[t]) for t, w in windows.items()}
    for i in intervals:
        team, prices = i.team_id, _cached_points(points, book, i)
        for day, hours, cost in _priced(i, prices, windows[team], zones[team], midnights[team]):
            _add(totals, i, day, hours, cost)
    return [SpendLine._make((*key, hours, cost)) for key, (hours, cost) in totals.items()]


def _spans(windows: dict, zones: dict) -> tuple[dict, dict]:
    """The windows within one local day of their team, and the others."""
    one_day = {t: w for t, w in windows.items() if not metering.local_midnights(*w, zones[t])}
    return one_day, {t: w for t, w in windows.items() if t not in one_day}


def _add_day_sums(totals: dict, windows: dict, zones: dict) -> set[tuple]:
    """Add the one-day windows' spend per workspace and meter to ``totals``, except for the
    prices that change inside a window: returns their price book keys, to be priced
    interval by interval. Two queries (none without windows): on PostgreSQL the prices
    changing and the lines priced in SQL (exact numeric); elsewhere the sums and their
    prices, priced in Python (SQLite has no exact decimal arithmetic)."""
    if not windows:
        return set()
    if live_sql.available():
        changing = _changing_prices(windows)
        rows = (
            (team, workspace, kind, meter, micro / _PER_HOUR, cost)
            for team, workspace, kind, meter, micro, cost in live_sql.day_lines(
                _overlapping(windows), windows
            )
        )
    else:
        rows, changing = _day_sums_in_python(windows)
    days = {t: w[0].astimezone(zones[t]).date() for t, w in windows.items()}
    for team, workspace, kind, meter, hours, cost in rows:
        key = (team, workspace, kind, days[team], meter)
        if key in totals:
            totals[key][0] += hours
            totals[key][1] += cost
        else:  # kept whole: a sum would round SQL's exact cost to 28 digits before the cent
            totals[key] = [hours, cost]
    return changing


def _day_sums_in_python(windows: dict) -> tuple[list[tuple], set[tuple]]:
    """(team, workspace, kind, meter, hours, USD unrounded) of the one-day windows, and the
    price book keys changing inside a window (left out). Two queries."""
    sums = _clipped_sums(windows)
    book = price_book({_book_key(s) for s in sums})
    changing = _changing(book, windows.values())
    rates: dict[tuple, Decimal] = {}  # USD/hour per team and meter price
    rows = []
    for s in sums:
        if _book_key(s) in changing:
            continue
        key = (s.team_id, *_book_key(s), s.price_per_hour)
        if key not in rates:
            rates[key] = metering.price_at(_points(book, s), windows[s.team_id][0]).hourly
        micro = s.allocated // _MICROSECOND
        cost = metering.cost_of(micro, rates[key], (s.share_num, s.share_den))
        rows.append((s.team_id, s.workspace_id, s.kind, s.meter, micro / _PER_HOUR, cost))
    return rows, changing


def _changing_prices(windows: dict) -> set[tuple]:
    """Price book keys with a price change strictly inside one of the windows (as
    billing.live_sql leaves out). One query."""
    bounds = list(windows.values())
    changes = Price.objects.filter(
        effective_start__gt=min(b[0] for b in bounds), effective_start__lt=max(b[1] for b in bounds)
    ).values_list("kind", "sku", "region", "spot", "effective_start")
    book: dict[tuple, list] = defaultdict(list)
    for *key, start in changes:
        book[tuple(key)].append(metering.PricePoint(start, Decimal(0)))
    return _changing(book, bounds)


_MICROSECOND = timedelta(microseconds=1)
_PER_HOUR = metering.MICROSECONDS_PER_HOUR


def _book_key(row) -> tuple:
    return (row.price_kind, row.sku, row.region, row.spot)


def _cached_points(cache: dict, book: dict, row) -> list[metering.PricePoint]:
    key = (*_book_key(row), row.price_per_hour)
    if key not in cache:
        cache[key] = _points(book, row)
    return cache[key]


def _add(totals: dict, row, day: date, hours: Decimal, cost: Decimal) -> None:
    total = totals[(row.team_id, row.workspace_id, row.kind, day, row.meter)]
    total[0] += hours
    total[1] += cost


def _changing(book: dict, windows) -> set[tuple]:
    """Price book keys with a price change strictly inside one of the windows."""
    return {
        key
        for key, prices in book.items()
        if any(start < p.start < end for p in prices for start, end in windows)
    }


class _Sum(NamedTuple):
    """Allocated time of one workspace's meter at one price within a team's window."""

    team_id: int
    workspace_id: object
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


def _clipped_sums(windows: dict[int, tuple[datetime, datetime]]) -> list[_Sum]:
    """Per team, workspace, meter and price: the intervals' time within the team's window,
    summed in SQL (one query)."""
    clipped = ExpressionWrapper(live_sql.clipped(windows), output_field=DurationField())
    rows = (
        _overlapping(windows)
        .values_list(*_INTERVAL_FIELDS[:-3], "price_per_hour")
        .annotate(allocated=Sum(clipped))
    )
    return [_Sum._make(row) for row in rows]


def _overlapping(windows: dict, keys: set[tuple] | None = None):
    """UsageInterval rows of each team in ``windows`` that overlap its window; only those
    whose price book key is in ``keys``, when given."""
    query = Q(pk__in=[])
    for (start, end), teams in _teams_by_value(windows).items():
        query |= Q(team_id__in=teams, started_at__lt=end) & (
            Q(ended_at__isnull=True) | Q(ended_at__gt=start)
        )
    if keys is not None:
        query &= reduce(
            operator.or_,
            (Q(price_kind=k, sku=s, region=r, spot=spot) for k, s, r, spot in keys),
            Q(pk__in=[]),
        )
    return UsageInterval.objects.filter(query)


def _priced(i: _Interval, prices, window, tz, midnights) -> list[tuple]:
    """[(local day, hours, USD)] of the interval within the window, cut at each midnight in
    ``midnights`` and each price change."""
    return [
        (piece.day, piece.hours, piece.cost)
        for piece in metering.pieces(
            started_at=i.started_at,
            ended_at=i.ended_at,
            prices=prices,
            window=window,
            tz=tz,
            share=(i.share_num, i.share_den),
            midnights=midnights,
        )
    ]


def team_burn_rate(*, team_ids, now: datetime) -> dict[int, Decimal]:
    """The burn rate: USD/hour that Azure bills each team for at ``now``, the one definition
    every page and email shows ({team_id: Decimal}; teams burning nothing may be missing).

    What counts: every open UsageInterval (billing.services.usage_meter), priced at the price
    in effect at ``now``. So a VM burns its compute while allocated (states.BILLABLE) and its
    OS disk from its first run until it is deleted, stopped or not; a MIG slice or namespace
    burns while running (states.BILLABLE_ON_AKS). A workspace pending approval, waiting for
    Azure (requested: it holds GPU quota, see team_gpus_in_use) or failed burns nothing.
    Open intervals are counted per meter price in SQL, so the rows read do not grow with the
    fleet: two queries whatever the number of teams."""
    groups = list(
        UsageInterval.objects.filter(team_id__in=team_ids, ended_at__isnull=True)
        .values(*_PRICE_FIELDS)
        .annotate(count=Count("pk"))
        .values_list(*_PRICE_FIELDS, "count")
    )
    keys = [_PriceKey._make(g[:-1]) for g in groups]
    book = price_book({_book_key(k) for k in keys})
    rates: dict[int, Decimal] = defaultdict(Decimal)
    for key, group in zip(keys, groups, strict=True):
        point = metering.price_at(_points(book, key), now)
        rates[key.team_id] += point.hourly * key.share_num / key.share_den * group[-1]
    return rates


# The old name, kept for callers written before it became the figure's one selector.
burn_rates = team_burn_rate


class _PriceKey(NamedTuple):
    team_id: int
    price_kind: str
    sku: str
    region: str
    spot: bool
    share_num: int
    share_den: int
    price_per_hour: Decimal


_PRICE_FIELDS = _PriceKey._fields


def rolled_through(*, team_ids) -> dict[int, date]:
    """The last day of each team whose DailySpend rows are complete (teams never rolled up
    are missing)."""
    return dict(
        SpendRollup.objects.filter(team_id__in=team_ids).values_list("team_id", "rolled_through")
    )


def spend_between(
    *, team_ids, first: date, last: date, now: datetime, zones: dict[int, ZoneInfo]
) -> list[SpendLine]:
    """Spend per team, workspace, day and meter for the days ``first``..``last`` of each team:
    from DailySpend up to the day it is rolled through, computed live after that."""
    return spend_over(days={t: (first, last) for t in team_ids}, now=now, zones=zones)


def spend_over(
    *, days: dict[int, tuple[date, date]], now: datetime, zones: dict[int, ZoneInfo]
) -> list[SpendLine]:
    """Like spend_between, with each team's own days ``{team_id: (first, last)}``. Four
    queries, whatever the number of teams."""
    rolled = rolled_through(team_ids=list(days))
    lines = [
        SpendLine(**row)
        for row in DailySpend.objects.filter(_rolled_filter(days, rolled)).values(
            "team_id", "workspace_id", "kind", "day", "meter", "hours", "cost"
        )
    ]
    return lines + live_spend(windows=_live_windows(days, rolled, now, zones), zones=zones)


def _live_windows(days: dict, rolled: dict, now: datetime, zones: dict) -> dict:
    """Each team's stretch of ``days`` after its rollup mark, up to now: priced live."""
    windows = {}
    for team, (first, last) in days.items():
        live_first = max(first, rolled[team] + timedelta(days=1)) if team in rolled else first
        start = day_start(live_first, zones[team])
        end = min(now, day_start(last + timedelta(days=1), zones[team]))
        if start < end:
            windows[team] = (start, end)
    return windows


def _rolled_filter(days: dict, rolled: dict) -> Q:
    """Rows of each team's rolled-up stretch of ``days``; teams with the same stretch share
    one condition, so an organisation's 200 teams in one time zone make one, not 200."""
    spans = {
        team: (first, min(last, rolled[team]))
        for team, (first, last) in days.items()
        if team in rolled and rolled[team] >= first
    }
    query = Q(pk__in=[])
    for (first, last), teams in _teams_by_value(spans).items():
        query |= Q(team_id__in=teams, day__gte=first, day__lte=last)
    return query


def _teams_by_value(per_team: dict) -> dict:
    """{value: [team ids]} of ``{team_id: value}``: teams that share a window or a month
    share one SQL condition (Django compiles each condition in Python, per request)."""
    teams: dict = defaultdict(list)
    for team, value in per_team.items():
        teams[value].append(team)
    return teams


def offering_spot_price(*, now: datetime) -> Subquery:
    """For SizeOffering rows: the Spot price (USD/hour) of the row's vm_size and region in
    effect at ``now``, from the Price rows (Azure Retail Prices API, synced by sync_prices),
    None where Azure has none. What workspaces.selectors annotates offerings with
    (workspaces.hooks.spot_price)."""
    latest = Price.objects.filter(
        kind=PriceKind.VM,
        spot=True,
        unit="1 Hour",
        sku=OuterRef("vm_size"),
        region=OuterRef("region"),
        effective_start__lte=now,
    ).order_by("-effective_start")
    return Subquery(latest.values("unit_price")[:1])


@dataclass(frozen=True)
class TeamSpend:
    """A team's month so far: ``spent`` USD since the 1st (its time zone), ``burn_per_hour``
    USD/hour of what is billable now."""

    spent: Decimal
    burn_per_hour: Decimal


def team_spend(*, team_ids, now: datetime) -> dict[int, TeamSpend]:
    """Month-to-date spend and current burn rate per team: rolled-up days summed in SQL plus
    live intervals. Seven queries, whatever the number of teams or workspaces."""
    team_ids = list(team_ids)
    zones = team_timezones(team_ids=team_ids)
    months = {  # each team's month so far, in its own time zone
        t: (month_bounds(now, zones[t])[0].date(), now.astimezone(zones[t]).date())
        for t in team_ids
    }
    rolled = rolled_through(team_ids=team_ids)
    spent: dict[int, Decimal] = defaultdict(Decimal)
    for team, cost in (
        DaySpend.objects.filter(_rolled_filter(months, rolled))
        .values("team_id")
        .annotate(cost=Sum("cost"))
        .values_list("team_id", "cost")
    ):
        spent[team] += cost
    for line in live_spend(windows=_live_windows(months, rolled, now, zones), zones=zones):
        spent[line.team_id] += metering.to_cents(line.cost)  # what the CSV charges, line by line
    burn = team_burn_rate(team_ids=team_ids, now=now)
    return {t: TeamSpend(spent=spent[t], burn_per_hour=burn.get(t, Decimal(0))) for t in team_ids}


KINDS = tuple(Kind.values)  # the spend chart's series, in workspaces.models.Kind's order


@dataclass(frozen=True)
class WorkspaceSpend:
    """One workspace's spend over a period: USD (cents), hours allocated (compute)."""

    workspace_id: object
    name: str
    owner: str
    vm_size: str
    kind: str
    hours: Decimal
    cost: Decimal
    team: str = ""


@dataclass(frozen=True)
class SpendMonth:
    """A team's month: ``total`` USD so far (the sum of the CSV's cent-rounded lines),
    ``days`` as (day, {kind: USD}), the top workspaces by cost; for the current month the
    burn (USD/hour), ``forecast`` (USD at month end) and the day the budget runs out."""

    first: date
    last: date
    current: bool
    total: Decimal
    days: list
    workspaces: list
    more_workspaces: int
    budget: Decimal | None
    burn_per_hour: Decimal
    forecast: Decimal | None
    runs_out: date | None


FORECAST_METHOD = (
    "Forecast: spend so far plus, for each hour left in the month, the average of the current "
    "burn rate (what runs now, at today's prices) and this month's average hourly spend."
)


def spend_month(*, team, month: date, now: datetime, top: int = 50) -> SpendMonth:
    """The team's spend page for the calendar month starting ``month`` (its time zone).
    Rolled-up days are summed in SQL; a constant number of queries, whatever the number of
    workspaces or days."""
    tz, start, end, last, sums = _month_of(team, month, now, top=top)
    current = start <= now < end
    total = sums.total(team.pk)
    burn = (
        team_burn_rate(team_ids=[team.pk], now=now).get(team.pk, Decimal(0))
        if current
        else Decimal(0)
    )
    forecast = _forecast(total, burn, start, end, now) if current else None
    return SpendMonth(
        first=month,
        last=last,
        current=current,
        total=total,
        days=_by_day(sums.by_day[team.pk], month, last),
        workspaces=_named(sums.top),
        more_workspaces=max(0, sums.workspaces - top),
        budget=team.monthly_budget,
        burn_per_hour=burn,
        forecast=forecast,
        runs_out=_runs_out(team.monthly_budget, total, forecast, start, end, now, tz),
    )


def spend_days(*, team, month: date, now: datetime) -> tuple[list, Decimal]:
    """The team's month per day, for its chart: ([(day, {kind: USD})] for every day of the
    month starting ``month`` (its time zone), total USD). As spend_month without the
    workspaces, burn and forecast."""
    _, _, _, last, sums = _month_of(team, month, now, top=0)
    return _by_day(sums.by_day[team.pk], month, last), sums.total(team.pk)


def _month_of(team, month: date, now: datetime, *, top: int) -> tuple:
    """(time zone, start, end (aware), last day, _MonthSums) of the team's month."""
    zones = team_timezones(team_ids=[team.pk])
    tz = zones[team.pk]
    start, end = month_bounds(day_start(month, tz), tz)
    last = (end - timedelta(hours=12)).date()
    return tz, start, end, last, _month_sums({team.pk: (month, last)}, now, zones, top=top)


@dataclass
class _MonthSums:
    """Per team, USD (cents) by (day, kind); across the teams, the ``top`` costliest
    workspaces as (workspace_id, kind, compute hours, USD), and how many ``workspaces``
    spent."""

    by_day: dict
    top: list
    workspaces: int

    def total(self, team: int) -> Decimal:
        return sum(self.by_day[team].values(), Decimal(0))


def _month_sums(months: dict[int, tuple[date, date]], now: datetime, zones, *, top: int):
    """Each team's spend over its month ``{team_id: (first, last)}`` and the ``top``
    workspaces (none when 0): rolled days from the DaySpend and MonthSpend summaries (per
    team and month, a row per day and kind and a row per workspace), the days after each
    team's rollup mark priced live. Five queries on PostgreSQL, where today's lines are
    priced, summed and ranked with the month in SQL (billing.live_sql); six elsewhere, or
    when a window spans midnights or holds a price change (then one or two more), whatever
    the number of teams, workspaces or days."""
    rolled = rolled_through(team_ids=list(months))
    by_day: dict[int, dict] = {team: defaultdict(Decimal) for team in months}
    day_rows = DaySpend.objects.filter(_rolled_filter(months, rolled))
    for team, day, kind, cost in day_rows.values_list("team_id", "day", "kind", "cost"):
        by_day[team][(day, kind)] += cost
    windows = _live_windows(months, rolled, now, zones)
    one_day, split = _spans(windows, zones)
    in_sql = live_sql.available() and one_day and not split and not _changing_prices(one_day)
    ranking = _ranked_in_sql if in_sql else _ranked_in_python
    ranked, count = ranking(windows, by_day, _rolled_months(months, rolled), zones, top)
    return _MonthSums(by_day, ranked, count)


def _ranked_in_sql(windows: dict, by_day: dict, rolled: list, zones: dict, top: int):
    """Add today's lines (one-day ``windows`` without a price change), rounded and summed in
    SQL, to ``by_day``; the ``top`` workspaces and how many spent (see _month_sums). One
    query."""
    kinds, ranked, count = live_sql.month_ranking(_overlapping(windows), windows, rolled, top)
    days = {t: w[0].astimezone(zones[t]).date() for t, w in windows.items()}
    for (team, kind), cost in kinds.items():
        by_day[team][(days[team], kind)] += cost
    rows = [
        (workspace, kind, hours + micro / metering.MICROSECONDS_PER_HOUR, cost)
        for workspace, _, kind, hours, micro, cost in ranked
    ]
    return rows, count


def _ranked_in_python(windows: dict, by_day: dict, rolled: list, zones: dict, top: int):
    """As _ranked_in_sql, with the live lines of ``windows`` from live_spend; the month's
    workspaces are read and ranked in Python."""
    by_workspace: dict = defaultdict(lambda: [None, 0, 0])  # [kind, compute hours, USD]
    query = reduce(operator.or_, (Q(team_id=t, month=m) for t, m in rolled), Q(pk__in=[]))
    if top:
        rows = MonthSpend.objects.filter(query)
        for workspace, kind, hours, cost in rows.values_list(
            "workspace_id", "kind", "hours", "cost"
        ):
            by_workspace[workspace] = [kind, hours, cost]
    for team, workspace, kind, day, meter, hours, cost in live_spend(windows=windows, zones=zones):
        cost = metering.to_cents(cost)  # what the CSV charges, line by line
        by_day[team][(day, kind)] += cost
        if top:
            row = by_workspace[workspace]
            row[0], row[2] = kind, row[2] + cost
            row[1] += hours if meter == "compute" else 0
    # The costliest first; ties by id, as PostgreSQL orders them.
    ranked = heapq.nsmallest(top, by_workspace.items(), key=lambda kv: (-kv[1][2], kv[0]))
    return [(pk, *row) for pk, row in ranked], len(by_workspace)


def _rolled_months(months: dict, rolled: dict) -> list[tuple[int, date]]:
    """(team, month) of the teams rolled up into the month: those with MonthSpend rows."""
    return [(t, first) for t, (first, _) in months.items() if t in rolled and rolled[t] >= first]


def _rate(total: Decimal, burn: Decimal, start: datetime, now: datetime) -> Decimal:
    elapsed = metering.hours_between(start, now)
    trend = total / elapsed if elapsed > 0 else burn
    return (burn + trend) / 2


def _forecast(total: Decimal, burn: Decimal, start, end, now) -> Decimal:
    rate = _rate(total, burn, start, now)
    return metering.to_cents(total + rate * metering.hours_between(now, end))


def _runs_out(budget, total, forecast, start, end, now, tz) -> date | None:
    """The local day the budget is used up at the forecast's rate, if before the month ends."""
    if budget is None or forecast is None or forecast <= budget:
        return None
    if total >= budget:
        return now.astimezone(tz).date()
    rate = (forecast - total) / metering.hours_between(now, end)
    return (now + timedelta(hours=float((budget - total) / rate))).astimezone(tz).date()


def _by_day(by_day: dict, first: date, last: date) -> list:
    """[(day, {kind: USD})] for every day first..last, zero where nothing ran."""
    days = {
        first + timedelta(days=n): dict.fromkeys(KINDS, Decimal(0))
        for n in range((last - first).days + 1)
    }
    for (day, kind), cost in by_day.items():
        days[day][kind] += cost
    return sorted(days.items())


def _named(rows: list[tuple]) -> list[WorkspaceSpend]:
    """WorkspaceSpend for (workspace_id, kind, hours, USD) rows, in their order. One query."""
    names = {
        w["pk"]: w
        for w in Workspace.objects.filter(pk__in=[r[0] for r in rows]).values(
            "pk", "name", "owner__username", "vm_size", "team__name"
        )
    }
    return [
        WorkspaceSpend(
            pk,
            names[pk]["name"],
            names[pk]["owner__username"],
            names[pk]["vm_size"],
            kind,
            hours,
            cost,
            names[pk]["team__name"],
        )
        for pk, kind, hours, cost in rows
    ]


@dataclass(frozen=True)
class TeamMonth:
    """One team's month so far for the platform admin: USD ``spent``, ``budget`` (None: no
    limit) and ``used_percent`` of it, ``burn_per_hour`` USD/hour, ``forecast`` USD at month
    end, the local day the budget ``runs_out`` (None if it lasts)."""

    team: object
    spent: Decimal
    budget: Decimal | None
    used_percent: Decimal | None
    burn_per_hour: Decimal
    forecast: Decimal
    runs_out: date | None


@dataclass(frozen=True)
class SpendOverview:
    """All teams' months so far, their sums (USD) and the top workspaces across teams."""

    teams: list[TeamMonth]
    spent: Decimal
    forecast: Decimal
    workspaces: list[WorkspaceSpend]


def spend_overview(*, teams, now: datetime, top: int = 20) -> SpendOverview:
    """Month-to-date spend, budget use, burn, forecast and runway of every team (each in its
    own time zone) and the ``top`` workspaces by cost. Ten queries, whatever the number of
    teams or workspaces."""
    teams = list(teams)
    ids = [t.pk for t in teams]
    zones = team_timezones(team_ids=ids)
    months = {
        t: (month_bounds(now, zones[t])[0].date(), now.astimezone(zones[t]).date()) for t in ids
    }
    sums = _month_sums(months, now, zones, top=top)
    burn = team_burn_rate(team_ids=ids, now=now)
    rows = [
        _team_month(team, sums.total(team.pk), burn.get(team.pk, Decimal(0)), zones[team.pk], now)
        for team in teams
    ]
    return SpendOverview(
        teams=rows,
        spent=sum((r.spent for r in rows), Decimal(0)),
        forecast=sum((r.forecast for r in rows), Decimal(0)),
        workspaces=_named(sums.top),
    )


# The all-teams table's sort keys (as in the URL) and the TeamMonth value each orders by.
TEAM_MONTH_SORTS = {
    "team": lambda r: r.team.name.lower(),
    "spent": lambda r: r.spent,
    "used": lambda r: r.used_percent if r.used_percent is not None else Decimal(-1),
    "burn": lambda r: r.burn_per_hour,
    "forecast": lambda r: r.forecast,
}


@dataclass
class TeamMonthPage:
    """One page of the all-teams table: ``filters`` (bound teams.filters.TeamFilter),
    ``page`` (Django's Page of TeamMonth rows), ``sort`` (its key, "-" for descending)."""

    filters: object
    page: object
    sort: str


def team_month_page(*, overview: SpendOverview, params, size: int = 50) -> TeamMonthPage:
    """The page of ``overview``'s team rows that the query string ``params`` asks for:
    searched by ``q`` (team name), sorted by ``sort`` (a TEAM_MONTH_SORTS key; the largest
    spend first by default), page ``page``. The totals stay those of every team. One query
    (the search), the rows being computed already."""
    filters = TeamFilter(params, queryset=Team.objects.all())
    rows = overview.teams
    if filters.is_valid() and filters.form.cleaned_data.get("q"):
        found = set(filters.qs.values_list("pk", flat=True))
        rows = [r for r in rows if r.team.pk in found]
    key = params.get("sort") if isinstance(params.get("sort"), str) else ""
    if key.lstrip("-") not in TEAM_MONTH_SORTS:
        key = "-spent"
    rows = sorted(rows, key=lambda r: r.team.name.lower())  # ties by name
    rows.sort(key=TEAM_MONTH_SORTS[key.lstrip("-")], reverse=key.startswith("-"))
    page = Paginator(rows, size).get_page(params.get("page"))
    return TeamMonthPage(filters=filters, page=page, sort=key)


def _team_month(team, spent: Decimal, burn: Decimal, tz, now: datetime) -> TeamMonth:
    start, end = month_bounds(now, tz)
    forecast = _forecast(spent, burn, start, end, now)
    budget = team.monthly_budget
    used = (spent * 100 / budget).quantize(Decimal("0.1")) if budget else None
    runs_out = _runs_out(budget, spent, forecast, start, end, now, tz)
    return TeamMonth(team, spent, budget, used, burn, forecast, runs_out)


EXPORT_CHUNK_DAYS = 7


def spend_export(*, teams, first: date, last: date, now: datetime) -> Iterator[list[str]]:
    """Chargeback rows (billing.csv_export.HEADER) for the teams over the days first..last of
    each team's time zone, in day order. Made a week at a time, so a year of a large fleet
    streams in bounded memory; a constant few queries per week."""
    teams = list(teams)
    names = {t.pk: t.name for t in teams}
    zones = team_timezones(team_ids=list(names))
    while first <= last:
        week_last = min(last, first + timedelta(days=EXPORT_CHUNK_DAYS - 1))
        lines = spend_between(
            team_ids=list(names), first=first, last=week_last, now=now, zones=zones
        )
        yield from csv_export.rows(lines, _export_workspaces(lines), names)
        first = week_last + timedelta(days=1)


def _export_workspaces(lines) -> dict:
    return {
        w["pk"]: w
        for w in Workspace.objects.filter(pk__in={ln.workspace_id for ln in lines}).values(
            "pk", "name", "owner__username", "vm_size"
        )
    }


@dataclass(frozen=True)
class WorkspaceCost:
    """What a workspace has cost: ``total`` and ``month`` (its team's month so far), USD to
    the cent; ``per_hour`` USD/hour it costs now, of which ``disk_per_hour`` for its OS disk."""

    total: Decimal
    month: Decimal
    per_hour: Decimal
    disk_per_hour: Decimal


def workspace_cost(*, workspace, now: datetime) -> WorkspaceCost:
    """The workspace's cost so far and now. Three queries."""
    tz = team_timezones(team_ids=[workspace.team_id])[workspace.team_id]
    month_start, _ = month_bounds(now, tz)
    intervals = _intervals(workspace.usage_intervals.all())
    book = price_book({_book_key(i) for i in intervals})
    total = month = per_hour = disk = Decimal(0)
    for i in intervals:
        points = _points(book, i)
        share = (i.share_num, i.share_den)
        for piece in metering.pieces(
            started_at=i.started_at,
            ended_at=i.ended_at,
            prices=points,
            window=(_BEGINNING, now),
            tz=tz,
            share=share,
        ):
            total += piece.cost
            month += piece.cost if piece.start >= month_start else 0
        if i.ended_at is None:
            hourly = metering.price_at(points, now).hourly * share[0] / share[1]
            per_hour += hourly
            disk += hourly if i.meter == "disk" else 0
    return WorkspaceCost(metering.to_cents(total), metering.to_cents(month), per_hour, disk)


# --- reconciliation with Azure's actual cost ---------------------------------------------------

RECONCILE_TOLERANCE_PERCENT = Decimal("2")


@dataclass(frozen=True)
class CostComparison:
    """The portal's ``estimate`` and Azure's ``actual`` cost over the same UTC days (USD, to
    the cent); ``difference`` = actual - estimate (USD); ``percent`` = difference as a percent
    of the estimate, to 0.1 (None when the estimate is 0); ``flagged`` when |difference| is
    more than RECONCILE_TOLERANCE_PERCENT of the estimate (any difference when it is 0)."""

    estimate: Decimal
    actual: Decimal
    difference: Decimal
    percent: Decimal | None
    flagged: bool


def cost_comparison(*, estimate: Decimal, actual: Decimal) -> CostComparison:
    """Compare two USD amounts rounded to the cent (see CostComparison)."""
    estimate, actual = metering.to_cents(estimate), metering.to_cents(actual)
    difference = actual - estimate
    if estimate == 0:
        return CostComparison(estimate, actual, difference, None, difference != 0)
    ratio = difference * 100 / estimate
    flagged = abs(ratio) > RECONCILE_TOLERANCE_PERCENT
    return CostComparison(estimate, actual, difference, ratio.quantize(Decimal("0.1")), flagged)


@dataclass(frozen=True)
class WorkspaceReconciliation:
    workspace_id: object
    name: str
    comparison: CostComparison


@dataclass(frozen=True)
class TeamReconciliation:
    team_id: int
    name: str
    comparison: CostComparison
    workspaces: list[WorkspaceReconciliation]
    more: int = 0  # workspaces not listed
    more_flagged: int = 0  # of them, differing by more than the tolerance


@dataclass(frozen=True)
class Reconciliation:
    """The portal's estimate against Azure's actual cost (Cost Management) per team and per
    workspace, over ``days``: the UTC days from ``first`` to ``last`` whose Azure costs were
    fetched after the day ended (``fetched_at``: the latest such fetch; the estimate is the
    one computed at that fetch, see cost_reconciliation). ``unattributed``: USD
    Azure charged on those days to resources without a portal workspace's tag (None unless
    asked for). Empty ``days``: Azure's costs are not in yet."""

    first: date
    last: date
    days: list[date]
    fetched_at: datetime | None
    teams: list[TeamReconciliation]
    unattributed: Decimal | None
    tolerance: Decimal = RECONCILE_TOLERANCE_PERCENT

    @property
    def available(self) -> bool:
        return bool(self.days)


def reconciled_days(*, first: date, last: date) -> tuple[list[date], datetime | None]:
    """UTC days first..last fetched from Azure after they ended, and the latest such fetch."""
    fetched = ActualCostDay.objects.filter(day__gte=first, day__lte=last)
    done = [(f.day, f.fetched_at) for f in fetched if f.fetched_at >= _utc_midnight_after(f.day)]
    return [day for day, _ in done], max((at for _, at in done), default=None)


def _utc_midnight_after(day: date) -> datetime:
    return datetime.combine(day + timedelta(days=1), time(), tzinfo=UTC)


def cost_reconciliation(
    *, team_ids, first: date, last: date, include_unattributed: bool = False, top: int | None = 50
) -> Reconciliation:
    """The teams' estimate against Azure's actual cost over the UTC days first..last that
    Azure has reported (see Reconciliation).

    The estimate is the one stored when Azure's days were fetched (EstimatedCost, written by
    billing.services.cost_estimates_store at ``fetched_at``, and again after a price
    correction): UsageInterval priced by Price over the same UTC days, as of that fetch, so
    both sides are snapshots of one moment; usage recorded later shows from the next fetch.
    Azure's days are UTC days, while the spend pages and DailySpend use the team's time zone,
    so for a team outside UTC the estimate differs from the page's month total by the hours
    at either end. Azure attributes cost by each resource's ``workspace`` tag; what it could
    not attribute is ``unattributed`` (with include_unattributed). Each team lists ``top``
    workspaces (those over the tolerance first, then the costliest; None: all) and counts the
    rest. Five queries at most, whatever the number of teams, workspaces and days.
    """
    team_ids = list(team_ids)
    days, fetched_at = reconciled_days(first=first, last=last)
    if not days or not team_ids:
        return Reconciliation(first, last, days, fetched_at, [], None)
    estimates = _estimates(team_ids, days)
    actuals, unattributed = _actuals(team_ids, days, include_unattributed)
    teams = _reconciled_teams(team_ids, estimates, actuals, top)
    return Reconciliation(first, last, days, fetched_at, teams, unattributed)


def _estimates(team_ids, days: list[date]) -> dict[tuple, Decimal]:
    """USD estimated per (team, workspace) over the UTC days, unrounded, summed in SQL from
    the stored EstimatedCost rows. One query."""
    rows = (
        EstimatedCost.objects.filter(team_id__in=team_ids, day__in=days)
        .values("team_id", "workspace_id")
        .annotate(total=Sum("cost"))
        .values_list("team_id", "workspace_id", "total")
    )
    return {(team, workspace): total for team, workspace, total in rows}


def _actuals(team_ids, days: list[date], unattributed: bool) -> tuple[dict, Decimal | None]:
    """USD Azure charged per (team, workspace) over the days, and what it charged to no portal
    workspace (when asked), summed in SQL. One query."""
    scope = Q(team_id__in=team_ids) | (Q(team__isnull=True) if unattributed else Q(pk__in=[]))
    rows = (
        ActualCost.objects.filter(scope, day__in=days)
        .values("team_id", "workspace_id")
        .annotate(total=Sum("cost"))
        .values_list("team_id", "workspace_id", "total")
    )
    totals, loose = {}, Decimal(0)
    for team, workspace, cost in rows:
        if team is None:
            loose += cost
        else:
            totals[(team, workspace)] = cost
    return totals, (metering.to_cents(loose) if unattributed else None)


def _reconciled_teams(team_ids, estimates: dict, actuals: dict, top) -> list[TeamReconciliation]:
    """Per team (by name): its total and its ``top`` workspaces, those differing by more than
    the tolerance first, then the costliest (all of them when ``top`` is None). Two queries."""
    by_team = defaultdict(list)
    zero = Decimal(0)
    for key in set(estimates) | set(actuals):
        comparison = cost_comparison(
            estimate=estimates.get(key, zero), actual=actuals.get(key, zero)
        )
        by_team[key[0]].append((key[1], comparison))
    shown = {}
    for team, rows in by_team.items():
        rows.sort(key=lambda r: (not r[1].flagged, -max(r[1].estimate, r[1].actual)))
        shown[team] = rows if top is None else rows[:top]
    names = _workspace_names([w for rows in shown.values() for w, _ in rows])
    teams = []
    for team in Team.objects.filter(pk__in=team_ids).order_by("name").values("pk", "name"):
        mine = by_team.get(team["pk"], [])
        listed = [
            WorkspaceReconciliation(w, names.get(w, "(workspace removed)"), c)
            for w, c in shown.get(team["pk"], [])
        ]
        total = cost_comparison(
            estimate=sum((estimates.get((team["pk"], w), zero) for w, _ in mine), zero),
            actual=sum((actuals.get((team["pk"], w), zero) for w, _ in mine), zero),
        )
        hidden = mine[len(listed) :]
        more_flagged = sum(1 for _, c in hidden if c.flagged)
        teams.append(
            TeamReconciliation(team["pk"], team["name"], total, listed, len(hidden), more_flagged)
        )
    return teams


def _workspace_names(ids) -> dict:
    return dict(Workspace.objects.filter(pk__in=ids).values_list("pk", "name"))


def spend_overview_chart(*, overview: SpendOverview, top: int = 12) -> dict:
    """The all-teams chart's data, from ``overview`` (no query): the ``top`` teams by
    forecast, then one bar for all the others, as {"currency": "USD", "teams": [names],
    "spent": [USD str], "rest": [forecast minus spent, USD str], "budget": [USD str or None]}.
    A month-end forecast per bar, split into what is spent and what the burn adds."""
    rows = sorted(overview.teams, key=lambda r: (-r.forecast, r.team.name))
    bars = [(r.team.name, r.spent, r.forecast, r.budget) for r in rows[:top]]
    others = rows[top:]
    if others:
        spent = sum((r.spent for r in others), Decimal(0))
        forecast = sum((r.forecast for r in others), Decimal(0))
        bars.append((f"{len(others)} other teams", spent, forecast, None))
    return {
        "currency": "USD",
        "teams": [name for name, *_ in bars],
        "spent": [f"{spent:.2f}" for _, spent, _, _ in bars],
        "rest": [f"{max(forecast - spent, Decimal(0)):.2f}" for _, spent, forecast, _ in bars],
        "budget": [None if budget is None else f"{budget:.2f}" for *_, budget in bars],
    }
