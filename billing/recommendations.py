"""Right-sizing recommendations from measured use: the beat task's service. For every workspace
not deleted with MIN_HOURS of telemetry in the last WINDOW_DAYS, it measures GPU use
(billing.usage), gathers what the workspace could move to in its region (the offered sizes of
the catalog, workspaces.models.SizeOffering, at their Linux pay-as-you-go price; the MIG
profiles of the ready MIG pools on the clusters its team may use, at the slice's share of the
node price, clusters.selectors.mig_share), applies the rules (billing.rightsizing) and stores
one Recommendation per workspace, replacing the last.

Queries: the measurement 1, workspaces 1, offerings 1, MIG pools 2, then the last run's rows
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
from billing.rightsizing import MIN_HOURS, Holding, Option, Verdict, recommend
from billing.usage import Usage, usage_measure
from billing.workspace_cost import offering_spot_price
from clusters.models import ClusterTeam, NodePool, PoolStatus
from clusters.selectors import mig_share
from workspaces.backends import backend_for
from workspaces.models import SizeOffering, Workspace
from workspaces.states import Status

WINDOW_DAYS = 30
INSERT_BATCH = 2000
# A MIG profile's memory is its name's GB (10^9 bytes): at or under what NVML reports
# (1g.10gb: 9,536 MiB against NVML's 9,728 on an A100 80GB), so a slice is never overstated.
MIB_PER_GB = Decimal(10**9) / Decimal(2**20)


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
    vm_options, spot_prices = _vm_options({w["region"] for w in workspaces}, now)
    mig_options = _mig_options()
    rows = []
    for w in workspaces:
        holding = _holding(w, spot_prices)
        options = vm_options[w["region"]] + mig_options[(w["team_id"], w["region"])]
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


def _vm_options(
    regions: set[str], now: datetime
) -> tuple[defaultdict[str, list[Option]], dict[tuple[str, str], Decimal]]:
    """The offered, priced sizes per region as Options, and every size's Spot price
    ((region, vm_size): USD/hour) where Azure has one. One query."""
    offerings = SizeOffering.objects.filter(
        offered=True, region__in=regions, price_per_hour__gt=0
    ).annotate(spot_price=offering_spot_price(now=now))
    options: defaultdict[str, list[Option]] = defaultdict(list)
    spot: dict[tuple[str, str], Decimal] = {}
    for o in offerings:
        options[o.region].append(offering_option(o))
        if o.spot_price is not None:
            spot[(o.region, o.vm_size)] = o.spot_price
    return options, spot


def offering_option(offering: SizeOffering) -> Option:
    """A catalog size as an Option. Memory per device is the smaller of its GPU's memory and
    its total GPU memory over its GPUs, so a fractional vGPU size (one device, a share of a
    GPU: ``total_gpu_memory_gib`` where the catalog has it) counts only the memory it gets."""
    devices = max(offering.gpu_count, 1)
    per_gpu = float(offering.gpu_memory_gib)
    total = getattr(offering, "total_gpu_memory_gib", None)
    if total is not None:
        per_gpu = min(per_gpu, float(total) / devices)
    return Option(
        kind="vm",
        name=offering.vm_size,
        gpu_model=offering.gpu_model,
        devices=devices,
        memory_mib=int(per_gpu * 1024),
        price_per_hour=offering.price_per_hour,
    )


def _mig_options() -> defaultdict[tuple[int, str], list[Option]]:
    """{(team id, region): the cheapest Option per MIG profile and GPU model} of the ready MIG
    pools on each team's clusters. Two queries."""
    pools = (
        NodePool.objects.filter(status=PoolStatus.READY)
        .exclude(gpu_instance_profile="")
        .select_related("cluster")
    )
    per_cluster: defaultdict[int, list[Option]] = defaultdict(list)
    region_of: dict[int, str] = {}
    for pool in pools:
        per_cluster[pool.cluster_id].append(mig_option(pool))
        region_of[pool.cluster_id] = pool.cluster.location
    best: dict[tuple[int, str], dict[tuple[str, str], Option]] = defaultdict(dict)
    access = ClusterTeam.objects.filter(cluster_id__in=list(per_cluster))
    for team_id, cluster_id in access.values_list("team_id", "cluster_id"):
        found = best[(team_id, region_of[cluster_id])]
        for option in per_cluster[cluster_id]:
            key = (option.name, option.gpu_model)
            if key not in found or option.price_per_hour < found[key].price_per_hour:
                found[key] = option
    return defaultdict(list, {key: list(found.values()) for key, found in best.items()})


def mig_option(pool: NodePool) -> Option:
    """The MIG profile a ready MIG pool serves as an Option: one device of the profile's
    memory (MIB_PER_GB per GB of its name), at the slice's share of the node's USD/hour."""
    profile = pool.mig
    assert profile is not None
    gigabytes = int(profile.name.split(".")[1].removesuffix("gb"))
    num, den = mig_share(pool, profile.slices)
    return Option(
        kind="mig",
        name=profile.name,
        gpu_model=pool.gpu_model,
        devices=1,
        memory_mib=int(gigabytes * MIB_PER_GB),
        price_per_hour=(pool.price_per_hour * num / den).quantize(Decimal("0.0001")),
    )


def _row(
    w: Mapping[str, Any], holding: Holding, usage: Usage, verdict: Verdict, now: datetime
) -> Recommendation:
    option = verdict.option
    return Recommendation(
        workspace_id=w["pk"],
        team_id=w["team_id"],
        advice=verdict.advice,
        target_kind=option.kind if option else "",
        target_vm_size=option.name if option and option.kind == "vm" else "",
        target_mig_profile=option.name if option and option.kind == "mig" else "",
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
