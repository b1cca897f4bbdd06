"""Right-sizing recommendations from measured use: the beat task's service. For every workspace
not deleted with MIN_HOURS of telemetry in the last WINDOW_DAYS, it measures GPU use
(billing.usage), gathers what the workspace could move to in its region (each kind's backend
says what, WorkspaceBackend.rightsizing_options: the GPU VM's offered sizes at their Linux
pay-as-you-go price; the MIG slice's profiles of the ready MIG pools on the clusters its team
may use, at the slice's share of the node price), applies the rules (billing.rightsizing) and stores
one Recommendation per workspace, replacing the last.

Queries: the measurement 1, workspaces 1, Spot prices 1, the kinds' options (offerings 1, MIG
pools 2), then the last run's rows
read and deleted, and the new ones inserted (one COPY on PostgreSQL, one INSERT per
INSERT_BATCH elsewhere).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection, transaction

from billing.models import Advice, Recommendation
from billing.rightsizing import MIN_HOURS, Holding, Verdict, recommend
from billing.usage import Usage, usage_measure
from billing.workspace_cost import offering_spot_price
from workspaces.backends import RightsizeOption as Option
from workspaces.backends import backend_for, backends
from workspaces.models import SizeOffering, Workspace
from workspaces.states import Status

WINDOW_DAYS = 30
INSERT_BATCH = 2000


@dataclass(frozen=True)
class Refresh:
    """What one recommendations_refresh did: workspaces ``advised`` (rows written) and stale
    rows ``removed`` (workspaces deleted, or without enough telemetry any more)."""

    advised: int
    removed: int


def recommendations_refresh(*, now: datetime) -> Refresh:
    """Beat, daily: recompute every workspace's Recommendation from the window ending ``now``
    (see the module's docstring). Idempotent: a second run at the same ``now`` writes the
    same rows."""
    since = (now - timedelta(days=WINDOW_DAYS)).replace(minute=0, second=0, microsecond=0)
    usage = usage_measure(since=since, until=now, min_hours=MIN_HOURS)
    workspaces = _measured(usage)
    regions = {w["region"] for w in workspaces}
    spot_prices = _spot_prices(regions, now)
    options_in = _options(regions)
    rows = []
    for w in workspaces:
        holding = _holding(w, spot_prices)
        options = options_in[(None, w["region"])] + options_in[(w["team_id"], w["region"])]
        verdict = recommend(usage[w["pk"]], holding, options)
        rows.append(_row(w, holding, usage[w["pk"]], verdict, now))
    return _store(rows)


_FACTS = ("pk", "team_id", "kind", "region", "vm_size", "price_per_hour", "spot")


def _measured(usage: dict[Any, Usage]) -> list[dict[str, Any]]:
    """The workspaces not deleted that ``usage`` measured, as dicts of what advice needs.
    One query."""
    live = Workspace.objects.exclude(status__in=(Status.DELETING, Status.DELETED))
    return [w for w in live.values(*_FACTS, "gpu_model", "gpu_count") if w["pk"] in usage]


def _holding(w: Mapping[str, Any], spot_prices: dict[tuple[str, str], Decimal]) -> Holding:
    """What workspace ``w`` holds now; whether it may run as Spot is its kind backend's say."""
    return Holding(
        price_per_hour=w["price_per_hour"],
        gpu_model=w["gpu_model"],
        gpu_count=w["gpu_count"],
        spot=w["spot"],
        spot_capable=backend_for(w["kind"]).spot_capable,
        spot_price=spot_prices.get((w["region"], w["vm_size"])),
        vm_size=w["vm_size"],
    )


def _spot_prices(regions: set[str], now: datetime) -> dict[tuple[str, str], Decimal]:
    """Every offered size's Spot price ((region, vm_size): USD/hour) in ``regions`` where
    Azure has one: what a workspace that may run as Spot would pay. One query."""
    offerings = (
        SizeOffering.objects.filter(offered=True, region__in=regions, price_per_hour__gt=0)
        .annotate(spot_price=offering_spot_price(now=now))
        .filter(spot_price__isnull=False)
    )
    return {(o.region, o.vm_size): o.spot_price for o in offerings}


def _options(regions: set[str]) -> defaultdict[tuple[int | None, str], list[Option]]:
    """Every kind's right-sizing options (its backend's), by (team id or None, region)."""
    options: defaultdict[tuple[int | None, str], list[Option]] = defaultdict(list)
    for backend in backends():
        for key, found in backend.rightsizing_options(regions=regions).items():
            options[key].extend(found)
    return options


def _row(
    w: Mapping[str, Any], holding: Holding, usage: Usage, verdict: Verdict, now: datetime
) -> Recommendation:
    option = verdict.option
    return Recommendation(
        workspace_id=w["pk"],
        team_id=w["team_id"],
        advice=verdict.advice,
        target_kind=option.kind if option else "",
        target_vm_size=option.name if option and not option.mig_profile else "",
        target_mig_profile=option.mig_profile if option else "",
        target_memory_mib=option.memory_mib if option else None,
        target_price_per_hour=_target_price(verdict, holding),
        price_per_hour=holding.price_per_hour,
        saving_usd_month=verdict.saving_usd_month,
        reason=verdict.reason,
        hours=usage.hours,
        peak_mib=usage.peak_mib or 0,
        p95_mib=usage.p95_mib or 0,
        memory_mib=usage.memory_mib,
        gpus_in_use=usage.gpus_in_use,
        util_mean=None if usage.util_mean is None else Decimal(str(usage.util_mean)),
        idle_hours=usage.idle_hours,
        computed_at=now,
    )


def _target_price(verdict: Verdict, holding: Holding) -> Decimal | None:
    """USD/hour of what it proposes: the option's, or the Spot price of its own size."""
    if verdict.option is not None:
        return verdict.option.price_per_hour
    return holding.spot_price if verdict.advice == Advice.SPOT else None


def _store(rows: list[Recommendation]) -> Refresh:
    """Replace every Recommendation by ``rows``, in one transaction (pages read the old rows
    until it commits). PostgreSQL takes them by COPY: Django's bulk_create spends seconds
    preparing 10,000 rows' values field by field."""
    advised = {r.workspace_id for r in rows}
    with transaction.atomic():
        before = set(Recommendation.objects.values_list("workspace_id", flat=True))
        Recommendation.objects.all().delete()
        if connection.vendor == "postgresql":
            _copy(rows)
        else:
            Recommendation.objects.bulk_create(rows, batch_size=INSERT_BATCH)
    return Refresh(advised=len(rows), removed=len(before - advised))


_COLUMNS = [f.column for f in Recommendation._meta.concrete_fields]
_ATTNAMES = [f.attname for f in Recommendation._meta.concrete_fields]


def _copy(rows: list[Recommendation]) -> None:
    """COPY ``rows`` into the table (PostgreSQL, psycopg 3)."""
    table = Recommendation._meta.db_table
    sql = f"COPY {table} ({', '.join(_COLUMNS)}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row([getattr(row, name) for name in _ATTNAMES])
