"""Reads of the teams overview: each team's GPUs in use against its quota, members, pending
increase requests and burn rate. Here rather than in teams: the burn rate is billing's figure
(team_burn_rate) and the GPUs in use workspaces' (team_quota_overview), and billing sits above
both."""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.core.paginator import Page
from django.db.models import Count, QuerySet
from django.http import QueryDict

from billing.live_spend import team_burn_rate
from common.listing import DEFAULT_PAGE_SIZE, number_page, sort_from
from common.permissions import Actor
from teams.filters import TeamFilter
from teams.models import Decision, Team, TeamQuotaIncrease
from teams.selectors import team_member_count, team_visible_to
from workspaces.selectors import QuotaLine, team_quota_overview


@dataclass(frozen=True)
class TeamRow:
    """One team's usage against its limits, for the teams overview and a team's page."""

    team: Team
    lines: list[QuotaLine]  # workspaces.selectors.QuotaLine per GPU model (team_gpus_in_use, quota)
    members: int  # team_member_count
    pending_increases: int
    spend_per_hour: Decimal  # USD/hour: the burn rate, billing.live_spend.team_burn_rate

    @property
    def spend_per_month(self) -> Decimal:
        """USD for 730 hours (an average month) at the current rate, to the cent."""
        return (self.spend_per_hour * 730).quantize(Decimal("0.01"))


def _team_rows(teams: QuerySet[Team], now: datetime) -> list[TeamRow]:
    # Counted apart from ``teams``: annotating Count("memberships") on a queryset filtered by
    # the user's membership reuses that join and counts the user alone.
    pending = dict(
        TeamQuotaIncrease.objects.filter(team__in=teams, decision=Decision.PENDING)
        .values("team_id")
        .annotate(n=Count("pk"))
        .values_list("team_id", "n")
    )
    overview = team_quota_overview(teams=teams)
    ids = [t.pk for t, _ in overview]
    members = team_member_count(team_ids=ids)
    burn = team_burn_rate(team_ids=ids, now=now)
    return [
        TeamRow(t, lines, members[t.pk], pending.get(t.pk, 0), burn.get(t.pk, Decimal(0)))
        for t, lines in overview
    ]


def team_overview(*, user: Actor, now: datetime) -> list[TeamRow]:
    """Every team visible to the user (all for a platform admin), by name, with GPUs in use
    against quota, budget, member count, pending increase requests and the burn rate at
    ``now``. A constant number of queries whatever the number of teams."""
    return _team_rows(team_visible_to(user=user), now)


# The teams list's sort keys (as in the URL) and the fields they order by.
TEAM_SORTS = {"name": "name", "budget": "monthly_budget", "created": "created_at"}


@dataclass
class TeamPage:
    """One page of the teams list: ``filters`` (bound teams.filters.TeamFilter), ``page``
    (Django's Page of teams), ``rows`` (TeamRow of each team on the page), ``sort`` (its key)."""

    filters: TeamFilter
    page: Page[Team]
    rows: list[TeamRow]
    sort: str


def team_overview_page(
    *, user: Actor, params: QueryDict, now: datetime, size: int = DEFAULT_PAGE_SIZE
) -> TeamPage:
    """team_overview of one page of the visible teams, searched by ``q`` and sorted by
    ``sort`` (a TEAM_SORTS key, "-" for descending; by name by default) as the query string
    ``params`` asks. A constant number of queries: the page, its count, and team_overview's
    constant few for the page's teams only."""
    filters = TeamFilter(params, queryset=team_visible_to(user=user))
    sort = sort_from(params.get("sort"), allowed=TEAM_SORTS, default="name")
    page = number_page(filters.qs.only("pk"), sort=sort, number=params.get("page"), size=size)
    ids = [t.pk for t in page.object_list]
    rows = _team_rows(Team.objects.filter(pk__in=ids).order_by(*sort.order_by), now)
    return TeamPage(filters=filters, page=page, rows=rows, sort=sort.key)


def team_overview_one(*, user: Actor, team: Team, now: datetime) -> TeamRow:
    """team_overview of one team visible to the user; Team.DoesNotExist otherwise."""
    rows = _team_rows(team_visible_to(user=user).filter(pk=team.pk), now)
    if not rows:
        raise Team.DoesNotExist
    return rows[0]
