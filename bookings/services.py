"""Booking rules: what a booking costs and whether it may be made (quote), making one, and
cancelling it (docs/bookings.md). The hold and release in Azure are bookings.lifecycle's.

Money is USD (Decimal); times are aware UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from bookings.models import LIVE, Booking, BookingSeries, BookingState
from teams.audit import audit_record
from teams.guards import team_lock
from teams.models import GpuQuota, Team
from workspaces.azure import azure_headroom
from workspaces.budgets import team_budget
from workspaces.models import SizeOffering

CENT = Decimal("0.01")
MAX_WINDOW = timedelta(days=14)
MAX_AHEAD = timedelta(days=366)
MAX_INSTANCES = 64


class BookingRefused(Exception):
    """A booking that may not be made; ``reasons`` say why, each a sentence."""

    def __init__(self, reasons: tuple[str, ...]):
        self.reasons = reasons
        super().__init__(" ".join(reasons))


@dataclass(frozen=True)
class Quote:
    """What a booking would cost and whether it may be made. ``hold_from``: when the
    reservation is made (BOOKING_HOLD_MINUTES before the window); ``held_hours``: from then to
    the window's end, all billed by Azure at the size's pay-as-you-go price whether VMs use
    the instances or not; ``cost`` USD for all instances; ``over``: the reasons it is refused,
    () when it may be made."""

    hold_from: datetime
    held_hours: Decimal
    cost: Decimal
    gpus: int
    over: tuple[str, ...]


def booking_quote(
    *,
    team: Team,
    offering: SizeOffering,
    instances: int,
    starts_at: datetime,
    ends_at: datetime,
    now: datetime,
    exclude: Booking | None = None,
    budget: bool = True,
) -> Quote:
    """The cost of ``instances`` of ``offering`` from ``starts_at`` to ``ends_at`` for
    ``team``, and every reason it may not be made: the window, the team's GPU quota against
    its other bookings then, its monthly budget (unless ``budget`` is False: a series weighs
    its occurrences' costs by month, bookings.series), and Azure's regional quota against
    every team's bookings then. Reads Azure's usages (cached); never raises."""
    ahead = timedelta(minutes=settings.BOOKING_HOLD_MINUTES)
    # Compared, not subtracted, first: a start at datetime's lower end must not overflow.
    hold_from = now if starts_at <= now + ahead else starts_at - ahead
    held_hours, cost = hold_cost(
        price_per_hour=offering.price_per_hour,
        instances=instances,
        hold_from=hold_from,
        ends_at=ends_at,
    )
    gpus = offering.gpu_count * instances
    over = _window_problems(starts_at, ends_at, now, instances)
    if not over:
        overlapping = _overlapping(starts_at, ends_at, exclude)
        over += _quota_problem(team, offering, gpus, overlapping)
        over += budget_problem(team, cost, starts_at, now) if budget else ()
        over += _azure_problem(offering, instances, overlapping)
    return Quote(hold_from, held_hours, cost, gpus, over)


def hold_cost(
    *, price_per_hour: Decimal, instances: int, hold_from: datetime, ends_at: datetime
) -> tuple[Decimal, Decimal]:
    """(hours held, USD): Azure bills every reserved instance at the size's pay-as-you-go
    price from the reservation's create to its delete, used or not (learn.microsoft.com/azure/
    virtual-machines/capacity-reservation-overview, "Pricing and billing")."""
    seconds = Decimal(max((ends_at - hold_from).total_seconds(), 0))
    held_hours = (seconds / 3600).quantize(Decimal("0.0001"))
    return held_hours, (price_per_hour * instances * held_hours).quantize(CENT, ROUND_HALF_UP)


def booking_cost(*, booking: Booking) -> Decimal:
    """What a booking costs as booked (USD), the figure its quote showed."""
    return hold_cost(
        price_per_hour=booking.price_per_hour,
        instances=booking.instances,
        hold_from=booking.hold_from,
        ends_at=booking.ends_at,
    )[1]


def _window_problems(
    starts_at: datetime, ends_at: datetime, now: datetime, instances: int
) -> tuple[str, ...]:
    problems = []
    if starts_at <= now:
        problems.append("The window must start in the future.")
    if ends_at <= starts_at:
        problems.append("The window must end after it starts.")
    elif ends_at - starts_at > MAX_WINDOW:
        problems.append(f"A booking lasts at most {MAX_WINDOW.days} days; book several.")
    if starts_at > now + MAX_AHEAD:
        problems.append("A booking starts at most a year ahead.")
    if not 1 <= instances <= MAX_INSTANCES:
        problems.append(f"Book from 1 to {MAX_INSTANCES} VMs.")
    return tuple(problems)


def _overlapping(starts_at: datetime, ends_at: datetime, exclude: Booking | None) -> list[Booking]:
    found = Booking.objects.filter(state__in=LIVE, starts_at__lt=ends_at, ends_at__gt=starts_at)
    if exclude is not None:
        found = found.exclude(pk=exclude.pk)
    return list(found)


def _quota_problem(
    team: Team, offering: SizeOffering, gpus: int, overlapping: list[Booking]
) -> tuple[str, ...]:
    quota = GpuQuota.objects.filter(team=team, gpu_model=offering.gpu_model).first()
    limit = quota.gpus if quota else 0
    booked = sum(
        b.gpus for b in overlapping if b.team_id == team.pk and b.gpu_model == offering.gpu_model
    )
    if booked + gpus <= limit:
        return ()
    return (
        f"{team.name} may hold {limit} {offering.gpu_model} GPUs; its other bookings then hold "
        f"{booked}, and this one asks for {gpus}.",
    )


def budget_problem(
    team: Team, cost: Decimal, starts_at: datetime, now: datetime
) -> tuple[str, ...]:
    """Why ``cost`` (USD) of bookings starting in ``starts_at``'s month is over budget, or ():
    the month's budget left (workspaces.budgets, the one budget figure) when that is this
    month; the whole budget for a later month, whose spend has not begun."""
    if team.monthly_budget is None:
        return ()
    left = team.monthly_budget
    if (starts_at.year, starts_at.month) == (now.year, now.month):
        left = team_budget(teams=[team], now=now)[team.pk].left or Decimal(0)
    if cost <= left:
        return ()
    return (f"It costs ${cost:,.2f}; {team.name} has ${left:,.2f} of its monthly budget left.",)


def _azure_problem(
    offering: SizeOffering, instances: int, overlapping: list[Booking]
) -> tuple[str, ...]:
    """Azure's regional vCPU quota for the size, against every team's bookings then (those
    already held count in Azure's usage, so they are not counted twice)."""
    headroom = azure_headroom(region=offering.region, vm_size=offering.vm_size)
    if headroom.vcpus_left is None:
        return ()  # unknown now: the hold itself tells, as a failed booking
    same = [b for b in overlapping if (b.region, b.vm_size) == (offering.region, offering.vm_size)]
    booked = sum(b.vcpus for b in same if b.state != BookingState.HELD)
    needed = offering.vcpus * instances
    if booked + needed <= headroom.vcpus_left:
        return ()
    return (
        f"Azure's quota in {offering.region} leaves {headroom.vcpus_left} vCPUs for "
        f"{offering.vm_size}; other bookings then take {booked} and this one needs {needed}.",
    )


def booking_create(
    *,
    actor: User,
    team: Team,
    title: str,
    offering: SizeOffering,
    instances: int,
    starts_at: datetime,
    ends_at: datetime,
    now: datetime,
) -> Booking:
    """Book ``instances`` of ``offering`` for ``team`` (the caller checked ``actor`` may).
    Decided holding the team's row, so two bookings at once cannot both take its last GPUs.
    Raises BookingRefused with every reason."""
    with transaction.atomic():
        team_lock(team)
        quote = booking_quote(
            team=team,
            offering=offering,
            instances=instances,
            starts_at=starts_at,
            ends_at=ends_at,
            now=now,
        )
        if quote.over:
            raise BookingRefused(quote.over)
        booking = booking_row(
            actor=actor, team=team, title=title, offering=offering, instances=instances,
            starts_at=starts_at, ends_at=ends_at, quote=quote, now=now,
        )  # fmt: skip
        after: dict[str, Any] = {
            "title": title,
            "vm_size": offering.vm_size,
            "region": offering.region,
            "instances": instances,
            "starts_at": starts_at.isoformat(),
            "ends_at": ends_at.isoformat(),
            "cost_usd": str(quote.cost),
        }
        audit_record(
            actor=actor,
            team=team,
            action="booking.create",
            obj=booking,
            before={},
            after=after,
            now=now,
        )
        return booking


def booking_row(
    *,
    actor: User,
    team: Team,
    title: str,
    offering: SizeOffering,
    instances: int,
    starts_at: datetime,
    ends_at: datetime,
    quote: Quote,
    now: datetime,
    series: BookingSeries | None = None,
) -> Booking:
    """Write one booking as ``quote`` priced it (the caller decided it may be made, inside
    its transaction holding the team's row)."""
    return Booking.objects.create(
        team=team,
        series=series,
        created_by=actor,
        title=title,
        region=offering.region,
        vm_size=offering.vm_size,
        gpu_model=offering.gpu_model,
        instances=instances,
        gpus=quote.gpus,
        vcpus=offering.vcpus * instances,
        price_per_hour=offering.price_per_hour,
        starts_at=starts_at,
        ends_at=ends_at,
        hold_from=quote.hold_from,
        created_at=now,
        updated_at=now,
    )


def booking_cancel(*, actor: User, booking: Booking, now: datetime) -> bool:
    """Cancel a booking that has not ended (audited): one not yet held is cancelled at once;
    one held (or being held) is released by bookings.lifecycle. False when it had already
    ended."""
    moves = {
        BookingState.SCHEDULED: BookingState.CANCELLED,
        BookingState.HOLDING: BookingState.RELEASING,
        BookingState.HELD: BookingState.RELEASING,
    }
    to = moves.get(BookingState(booking.state))
    with transaction.atomic():
        if to is None or not _move(booking, booking.state, to, now):
            return False
        audit_record(
            actor=actor,
            team=booking.team,
            action="booking.cancel",
            obj=booking,
            before={"state": booking.state},
            after={"state": to},
            now=now,
        )
    return True


def _move(booking: Booking, expected: str, to: str, now: datetime) -> bool:
    changed = Booking.objects.filter(pk=booking.pk, state=expected).update(state=to, updated_at=now)
    return bool(changed)
