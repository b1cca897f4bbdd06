"""Reads of right-sizing (billing.recommendations): one selector per figure, shared by the
workspace page, the team's and the platform's Savings pages and the weekly digest.

A team's saving is the sum of its workspaces' positive monthly savings (USD, Decimal): what
it would stop paying a month by following every advice that saves; a *larger* advice costs
more and is listed, never subtracted.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Count, Q, QuerySet, Sum

from billing.models import Advice, Recommendation
from billing.rightsizing import HEADROOM, MIN_HOURS
from teams.models import Team
from workspaces.models import Workspace


@dataclass(frozen=True)
class Savings:
    """A team's total: USD a month (Decimal, to the cent) over ``workspaces`` advised to save,
    of ``measured`` workspaces with enough telemetry for advice (fine as is included)."""

    team_id: int
    workspaces: int
    usd_month: Decimal
    measured: int = 0


def savings_of_teams(*, team_ids: list[int]) -> dict[int, Savings]:
    """Each team's Savings, every team in ``team_ids`` present (zero where none). One
    query."""
    saves = Q(saving_usd_month__gt=0)
    rows = (
        Recommendation.objects.filter(team_id__in=team_ids)
        .values("team_id")
        .annotate(
            n=Count("pk", filter=saves),
            usd=Sum("saving_usd_month", filter=saves),
            measured=Count("pk"),
        )
    )
    found = {
        r["team_id"]: Savings(r["team_id"], r["n"], r["usd"] or Decimal("0.00"), r["measured"])
        for r in rows
    }
    return {t: found.get(t, Savings(t, 0, Decimal("0.00"))) for t in team_ids}


def team_savings_list(*, team: Team) -> QuerySet[Recommendation]:
    """The team's advice other than *fine as is*, largest monthly saving first (a larger
    size, which costs more, last), with each workspace and its owner."""
    return (
        Recommendation.objects.filter(team=team)
        .exclude(advice=Advice.FINE)
        .select_related("workspace", "workspace__owner")
        .order_by("-saving_usd_month", "workspace__name", "pk")
    )


@dataclass(frozen=True)
class TeamSavings:
    """One line of the platform's Savings page."""

    team: Team
    workspaces: int
    usd_month: Decimal


def savings_by_team() -> list[TeamSavings]:
    """Every team with a saving, largest first, and its Savings. Two queries."""
    rows = list(
        Recommendation.objects.filter(saving_usd_month__gt=0)
        .values("team_id")
        .annotate(n=Count("pk"), usd=Sum("saving_usd_month"))
        .order_by("-usd", "team_id")
    )
    teams = Team.objects.in_bulk([r["team_id"] for r in rows])
    return [TeamSavings(teams[r["team_id"]], r["n"], r["usd"]) for r in rows]


@dataclass(frozen=True)
class Panel:
    """The workspace page's right-sizing panel: its Recommendation, or None with the rule for
    when one comes (MIN_HOURS of telemetry while running) and the margin."""

    recommendation: Recommendation | None
    min_hours: int = MIN_HOURS
    headroom_percent: int = int(HEADROOM * 100)


def workspace_rightsizing(*, workspace: Workspace) -> Panel:
    """The panel of ``workspace``. One query."""
    return Panel(Recommendation.objects.filter(workspace=workspace).first())
