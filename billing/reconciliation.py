"""Reconciliation: the portal's estimate (EstimatedCost, stored when Azure's days are fetched)
against Azure's actual cost (ActualCost, Cost Management), per team and workspace over UTC
days. Money in USD (Decimal, compared to the cent)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from uuid import UUID

from django.db.models import Q, Sum

from billing import metering
from billing.models import ActualCost, ActualCostDay, EstimatedCost
from teams.models import Team
from workspaces.models import Workspace

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
    """One workspace's comparison; ``name`` "(workspace removed)" once it is gone, and
    CHARGES_NAME (``workspace_id`` None) for the team's storage and reservations."""

    workspace_id: UUID | None
    name: str
    comparison: CostComparison


@dataclass(frozen=True)
class TeamReconciliation:
    """One team's total comparison and its listed workspaces."""

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
    *,
    team_ids: Iterable[int],
    first: date,
    last: date,
    include_unattributed: bool = False,
    top: int | None = 50,
) -> Reconciliation:
    """The teams' estimate against Azure's actual cost over the UTC days first..last that
    Azure has reported (see Reconciliation).

    The estimate is the one stored when Azure's days were fetched (EstimatedCost, written by
    billing.actual_costs.cost_estimates_store at ``fetched_at``, and again after a price
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


# (team id, workspace id or None, charges): a workspace's cost; (team, None, False) what
# Azure charged to a removed workspace; (team, None, True) the team's storage and
# reservations (billing.charges, tag cloud.costs.CHARGE_TAG).
_Key = tuple[int, UUID | None, bool]
CHARGES_NAME = "Storage and capacity reservations"


def _estimates(team_ids: list[int], days: list[date]) -> dict[_Key, Decimal]:
    """USD estimated per (team, workspace) over the UTC days, unrounded, summed in SQL from
    the stored EstimatedCost rows. One query."""
    rows = (
        EstimatedCost.objects.filter(team_id__in=team_ids, day__in=days)
        .values("team_id", "workspace_id", "charges")
        .annotate(total=Sum("cost"))
        .values_list("team_id", "workspace_id", "charges", "total")
    )
    return {(team, workspace, charges): total for team, workspace, charges, total in rows}


def _actuals(
    team_ids: list[int], days: list[date], unattributed: bool
) -> tuple[dict[_Key, Decimal], Decimal | None]:
    """USD Azure charged per (team, workspace) over the days, and what it charged to no portal
    workspace (when asked), summed in SQL. One query."""
    scope = Q(team_id__in=team_ids) | (Q(team__isnull=True) if unattributed else Q(pk__in=[]))
    rows = (
        ActualCost.objects.filter(scope, day__in=days)
        .values("team_id", "workspace_id", "charges")
        .annotate(total=Sum("cost"))
        .values_list("team_id", "workspace_id", "charges", "total")
    )
    totals: dict[_Key, Decimal] = {}
    loose = Decimal(0)
    for team, workspace, charges, cost in rows:
        if team is None:
            loose += cost
        else:
            totals[(team, workspace, charges)] = cost
    return totals, (metering.to_cents(loose) if unattributed else None)


# ((workspace id, charges), its comparison)
_Compared = list[tuple[tuple[UUID | None, bool], CostComparison]]


def _reconciled_teams(
    team_ids: list[int],
    estimates: dict[_Key, Decimal],
    actuals: dict[_Key, Decimal],
    top: int | None,
) -> list[TeamReconciliation]:
    """Per team (by name): its total and its ``top`` workspaces, those differing by more than
    the tolerance first, then the costliest (all of them when ``top`` is None). Two queries."""
    by_team: dict[int, _Compared] = defaultdict(list)
    zero = Decimal(0)
    for key in set(estimates) | set(actuals):
        comparison = cost_comparison(
            estimate=estimates.get(key, zero), actual=actuals.get(key, zero)
        )
        by_team[key[0]].append(((key[1], key[2]), comparison))
    shown: dict[int, _Compared] = {}
    for team, rows in by_team.items():
        rows.sort(key=lambda r: (not r[1].flagged, -max(r[1].estimate, r[1].actual)))
        shown[team] = rows if top is None else rows[:top]
    ids = [w for rows in shown.values() for (w, _), _ in rows if w is not None]
    names = _workspace_names(ids)
    return [
        _team_row(pk, name, by_team.get(pk, []), shown.get(pk, []), names, estimates, actuals)
        for pk, name in Team.objects.filter(pk__in=team_ids)
        .order_by("name")
        .values_list("pk", "name")
    ]


def _team_row(
    team: int,
    name: str,
    mine: _Compared,
    shown: _Compared,
    names: dict[UUID | None, str],
    estimates: dict[_Key, Decimal],
    actuals: dict[_Key, Decimal],
) -> TeamReconciliation:
    """The team's total over all its workspaces (``mine``), listing those ``shown``."""
    zero = Decimal(0)
    listed = [
        WorkspaceReconciliation(
            w, CHARGES_NAME if charges else names.get(w, "(workspace removed)"), c
        )
        for (w, charges), c in shown
    ]
    total = cost_comparison(
        estimate=sum((estimates.get((team, *k), zero) for k, _ in mine), zero),
        actual=sum((actuals.get((team, *k), zero) for k, _ in mine), zero),
    )
    hidden = mine[len(listed) :]
    more_flagged = sum(1 for _, c in hidden if c.flagged)
    return TeamReconciliation(team, name, total, listed, len(hidden), more_flagged)


def _workspace_names(ids: list[UUID]) -> dict[UUID | None, str]:
    """Names of the workspaces still there (a deleted one's costs keep no id)."""
    return dict(Workspace.objects.filter(pk__in=ids).values_list("pk", "name"))
