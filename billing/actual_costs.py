"""Azure's actual costs (Cost Management, cloud.costs) per workspace tag and UTC day, fetched
and stored, and the portal's estimate of the same days stored beside them for
billing.reconciliation. Money in USD (Decimal)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from uuid import UUID

from django.db import transaction

from billing.charges import charge_lines
from billing.live_spend import live_spend
from billing.models import ActualCost, ActualCostDay, EstimatedCost
from billing.pricing import day_start
from cloud.costs import CHARGE_TAG, fetch_actual_costs
from cloud.costs import ActualCost as AzureCost
from common.months import UTC_ZONE
from teams.models import Team
from workspaces.azure import azure_settings
from workspaces.models import Workspace

# Complete UTC days fetched again by every sync: Azure's cost data lags up to 24-48 hours.
ACTUAL_COST_DAYS = 3
CURRENCY = "USD"


@dataclass(frozen=True)
class ActualCostSync:
    """What a sync stored: Azure's actual costs of the UTC days ``first``..``last``, in
    ``rows`` rows; ``total`` USD, of which ``unattributed`` USD carried no workspace tag of the
    portal (untagged resources, or a tag value that names no workspace)."""

    first: date
    last: date
    rows: int
    total: Decimal
    unattributed: Decimal


def actual_costs_window(*, now: datetime, days: int = ACTUAL_COST_DAYS) -> tuple[date, date]:
    """The UTC days a sync fetches: the month to date, and at least the ``days`` complete
    days before today."""
    if days < 1:
        raise ValueError("fetch at least one complete day")
    today = now.astimezone(UTC).date()
    return min(today.replace(day=1), today - timedelta(days=days)), today


def actual_costs_sync(*, now: datetime, days: int = ACTUAL_COST_DAYS) -> ActualCostSync:
    """Fetch Azure's actual cost per workspace tag and UTC day (cloud.costs, Cost Management)
    and of each team's storage and reservations (tag CHARGE_TAG: its slug; rows with
    ``charges``, taken out of the untagged row they are also in) for actual_costs_window()
    and replace the stored rows of those days in one transaction;
    each day is marked fetched at ``now``, and the portal's estimate of those days is stored
    as of ``now`` in the same transaction (cost_estimates_store). Idempotent: a second sync
    stores the same rows.

    Raises CloudError (Azure refused, throttled past retries, unreachable), CostFormatError
    (malformed answer) or ValueError (a currency other than USD, days < 1); then nothing
    stored changes.
    """
    first, last = actual_costs_window(now=now, days=days)
    azure = azure_settings()
    rows = _actual_cost_rows(fetch_actual_costs(azure, first=first, last=last), now)
    charged = fetch_actual_costs(azure, first=first, last=last, tag=CHARGE_TAG)
    rows = _with_charges(rows, _charge_rows(charged, now))
    span = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    with transaction.atomic():
        ActualCost.objects.filter(day__gte=first, day__lte=last).delete()
        ActualCost.objects.bulk_create(rows, batch_size=2000)
        ActualCostDay.objects.filter(day__gte=first, day__lte=last).delete()
        ActualCostDay.objects.bulk_create([ActualCostDay(day=d, fetched_at=now) for d in span])
        cost_estimates_store(first=first, last=last, now=now)
    total = sum((r.cost for r in rows), Decimal(0))
    unattributed = sum(
        (r.cost for r in rows if r.workspace_id is None and not r.charges), Decimal(0)
    )
    return ActualCostSync(first, last, len(rows), total, unattributed)


def _actual_cost_rows(costs: Iterable[AzureCost], now: datetime) -> list[ActualCost]:
    """One ActualCost per (tag, day), Azure's split rows summed, linked to the workspace
    (and its team) the tag names. Raises ValueError for a currency other than USD."""
    totals: dict[tuple[str, date], Decimal] = defaultdict(Decimal)
    for cost in costs:
        if cost.currency != CURRENCY:
            raise ValueError(f"Azure reports {cost.currency}, not {CURRENCY}; nothing stored")
        totals[(cost.workspace_tag, cost.day)] += cost.cost
    owners = _workspaces_by_tag({tag for tag, _ in totals})
    return [
        ActualCost(
            workspace_tag=tag,
            day=day,
            cost=amount,
            currency=CURRENCY,
            fetched_at=now,
            workspace_id=owners.get(tag, (None, None))[0],
            team_id=owners.get(tag, (None, None))[1],
        )
        for (tag, day), amount in totals.items()
    ]


def _charge_rows(costs: Iterable[AzureCost], now: datetime) -> list[ActualCost]:
    """One ActualCost (``charges``) per team slug and day among Azure's CHARGE_TAG rows;
    values that name no team, and resources without the tag (every workspace's), are left
    out: the workspace query has them."""
    totals: dict[tuple[str, date], Decimal] = defaultdict(Decimal)
    for cost in costs:
        if cost.currency != CURRENCY:
            raise ValueError(f"Azure reports {cost.currency}, not {CURRENCY}; nothing stored")
        if cost.tagged:
            totals[(cost.workspace_tag, cost.day)] += cost.cost
    teams = dict(Team.objects.filter(slug__in={t for t, _ in totals}).values_list("slug", "pk"))
    return [
        ActualCost(
            workspace_tag=f"{CHARGE_TAG}:{slug}",
            charges=True,
            day=day,
            cost=amount,
            currency=CURRENCY,
            fetched_at=now,
            team_id=teams[slug],
        )
        for (slug, day), amount in totals.items()
        if slug in teams
    ]


def _with_charges(rows: list[ActualCost], charges: list[ActualCost]) -> list[ActualCost]:
    """The workspace query's rows and the teams' charges, each charge taken out of its day's
    untagged row (a share or reservation has no workspace tag, so Azure counts it there too)."""
    untagged = {r.day: r for r in rows if r.workspace_tag == ""}
    for charge in charges:
        if charge.day in untagged:
            untagged[charge.day].cost -= charge.cost
    return rows + charges


def _workspaces_by_tag(tags: Iterable[str]) -> dict[str, tuple[UUID, int]]:
    """{tag value: (workspace id, team id)} for the values that name a portal workspace (the
    portal tags each workspace's resources with its id)."""
    ids: dict[str, UUID] = {}
    for tag in tags:
        try:
            ids[tag] = uuid.UUID(tag)
        except ValueError:
            continue  # Untagged (""), or a tag someone else set: not ours.
    found = {
        pk: (pk, team)
        for pk, team in Workspace.objects.filter(pk__in=ids.values()).values_list("pk", "team_id")
    }
    return {tag: found[pk] for tag, pk in ids.items() if pk in found}


# UTC days priced per step: every team at once, so fewer days than a team's rollup chunk.
ESTIMATE_CHUNK_DAYS = 3
_UTC_DAY = timedelta(days=1)
_ESTIMATE_PLACES = Decimal("1E-8")  # EstimatedCost.cost's decimal places


def cost_estimates_store(*, first: date, last: date, now: datetime) -> int:
    """Replace the stored estimate (EstimatedCost, USD unrounded) of the UTC days
    first..last with the portal's estimate per team, workspace and UTC day as of ``now``:
    every team's UsageIntervals up to ``now`` priced by Price (billing.live_spend.live_spend),
    and per team its storage and reservations (billing.charges, a row with ``charges``).
    A few days at a time, so memory stays bounded for a large fleet; all in one transaction.
    Idempotent; returns rows written."""
    team_ids = list(Team.objects.values_list("pk", flat=True))
    written = 0
    with transaction.atomic():
        EstimatedCost.objects.filter(day__gte=first, day__lte=last).delete()
        while first <= last:
            chunk_last = min(last, first + timedelta(days=ESTIMATE_CHUNK_DAYS - 1))
            written += _store_estimate_chunk(team_ids, first, chunk_last, now)
            first = chunk_last + _UTC_DAY
    return written


def _store_estimate_chunk(team_ids: list[int], first: date, last: date, now: datetime) -> int:
    window = (day_start(first, UTC_ZONE), min(now, day_start(last + _UTC_DAY, UTC_ZONE)))
    if window[0] >= window[1]:
        return 0  # days still to come: nothing used yet
    windows, zones = dict.fromkeys(team_ids, window), dict.fromkeys(team_ids, UTC_ZONE)
    lines = live_spend(windows=windows, zones=zones)
    totals: dict[tuple[int, UUID | None, date], Decimal] = defaultdict(Decimal)
    for line in lines:  # compute and disk together, as Azure's cost per workspace tag
        totals[(line.team_id, line.workspace_id, line.day)] += line.cost
    for charge in charge_lines(windows=windows, zones=zones):  # per team, as CHARGE_TAG
        totals[(charge.team_id, None, charge.day)] += charge.cost
    EstimatedCost.objects.bulk_create(
        (
            EstimatedCost(
                team_id=team,
                workspace_id=workspace,
                charges=workspace is None,
                day=day,
                cost=cost.quantize(_ESTIMATE_PLACES),
                computed_at=now,
            )
            for (team, workspace, day), cost in totals.items()
        ),
        batch_size=2000,
    )
    return len(totals)


def cost_estimates_refresh(*, since: datetime) -> int:
    """After a late correction (a price effective from ``since``), store again the estimate
    of every fetched UTC day (ActualCostDay) from ``since``'s UTC day on, priced up to the
    moment that day was fetched, so it still compares with what Azure said then. Returns
    rows written."""
    written = 0
    for first, last, fetched_at in _fetched_runs(since.astimezone(UTC).date()):
        written += cost_estimates_store(first=first, last=last, now=fetched_at)
    return written


def _fetched_runs(first: date) -> list[tuple[date, date, datetime]]:
    """(first day, last day, fetched_at) of each run of consecutive fetched UTC days from
    ``first`` on that were fetched at the same moment."""
    runs: list[tuple[date, date, datetime]] = []
    for day in ActualCostDay.objects.filter(day__gte=first).order_by("day"):
        if runs and runs[-1][2] == day.fetched_at and runs[-1][1] + _UTC_DAY == day.day:
            runs[-1] = (runs[-1][0], day.day, day.fetched_at)
        else:
            runs.append((day.day, day.day, day.fetched_at))
    return runs
