"""A team's month: spend so far per day and kind and its costliest workspaces, from the
DaySpend and MonthSpend summaries of the rolled-up days plus the days after the rollup mark
priced live (billing.live_spend; ranked in SQL on PostgreSQL, billing.live_sql). Money in USD
(Decimal, summed from cent-rounded lines, as the CSV charges); days in the team's time zone."""

from __future__ import annotations

import heapq
import operator
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import reduce
from uuid import UUID
from zoneinfo import ZoneInfo

from django.db.models import Q, Sum

from billing import live_sql, metering
from billing.charges import (
    CHARGE_KINDS,
    RESERVATION,
    STORAGE,
    ChargeLine,
    ChargeSpend,
    charge_lines,
    charge_spend,
)
from billing.forecast import forecast as month_forecast
from billing.forecast import runs_out
from billing.live_spend import (
    DayRanges,
    changing_prices,
    live_spend,
    live_windows,
    overlapping,
    rolled_filter,
    rolled_through,
    spans,
    team_burn_rate,
)
from billing.models import DaySpend, MonthSpend
from billing.pricing import Windows, Zones, day_start
from common.months import month_bounds
from teams.models import Team
from teams.selectors import team_timezones
from workspaces.backends import backends
from workspaces.models import Workspace

DayCosts = list[tuple[date, dict[str, Decimal]]]  # [(day, {kind: USD})], a chart's days


@dataclass(frozen=True)
class TeamSpend:
    """A team's month so far: ``spent`` USD since the 1st (its time zone), ``burn_per_hour``
    USD/hour of what is billable now."""

    spent: Decimal
    burn_per_hour: Decimal


def month_so_far(team_ids: Iterable[int], now: datetime, zones: Zones) -> DayRanges:
    """Each team's month so far ``{team_id: (1st, today)}``, in its own time zone."""
    return {
        t: (month_bounds(now, zones[t])[0].date(), now.astimezone(zones[t]).date())
        for t in team_ids
    }


def team_spend(*, team_ids: Iterable[int], now: datetime) -> dict[int, TeamSpend]:
    """Month-to-date spend and current burn rate per team: rolled-up days summed in SQL plus
    live intervals, plus the teams' storage and reservation charges (billing.charges).
    Thirteen queries, whatever the number of teams, workspaces, shares or bookings."""
    team_ids = list(team_ids)
    zones = team_timezones(team_ids=team_ids)
    months = month_so_far(team_ids, now, zones)
    rolled = rolled_through(team_ids=team_ids)
    spent: dict[int, Decimal] = defaultdict(Decimal)
    for team, cost in (
        DaySpend.objects.filter(rolled_filter(months, rolled))
        .values("team_id")
        .annotate(cost=Sum("cost"))
        .values_list("team_id", "cost")
    ):
        spent[team] += cost
    for line in live_spend(windows=live_windows(months, rolled, now, zones), zones=zones):
        spent[line.team_id] += metering.to_cents(line.cost)  # what the CSV charges, line by line
    for charge in _charge_lines(months, now, zones):
        spent[charge.team_id] += metering.to_cents(charge.cost)  # as the CSV charges it
    burn = team_burn_rate(team_ids=team_ids, now=now)
    return {t: TeamSpend(spent=spent[t], burn_per_hour=burn.get(t, Decimal(0))) for t in team_ids}


@dataclass(frozen=True)
class WorkspaceSpend:
    """One workspace's spend over a period: USD (cents), hours allocated (compute)."""

    workspace_id: UUID
    name: str
    owner: str
    size_label: str  # Workspace.size_label: "A100 1g.10gb" for a MIG slice
    kind: str
    hours: Decimal
    cost: Decimal
    team: str = ""


@dataclass(frozen=True)
class SpendMonth:
    """A team's month: ``total`` USD so far (the sum of the CSV's cent-rounded lines),
    ``days`` as (day, {kind: USD}), the top workspaces by cost; for the current month the
    burn (USD/hour), ``forecast`` (USD at month end) and the day the budget runs out;
    ``charges``: its shares, homes and bookings over the month (ChargeSpend)."""

    first: date
    last: date
    current: bool
    total: Decimal
    days: DayCosts
    workspaces: list[WorkspaceSpend]
    more_workspaces: int
    budget: Decimal | None
    burn_per_hour: Decimal
    forecast: Decimal | None
    runs_out: date | None
    charges: list[ChargeSpend] = field(default_factory=list)


def spend_month(*, team: Team, month: date, now: datetime, top: int = 50) -> SpendMonth:
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
    expected = month_forecast(total, burn, start, end, now) if current else None
    return SpendMonth(
        first=month,
        last=last,
        current=current,
        total=total,
        days=_by_day(sums.by_day[team.pk], month, _shown_last(last, now, tz)),
        workspaces=named(sums.top),
        more_workspaces=max(0, sums.workspaces - top),
        budget=team.monthly_budget,
        burn_per_hour=burn,
        forecast=expected,
        runs_out=runs_out(team.monthly_budget, total, expected, end, now, tz),
        charges=charge_spend(ln for ln in sums.charges if ln.team_id == team.pk),
    )


def spend_days(*, team: Team, month: date, now: datetime) -> tuple[DayCosts, Decimal]:
    """The team's month per day, for its chart: ([(day, {kind: USD})] for every day of the
    month starting ``month`` (its time zone), total USD). As spend_month without the
    workspaces, burn and forecast."""
    tz, _, _, last, sums = _month_of(team, month, now, top=0)
    return _by_day(sums.by_day[team.pk], month, _shown_last(last, now, tz)), sums.total(team.pk)


def _shown_last(last: date, now: datetime, tz: ZoneInfo) -> date:
    """The last day a month's table lists: today (the team's zone) in the current month, so
    no day that has not come yet reads "$0.00"; a future month lists none."""
    return min(last, now.astimezone(tz).date())


def _month_of(
    team: Team, month: date, now: datetime, *, top: int
) -> tuple[ZoneInfo, datetime, datetime, date, MonthSums]:
    """(time zone, start, end (aware), last day, MonthSums) of the team's month."""
    zones = team_timezones(team_ids=[team.pk])
    tz = zones[team.pk]
    start, end = month_bounds(day_start(month, tz), tz)
    last = (end - timedelta(hours=12)).date()
    return tz, start, end, last, month_sums({team.pk: (month, last)}, now, zones, top=top)


@dataclass
class RankedWorkspace:
    """A workspace's month: its ``kind``, compute ``hours`` and USD ``cost`` (cents)."""

    workspace_id: UUID
    kind: str
    hours: Decimal
    cost: Decimal


ByDay = dict[tuple[date, str], Decimal]  # USD (cents) per (day, kind)


@dataclass
class MonthSums:
    """Per team, USD (cents) by (day, kind); across the teams, the ``top`` costliest
    workspaces, and how many ``workspaces`` spent; the teams' charge lines (billing.charges)."""

    by_day: dict[int, ByDay]
    top: list[RankedWorkspace]
    workspaces: int
    charges: list[ChargeLine]  # every team's storage and reservation lines, per day

    def total(self, team: int) -> Decimal:
        return sum(self.by_day[team].values(), Decimal(0))


def month_sums(months: DayRanges, now: datetime, zones: Zones, *, top: int) -> MonthSums:
    """Each team's spend over its month ``{team_id: (first, last)}`` and the ``top``
    workspaces (none when 0): rolled days from the DaySpend and MonthSpend summaries (per
    team and month, a row per day and kind and a row per workspace), the days after each
    team's rollup mark priced live, and the team's storage and reservation charges
    (billing.charges) per day as kinds "storage" and "reservation". Eight queries on
    PostgreSQL, where today's lines are priced, summed and ranked with the month in SQL
    (billing.live_sql); nine elsewhere, or when a window spans midnights or holds a price
    change (then one or two more), whatever the number of teams, workspaces or days."""
    rolled = rolled_through(team_ids=list(months))
    by_day: dict[int, ByDay] = {team: defaultdict(Decimal) for team in months}
    day_rows = DaySpend.objects.filter(rolled_filter(months, rolled))
    for team, day, kind, cost in day_rows.values_list("team_id", "day", "kind", "cost"):
        by_day[team][(day, kind)] += cost
    windows = live_windows(months, rolled, now, zones)
    one_day, split = spans(windows, zones)
    in_sql = live_sql.available() and one_day and not split and not changing_prices(one_day)
    ranking = _ranked_in_sql if in_sql else _ranked_in_python
    ranked, count = ranking(windows, by_day, _rolled_months(months, rolled), zones, top)
    charges = _charge_lines(months, now, zones)
    for line in charges:  # each resource's day rounded to the cent, as the CSV charges it
        by_day[line.team_id][(line.day, line.meter)] += metering.to_cents(line.cost)
    return MonthSums(by_day, ranked, count, charges)


def _charge_lines(months: DayRanges, now: datetime, zones: Zones) -> list[ChargeLine]:
    """The teams' storage and reservation charges (billing.charges) over their days
    ``{team_id: (first, last)}`` up to now. Three queries (none without a window)."""
    windows = {}
    for team, (first, last) in months.items():
        start = day_start(first, zones[team])
        end = min(now, day_start(last + timedelta(days=1), zones[team]))
        if start < end:
            windows[team] = (start, end)
    return charge_lines(windows=windows, zones=zones) if windows else []


_Ranked = tuple[list[RankedWorkspace], int]


def _ranked_in_sql(
    windows: Windows,
    by_day: dict[int, ByDay],
    rolled: list[tuple[int, date]],
    zones: Zones,
    top: int,
) -> _Ranked:
    """Add today's lines (one-day ``windows`` without a price change), rounded and summed in
    SQL, to ``by_day``; the ``top`` workspaces and how many spent (see month_sums). One
    query."""
    kinds, ranked, count = live_sql.month_ranking(overlapping(windows), windows, rolled, top)
    days = {t: w[0].astimezone(zones[t]).date() for t, w in windows.items()}
    for (team, kind), cost in kinds.items():
        by_day[team][(days[team], kind)] += cost
    rows = [
        RankedWorkspace(workspace, kind, hours + micro / metering.MICROSECONDS_PER_HOUR, cost)
        for workspace, _, kind, hours, micro, cost in ranked
    ]
    return rows, count


def _ranked_in_python(
    windows: Windows,
    by_day: dict[int, ByDay],
    rolled: list[tuple[int, date]],
    zones: Zones,
    top: int,
) -> _Ranked:
    """As _ranked_in_sql, with the live lines of ``windows`` from live_spend; the month's
    workspaces are read and ranked in Python."""
    by_workspace: dict[UUID, RankedWorkspace] = {}
    query = reduce(operator.or_, (Q(team_id=t, month=m) for t, m in rolled), Q(pk__in=[]))
    if top:
        rows = MonthSpend.objects.filter(query)
        for workspace, kind, hours, cost in rows.values_list(
            "workspace_id", "kind", "hours", "cost"
        ):
            by_workspace[workspace] = RankedWorkspace(workspace, kind, hours, cost)
    for line in live_spend(windows=windows, zones=zones):
        cost = metering.to_cents(line.cost)  # what the CSV charges, line by line
        by_day[line.team_id][(line.day, line.kind)] += cost
        if top:
            row = by_workspace.setdefault(
                line.workspace_id,
                RankedWorkspace(line.workspace_id, line.kind, Decimal(0), Decimal(0)),
            )
            row.kind, row.cost = line.kind, row.cost + cost
            row.hours += line.hours if line.meter == "compute" else 0
    # The costliest first; ties by id, as PostgreSQL orders them.
    ranked = heapq.nsmallest(top, by_workspace.values(), key=lambda r: (-r.cost, r.workspace_id))
    return ranked, len(by_workspace)


def _rolled_months(months: DayRanges, rolled: dict[int, date]) -> list[tuple[int, date]]:
    """(team, month) of the teams rolled up into the month: those with MonthSpend rows."""
    return [(t, first) for t, (first, _) in months.items() if t in rolled and rolled[t] >= first]


def _by_day(by_day: ByDay, first: date, last: date) -> DayCosts:
    """[(day, {kind: USD})] for every day first..last (none when last < first), zero where
    nothing ran."""
    days = {
        first + timedelta(days=n): dict.fromkeys(spend_kinds(), Decimal(0))
        for n in range((last - first).days + 1)
    }
    for (day, kind), cost in by_day.items():
        days[day][kind] = days[day].get(kind, Decimal(0)) + cost
    return sorted(days.items())


def spend_kinds() -> list[str]:
    """The spend chart's series and the table's columns: every registered kind, in the
    registry's order (workspaces.backends), then the team's charges (billing.charges)."""
    return [backend.kind for backend in backends()] + list(CHARGE_KINDS)


# The charges' legends and colours beside the workspace kinds' (WorkspaceBackend.spend_colour).
CHARGE_SERIES = {
    STORAGE: {"label": "Storage (shares and homes)", "colour": "#8c6d31"},
    RESERVATION: {"label": "Capacity reservations (bookings)", "colour": "#7b4173"},
}


def spend_series() -> dict[str, dict[str, str]]:
    """{kind: {"label", "colour"}} of every spend_kinds() series, for the chart's legend."""
    series = {b.kind: {"label": b.label, "colour": b.spend_colour} for b in backends()}
    return series | CHARGE_SERIES


# What Workspace.size_label reads: the shown size is the kind's (a MIG slice's profile).
SIZE_FACTS = ("kind", "vm_size", "gpu_model", "mig_profile", "gpu_count")


def named(rows: list[RankedWorkspace]) -> list[WorkspaceSpend]:
    """WorkspaceSpend of the ranked workspaces, in their order. One query."""
    names = {
        w["pk"]: w
        for w in Workspace.objects.filter(pk__in=[r.workspace_id for r in rows]).values(
            "pk", "name", "owner__username", "team__name", *SIZE_FACTS
        )
    }
    return [
        WorkspaceSpend(
            r.workspace_id,
            names[r.workspace_id]["name"],
            names[r.workspace_id]["owner__username"],
            Workspace(**{f: names[r.workspace_id][f] for f in SIZE_FACTS}).size_label,
            r.kind,
            r.hours,
            r.cost,
            names[r.workspace_id]["team__name"],
        )
        for r in rows
    ]
