"""Prices: Azure retail prices (Retail Prices API, cloud.prices) stored with their effective
dates, the price in effect for a meter, and the size offerings' prices kept to them. Money in
USD (Decimal)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from billing.models import Price, PriceKind
from billing.rollups import rollup_invalidate
from cloud.prices import RetailPrice
from workspaces.models import SizeOffering


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
    changed: list[SizeOffering] = []
    unpriced: list[SizeOffering] = []
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


@dataclass(frozen=True)
class PriceSync:
    """What a price sync did: rows ``added``, prices ``unchanged``, and the earliest moment
    from which spend changed (None when nothing did)."""

    added: int
    unchanged: int
    changed_since: datetime | None


def prices_sync(*, prices: list[RetailPrice], source: str, now: datetime) -> PriceSync:
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


def _price_rows(prices: Iterable[RetailPrice]) -> dict[tuple[str, str, str, bool], list[Price]]:
    book: dict[tuple[str, str, str, bool], list[Price]] = defaultdict(list)
    rows = Price.objects.filter(sku__in={p.arm_sku_name for p in prices}).order_by(
        "effective_start"
    )
    for row in rows:
        book[(row.kind, row.sku, row.region, row.spot)].append(row)
    return book


def _row_for(p: RetailPrice, rows: list[Price], source: str, now: datetime) -> Price | None:
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
