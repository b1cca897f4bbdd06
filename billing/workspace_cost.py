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
from workspaces.models import Workspace, WorkspaceEvent
from workspaces.states import Status


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
    the cent; ``per_hour`` USD/hour it costs now, of which ``disk_per_hour`` for its OS disk;
    while a delete is asked and not confirmed (Deleting, or a failed delete), ``delete_asked_at``
    (aware datetime) and ``since_delete``, USD billed since then (Azure bills until the resource
    is gone), else None for both."""

    total: Decimal
    month: Decimal
    per_hour: Decimal
    disk_per_hour: Decimal
    delete_asked_at: datetime | None = None
    since_delete: Decimal | None = None


def _delete_asked_at(workspace: Workspace) -> datetime | None:
    """When the delete now under way (or refused, waiting for Retry the delete) was first asked:
    the move to Deleting that began it. None when no delete is pending."""
    pending = workspace.status == Status.DELETING or (
        workspace.status == Status.FAILED and workspace.failed_operation == "delete"
    )
    if not pending:
        return None
    asked = WorkspaceEvent.objects.filter(workspace=workspace, to_status=Status.DELETING)
    began = asked.exclude(from_status=Status.FAILED).order_by("-at").values_list("at", flat=True)
    return began.first()


def workspace_cost(*, workspace: Workspace, now: datetime) -> WorkspaceCost:
    """The workspace's cost so far and now. Three queries, four while a delete is pending."""
    tz = team_timezones(team_ids=[workspace.team_id])[workspace.team_id]
    month_start, _ = month_bounds(now, tz)
    asked_at = _delete_asked_at(workspace)
    intervals = intervals_of(UsageInterval.objects.filter(workspace=workspace))
    book = price_book(book_key(i) for i in intervals)
    total = month = per_hour = disk = since = Decimal(0)
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
        if asked_at is not None:
            since += sum(
                (p.cost for p in metering.pieces(
                    started_at=i.started_at, ended_at=i.ended_at, prices=prices,
                    window=(asked_at, now), tz=tz, share=share,
                )),
                Decimal(0),
            )  # fmt: skip
        if i.ended_at is None:
            point = metering.price_at(prices, now)
            assert point is not None  # points() starts with the quoted price, at BEGINNING
            hourly = point.hourly * share[0] / share[1]
            per_hour += hourly
            disk += hourly if i.meter == "disk" else 0
    return WorkspaceCost(
        metering.to_cents(total),
        metering.to_cents(month),
        per_hour,
        disk,
        asked_at,
        None if asked_at is None else metering.to_cents(since),
    )
