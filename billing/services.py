"""Billing's writes: meters opened and closed on state changes, prices synced with their
effective dates, the daily rollups rebuilt, and Azure's actual costs fetched. Money in USD
(Decimal)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import Min, Q, Sum

from billing import metering
from billing.models import (
    ActualCost,
    ActualCostDay,
    DailySpend,
    DaySpend,
    EstimatedCost,
    Meter,
    MonthSpend,
    Price,
    PriceKind,
    SpendRollup,
    UsageInterval,
)
from billing.selectors import day_start, live_spend, rolled_through
from cloud.costs import fetch_actual_costs
from common.months import UTC_ZONE
from teams.models import Team
from teams.selectors import team_timezones
from workspaces.azure import azure_settings
from workspaces.backends import backend_for
from workspaces.models import SizeOffering, Workspace
from workspaces.states import Status

# Every VM's OS disk: 128 GiB Premium SSD (cloud.azure_vm.VmSpec), billed as tier P10 LRS.
OS_DISK_TIER = "P10 LRS"


def usage_meter(*, workspace_id, expected: str, to: str, now: datetime) -> None:
    """Open or close the workspace's meters for the change ``expected -> to`` (called inside
    workspaces.states.transition's transaction), as its kind's backend says
    (WorkspaceBackend.meters): compute while its status is billable, at its hourly price times
    its share (a VM: its own price, on the Spot meter for a Spot VM; a MIG slice or a
    namespace: its share of its node pool's VM price); an OS disk, for kinds that have one,
    from the first time it runs until it is deleted."""
    workspace = Workspace.objects.select_related("node_pool").get(pk=workspace_id)
    meters = backend_for(workspace.kind).meters(workspace)
    if to in meters.billable and expected not in meters.billable:
        sku, hourly = workspace.vm_size, meters.hourly
        _open(workspace, Meter.COMPUTE, PriceKind.VM, sku, hourly, now, meters.share)
    elif expected in meters.billable and to not in meters.billable:
        _close(workspace_id, Meter.COMPUTE, now)
    if not meters.os_disk:
        return
    if to == Status.RUNNING and not _is_open(workspace_id, Meter.DISK):
        disk = price_in_effect(
            kind=PriceKind.DISK, sku=OS_DISK_TIER, region=workspace.region, at=now
        )
        hourly = disk.hourly if disk else 0
        _open(workspace, Meter.DISK, PriceKind.DISK, OS_DISK_TIER, hourly, now)
    elif to == Status.DELETED:
        _close(workspace_id, Meter.DISK, now)


def _open(workspace, meter, price_kind, sku: str, hourly, now, share=(1, 1)) -> None:
    UsageInterval.objects.create(
        share_num=share[0],
        share_den=share[1],
        workspace_id=workspace.pk,
        team_id=workspace.team_id,
        kind=workspace.kind,
        meter=meter,
        price_kind=price_kind,
        sku=sku,
        region=workspace.region,
        spot=meter == Meter.COMPUTE and workspace.spot,  # a Spot VM's disk is billed as any disk
        started_at=now,
        price_per_hour=round(hourly, 4),
    )


def _close(workspace_id, meter, now: datetime) -> None:
    UsageInterval.objects.filter(workspace_id=workspace_id, meter=meter, ended_at=None).update(
        ended_at=now
    )


def _is_open(workspace_id, meter) -> bool:
    return UsageInterval.objects.filter(
        workspace_id=workspace_id, meter=meter, ended_at=None
    ).exists()


def price_in_effect(
    *, kind: str, sku: str, region: str, at: datetime, spot: bool = False
) -> Price | None:
    """The Price row in effect at ``at`` for the meter, or None if none is known."""
    return (
        Price.objects.filter(kind=kind, sku=sku, region=region, spot=spot, effective_start__lte=at)
        .order_by("-effective_start")
        .first()
    )


@dataclass(frozen=True)
class OfferingReprice:
    """What offerings_reprice did: offerings whose price changed (``repriced``), and those
    withdrawn for want of a price, as "Standard_X in region" (``withdrawn``)."""

    repriced: int
    withdrawn: list[str]


def offerings_reprice(*, now: datetime) -> OfferingReprice:
    """Set every SizeOffering's USD/hour to the Azure pay-as-you-go retail price in effect
    ``now`` (the Price table; the Spot price is read from there when needed, see
    workspaces.selectors.offering_spot_price). A size with no regular price in its region is
    no longer offered: nobody could be told what it costs. Four queries, in one transaction."""
    book = {
        (p.sku, p.region): p.unit_price
        for p in Price.objects.filter(
            kind=PriceKind.VM, spot=False, effective_start__lte=now
        ).order_by("effective_start")
    }  # later rows overwrite earlier ones: the price in effect
    changed, unpriced = [], []
    for offering in SizeOffering.objects.all():
        regular = book.get((offering.vm_size, offering.region))
        if regular is None:
            unpriced += [offering] if offering.offered else []
        elif offering.price_per_hour != regular:
            offering.price_per_hour = regular
            changed.append(offering)
    with transaction.atomic():
        SizeOffering.objects.bulk_update(changed, ["price_per_hour"])
        SizeOffering.objects.filter(pk__in=[o.pk for o in unpriced]).update(offered=False)
    repriced, withdrawn = len(changed), [str(o) for o in unpriced]
    return OfferingReprice(repriced, withdrawn)


def offering_unpriced_reason(*, vm_size: str, region: str) -> str | None:
    """Why the size cannot be offered in the region (no Azure retail price known), or None."""
    if Price.objects.filter(kind=PriceKind.VM, sku=vm_size, region=region, spot=False).exists():
        return None
    return (
        f"Azure publishes no Linux pay-as-you-go price for {vm_size} in {region} (Retail Prices "
        "API), so its cost could not be shown or billed. Run manage.py sync_prices, or offer "
        "it in another region."
    )


def rollup_rebuild(*, now: datetime, team_ids=None, since: date | None = None) -> int:
    """Rebuild each team's DailySpend for its complete days (up to yesterday in its time
    zone) from ``since``, or from the day after its rollup mark, or from its first usage;
    returns how many rows were written. Idempotent: a day rebuilt twice is replaced."""
    team_ids = list(team_ids if team_ids is not None else Team.objects.values_list("pk", flat=True))
    zones = team_timezones(team_ids=team_ids)
    marks = rolled_through(team_ids=team_ids)
    firsts = dict(
        UsageInterval.objects.filter(team_id__in=team_ids)
        .values_list("team_id")
        .annotate(Min("started_at"))
    )
    written = 0
    for team in team_ids:
        yesterday = now.astimezone(zones[team]).date() - timedelta(days=1)
        first = since or _next_day(marks.get(team)) or _local_day(firsts.get(team), zones[team])
        if first is None or first > yesterday:
            continue
        written += _rebuild_days(team, first, yesterday, zones, now)
    return written


def _next_day(day: date | None) -> date | None:
    return day + timedelta(days=1) if day else None


def _local_day(moment: datetime | None, tz) -> date | None:
    return moment.astimezone(tz).date() if moment else None


ROLLUP_CHUNK_DAYS = 7  # days priced per transaction: bounds memory for teams with many workspaces


def _rebuild_days(team: int, first: date, last: date, zones: dict, now: datetime) -> int:
    written = 0
    while first <= last:
        chunk_last = min(last, first + timedelta(days=ROLLUP_CHUNK_DAYS - 1))
        written += _rebuild_chunk(team, first, chunk_last, zones, now)
        first = chunk_last + timedelta(days=1)
    return written


def _rebuild_chunk(team: int, first: date, last: date, zones: dict, now: datetime) -> int:
    window = (day_start(first, zones[team]), day_start(last + timedelta(days=1), zones[team]))
    lines = live_spend(windows={team: window}, zones=zones)
    rows = [
        DailySpend(
            team_id=team,
            workspace_id=line.workspace_id,
            kind=line.kind,
            day=line.day,
            meter=line.meter,
            hours=round(line.hours, 4),
            cost=metering.to_cents(line.cost),
        )
        for line in lines
    ]
    with transaction.atomic():
        DailySpend.objects.filter(team_id=team, day__gte=first, day__lte=last).delete()
        DailySpend.objects.bulk_create(rows, batch_size=2000)
        _summarise(team, first, last)
        SpendRollup.objects.update_or_create(
            team_id=team, defaults={"rolled_through": last, "rebuilt_at": now}
        )
    return len(rows)


def _summarise(team: int, first: date, mark: date) -> None:
    """Keep DaySpend and MonthSpend equal to the sums of the team's DailySpend rows up to its
    new rollup ``mark``, after the days from ``first`` on changed (or the mark moved back to
    the day before ``first``). Call inside the transaction that moves the mark."""
    DaySpend.objects.filter(team_id=team, day__gte=first).delete()
    days = DailySpend.objects.filter(team_id=team, day__gte=first, day__lte=mark)
    DaySpend.objects.bulk_create(
        DaySpend(team_id=team, **row)
        for row in days.values("day", "kind").annotate(cost=Sum("cost"))
    )
    month = first.replace(day=1)
    MonthSpend.objects.filter(team_id=team, month__gte=month).delete()
    while month <= mark:
        following = (month + timedelta(days=32)).replace(day=1)
        rows = DailySpend.objects.filter(
            team_id=team, day__gte=month, day__lte=mark, day__lt=following
        )
        compute_hours = Sum("hours", filter=Q(meter=Meter.COMPUTE), default=0)
        sums = rows.values("workspace_id", "kind").annotate(cost=Sum("cost"), hours=compute_hours)
        MonthSpend.objects.bulk_create(
            (MonthSpend(team_id=team, month=month, **row) for row in sums), batch_size=2000
        )
        month = following


def rollup_invalidate(*, since: datetime) -> int:
    """After a late correction (a price effective from ``since``), let every team's days from
    ``since`` on be computed live again until the next rebuild, and price again the stored
    estimates of the UTC days from ``since`` on that Azure's costs were fetched for (see
    cost_estimates_refresh); returns teams affected."""
    cost_estimates_refresh(since=since)
    moved = 0
    for mark in SpendRollup.objects.all():
        zones = team_timezones(team_ids=[mark.team_id])
        day_before = since.astimezone(zones[mark.team_id]).date() - timedelta(days=1)
        if mark.rolled_through > day_before:
            with transaction.atomic():
                SpendRollup.objects.filter(pk=mark.pk).update(rolled_through=day_before)
                _summarise(mark.team_id, day_before + timedelta(days=1), day_before)
            moved += 1
    return moved


@dataclass(frozen=True)
class PriceSync:
    """What a price sync did: rows ``added``, prices ``unchanged``, and the earliest moment
    from which spend changed (None when nothing did)."""

    added: int
    unchanged: int
    changed_since: datetime | None


def prices_sync(*, prices, source: str, now: datetime) -> PriceSync:
    """Store Azure retail prices (cloud.prices.RetailPrice) with their effective dates, in one
    transaction. A price equal to the one already in effect adds nothing; a new price adds a
    row from its effective date; a different price for a start already stored is a
    correction and takes effect from ``now``. Rows are never updated or deleted. Spend
    rolled up after the earliest change is computed again."""
    with transaction.atomic():
        book = _price_rows(prices)
        added: list[Price] = []
        unchanged = 0
        for p in sorted(prices, key=lambda p: p.effective_start):
            rows = book[(p.kind, p.arm_sku_name, p.region, p.spot)]
            row = _row_for(p, rows, source, now)
            if row is None:
                unchanged += 1
                continue
            rows.append(row)
            rows.sort(key=lambda r: r.effective_start)
            added.append(row)
        Price.objects.bulk_create(added)
        since = min((r.effective_start for r in added), default=None)
        if since is not None and since < now:
            rollup_invalidate(since=since)
    return PriceSync(len(added), unchanged, since)


def _price_rows(prices) -> dict:
    book = defaultdict(list)
    rows = Price.objects.filter(sku__in={p.arm_sku_name for p in prices}).order_by(
        "effective_start"
    )
    for row in rows:
        book[(row.kind, row.sku, row.region, row.spot)].append(row)
    return book


def _row_for(p, rows: list[Price], source: str, now: datetime) -> Price | None:
    """The Price row this retail price adds, or None when it changes nothing."""
    same_start = any(r.effective_start == p.effective_start for r in rows)
    # A different price for a start already stored corrects it from now on.
    start = now if same_start else p.effective_start
    in_effect = next((r for r in reversed(rows) if r.effective_start <= start), None)
    if in_effect and (in_effect.unit_price, in_effect.unit) == (p.unit_price, p.unit):
        return None
    return Price(
        kind=p.kind,
        sku=p.arm_sku_name,
        region=p.region,
        spot=p.spot,
        unit_price=p.unit_price,
        unit=p.unit,
        effective_start=start,
        meter_id=p.meter_id,
        source=source,
        synced_at=now,
    )


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
    for actual_costs_window() and replace the stored rows of those days in one transaction;
    each day is marked fetched at ``now``, and the portal's estimate of those days is stored
    as of ``now`` in the same transaction (cost_estimates_store). Idempotent: a second sync
    stores the same rows.

    Raises CloudError (Azure refused, throttled past retries, unreachable), CostFormatError
    (malformed answer) or ValueError (a currency other than USD, days < 1); then nothing
    stored changes.
    """
    first, last = actual_costs_window(now=now, days=days)
    rows = _actual_cost_rows(fetch_actual_costs(azure_settings(), first=first, last=last), now)
    span = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    with transaction.atomic():
        ActualCost.objects.filter(day__gte=first, day__lte=last).delete()
        ActualCost.objects.bulk_create(rows, batch_size=2000)
        ActualCostDay.objects.filter(day__gte=first, day__lte=last).delete()
        ActualCostDay.objects.bulk_create([ActualCostDay(day=d, fetched_at=now) for d in span])
        cost_estimates_store(first=first, last=last, now=now)
    total = sum((r.cost for r in rows), Decimal(0))
    unattributed = sum((r.cost for r in rows if r.workspace_id is None), Decimal(0))
    return ActualCostSync(first, last, len(rows), total, unattributed)


def _actual_cost_rows(costs, now: datetime) -> list[ActualCost]:
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


def _workspaces_by_tag(tags) -> dict[str, tuple]:
    """{tag value: (workspace id, team id)} for the values that name a portal workspace (the
    portal tags each workspace's resources with its id)."""
    ids = {}
    for tag in tags:
        try:
            ids[tag] = uuid.UUID(tag)
        except ValueError:
            continue  # Untagged (""), or a tag someone else set: not ours.
    found = {
        w["pk"]: (w["pk"], w["team_id"])
        for w in Workspace.objects.filter(pk__in=ids.values()).values("pk", "team_id")
    }
    return {tag: found[pk] for tag, pk in ids.items() if pk in found}


# UTC days priced per step: every team at once, so fewer days than a team's rollup chunk.
ESTIMATE_CHUNK_DAYS = 3
_UTC_DAY = timedelta(days=1)
_ESTIMATE_PLACES = Decimal("1E-8")  # EstimatedCost.cost's decimal places


def cost_estimates_store(*, first: date, last: date, now: datetime) -> int:
    """Replace the stored estimate (EstimatedCost, USD unrounded) of the UTC days
    first..last with the portal's estimate per team, workspace and UTC day as of ``now``:
    every team's UsageIntervals up to ``now`` priced by Price (billing.selectors.live_spend).
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


def _store_estimate_chunk(team_ids: list, first: date, last: date, now: datetime) -> int:
    window = (day_start(first, UTC_ZONE), min(now, day_start(last + _UTC_DAY, UTC_ZONE)))
    if window[0] >= window[1]:
        return 0  # days still to come: nothing used yet
    lines = live_spend(
        windows=dict.fromkeys(team_ids, window), zones=dict.fromkeys(team_ids, UTC_ZONE)
    )
    totals: dict[tuple, Decimal] = defaultdict(Decimal)
    for line in lines:  # compute and disk together, as Azure's cost per workspace tag
        totals[(line.team_id, line.workspace_id, line.day)] += line.cost
    EstimatedCost.objects.bulk_create(
        (
            EstimatedCost(
                team_id=team,
                workspace_id=workspace,
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
