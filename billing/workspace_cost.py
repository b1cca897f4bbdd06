"""What one workspace has cost and costs now, and the Spot price column of the size
offerings: single lookups priced like the spend pages (billing.pricing). Money in USD
(Decimal)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import OuterRef, Subquery

from billing import metering
from billing.live_spend import intervals_of
from billing.models import Price, PriceKind, UsageInterval
from billing.pricing import BEGINNING, book_key, points, price_book
from common.months import month_bounds
from teams.selectors import team_timezones
from workspaces.models import Workspace


def offering_spot_price(*, now: datetime) -> Subquery:
    """For SizeOffering rows: the Spot price (USD/hour) of the row's vm_size and region in
    effect at ``now``, from the Price rows (Azure Retail Prices API, synced by sync_prices),
    None where Azure has none. What workspaces.selectors annotates offerings with
    (workspaces.hooks.spot_price)."""
    latest = Price.objects.filter(
        kind=PriceKind.VM,
        spot=True,
        unit="1 Hour",
        sku=OuterRef("vm_size"),
        region=OuterRef("region"),
        effective_start__lte=now,
    ).order_by("-effective_start")
    return Subquery(latest.values("unit_price")[:1])


@dataclass(frozen=True)
class WorkspaceCost:
    """What a workspace has cost: ``total`` and ``month`` (its team's month so far), USD to
    the cent; ``per_hour`` USD/hour it costs now, of which ``disk_per_hour`` for its OS disk."""

    total: Decimal
    month: Decimal
    per_hour: Decimal
    disk_per_hour: Decimal


def workspace_cost(*, workspace: Workspace, now: datetime) -> WorkspaceCost:
    """The workspace's cost so far and now. Three queries."""
    tz = team_timezones(team_ids=[workspace.team_id])[workspace.team_id]
    month_start, _ = month_bounds(now, tz)
    intervals = intervals_of(UsageInterval.objects.filter(workspace=workspace))
    book = price_book(book_key(i) for i in intervals)
    total = month = per_hour = disk = Decimal(0)
    for i in intervals:
        prices = points(book, i)
        share = (i.share_num, i.share_den)
        for piece in metering.pieces(
            started_at=i.started_at,
            ended_at=i.ended_at,
            prices=prices,
            window=(BEGINNING, now),
            tz=tz,
            share=share,
        ):
            total += piece.cost
            month += piece.cost if piece.start >= month_start else 0
        if i.ended_at is None:
            point = metering.price_at(prices, now)
            assert point is not None  # points() starts with the quoted price, at BEGINNING
            hourly = point.hourly * share[0] / share[1]
            per_hour += hourly
            disk += hourly if i.meter == "disk" else 0
    return WorkspaceCost(metering.to_cents(total), metering.to_cents(month), per_hour, disk)
