"""All teams' months so far, for the platform admin: spend, budget use, burn, forecast and
runway per team (each in its own time zone), the table's search, sort and pages, and the
chart's data. Money in USD (Decimal)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, TypedDict
from zoneinfo import ZoneInfo

from django.core.paginator import Page, Paginator

from billing.forecast import forecast as month_forecast
from billing.forecast import runs_out
from billing.live_spend import team_burn_rate
from billing.month_spend import WorkspaceSpend, month_so_far, month_sums, named
from common.months import month_bounds
from teams.filters import TeamFilter
from teams.models import Team
from teams.selectors import team_timezones


@dataclass(frozen=True)
class TeamMonth:
    """One team's month so far for the platform admin: USD ``spent``, ``budget`` (None: no
    limit) and ``used_percent`` of it, ``burn_per_hour`` USD/hour, ``forecast`` USD at month
    end, the local day the budget ``runs_out`` (None if it lasts)."""

    team: Team
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


def spend_overview(*, teams: Iterable[Team], now: datetime, top: int = 20) -> SpendOverview:
    """Month-to-date spend, budget use, burn, forecast and runway of every team (each in its
    own time zone) and the ``top`` workspaces by cost. Ten queries, whatever the number of
    teams or workspaces."""
    teams = list(teams)
    ids = [t.pk for t in teams]
    zones = team_timezones(team_ids=ids)
    sums = month_sums(month_so_far(ids, now, zones), now, zones, top=top)
    burn = team_burn_rate(team_ids=ids, now=now)
    rows = [
        _team_month(team, sums.total(team.pk), burn.get(team.pk, Decimal(0)), zones[team.pk], now)
        for team in teams
    ]
    return SpendOverview(
        teams=rows,
        spent=sum((r.spent for r in rows), Decimal(0)),
        forecast=sum((r.forecast for r in rows), Decimal(0)),
        workspaces=named(sums.top),
    )


def _used(r: TeamMonth) -> Decimal:
    return r.used_percent if r.used_percent is not None else Decimal(-1)


# The all-teams table's sort keys (as in the URL) and the TeamMonth value each orders by.
TEAM_MONTH_SORTS: dict[str, Callable[[TeamMonth], Any]] = {
    "team": lambda r: r.team.name.lower(),
    "spent": lambda r: r.spent,
    "used": _used,
    "burn": lambda r: r.burn_per_hour,
    "forecast": lambda r: r.forecast,
}


@dataclass
class TeamMonthPage:
    """One page of the all-teams table: ``filters`` (bound teams.filters.TeamFilter),
    ``page`` (Django's Page of TeamMonth rows), ``sort`` (its key, "-" for descending)."""

    filters: TeamFilter
    page: Page[TeamMonth]
    sort: str


def team_month_page(
    *, overview: SpendOverview, params: Mapping[str, Any], size: int = 50
) -> TeamMonthPage:
    """The page of ``overview``'s team rows that the query string ``params`` asks for:
    searched by ``q`` (team name), sorted by ``sort`` (a TEAM_MONTH_SORTS key; the largest
    spend first by default), page ``page``. The totals stay those of every team. One query
    (the search), the rows being computed already."""
    filters = TeamFilter(params, queryset=Team.objects.all())
    rows = overview.teams
    if filters.is_valid() and filters.form.cleaned_data.get("q"):
        found = set(filters.qs.values_list("pk", flat=True))
        rows = [r for r in rows if r.team.pk in found]
    asked = params.get("sort")
    key = asked if isinstance(asked, str) else ""
    if key.lstrip("-") not in TEAM_MONTH_SORTS:
        key = "-spent"
    rows = sorted(rows, key=lambda r: r.team.name.lower())  # ties by name
    rows.sort(key=TEAM_MONTH_SORTS[key.lstrip("-")], reverse=key.startswith("-"))
    page = Paginator(rows, size).get_page(params.get("page"))
    return TeamMonthPage(filters=filters, page=page, sort=key)


def _team_month(
    team: Team, spent: Decimal, burn: Decimal, tz: ZoneInfo, now: datetime
) -> TeamMonth:
    start, end = month_bounds(now, tz)
    expected = month_forecast(spent, burn, start, end, now)
    budget = team.monthly_budget
    used = (spent * 100 / budget).quantize(Decimal("0.1")) if budget else None
    return TeamMonth(
        team, spent, budget, used, burn, expected, runs_out(budget, spent, expected, end, now, tz)
    )


class OverviewChart(TypedDict):
    """The all-teams chart's JSON: bar labels and, per bar, USD as text (None: no budget)."""

    currency: str
    teams: list[str]
    spent: list[str]
    rest: list[str]
    budget: list[str | None]


def spend_overview_chart(*, overview: SpendOverview, top: int = 12) -> OverviewChart:
    """The all-teams chart's data, from ``overview`` (no query): the ``top`` teams by
    forecast, then one bar for all the others (see OverviewChart; ``rest`` is forecast minus
    spent). A month-end forecast per bar, split into what is spent and what the burn adds."""
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
