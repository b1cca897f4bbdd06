"""Bookings: N VMs of one size in one region for a time window (a course on Tuesdays, the
days before a deadline), within the team's GPU quota and budget, backed by an Azure
on-demand capacity reservation (cloud.azure_reservations) held from BOOKING_HOLD_MINUTES
before the window until its end, so the GPUs are there when it starts even if the region
fills up meanwhile. Azure bills a reservation as running VMs of its size, used or not
(learn.microsoft.com/azure/virtual-machines/capacity-reservation-overview): its cost is
count x price x the hours held, shown before confirming (booking_quote).

Errors raised: BookingRefused (the message says why), ActionNotAllowed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q

from cloud import azure_reservations
from cloud.errors import CloudError
from common.words import usd
from notifications.notice_text import mark
from notifications.notices import notice_send
from scheduling.models import Booking, BookingStatus
from teams.audit import audit_record
from teams.models import GpuQuota, Team
from workspaces.azure import azure_settings
from workspaces.models import SizeOffering
from workspaces.requests import WorkspaceActionError, check_member

log = logging.getLogger(__name__)

LONGEST = timedelta(days=14)
# Still to come, or holding Azure's capacity: counted against the team's quota.
OPEN = (BookingStatus.BOOKED, BookingStatus.HOLDING, BookingStatus.HELD, BookingStatus.ACTIVE)


class BookingRefused(WorkspaceActionError):
    """A booking the portal does not take; the message says why."""


def hold_lead() -> timedelta:
    return timedelta(minutes=settings.BOOKING_HOLD_MINUTES)


@dataclass(frozen=True)
class Quote:
    """What a booking costs: held ``hours`` (from the hold before the window to its end) x
    ``count`` x ``price_per_hour`` (USD/hour per VM) = ``total`` (USD)."""

    hours: Decimal
    count: int
    price_per_hour: Decimal

    @property
    def total(self) -> Decimal:
        return (self.hours * self.count * self.price_per_hour).quantize(Decimal("0.01"))

    def words(self) -> str:
        return (
            f"{usd(self.total)}: {self.count} × {usd(self.price_per_hour)}/hour for "
            f"{self.hours:.1f} hours held, used or not (Azure bills a capacity reservation as "
            "running VMs)."
        )


def booking_quote(
    *, offering: SizeOffering, count: int, starts_at: datetime, ends_at: datetime
) -> Quote:
    held = (ends_at - (starts_at - hold_lead())).total_seconds() / 3600
    return Quote(Decimal(str(round(held, 4))), count, offering.price_per_hour)


def booking_create(
    *,
    user: User,
    team: Team,
    title: str,
    offering: SizeOffering,
    count: int,
    starts_at: datetime,
    ends_at: datetime,
    now: datetime,
) -> Booking:
    """Book ``count`` VMs of ``offering`` for the window (a member of the team), checked
    holding the team row: the window is ahead and at most 14 days long, the team's GPU quota
    holds it beside its other bookings overlapping it, and its cost fits the monthly budget.
    Audited (``booking.created``). Raises BookingRefused, WorkspaceActionError."""
    check_member(user=user, team=team)
    _check_window(starts_at, ends_at, count, now)
    quote = booking_quote(offering=offering, count=count, starts_at=starts_at, ends_at=ends_at)
    with transaction.atomic():
        locked = Team.objects.select_for_update().get(pk=team.pk)
        _check_quota(locked, offering, count, starts_at, ends_at)
        if locked.monthly_budget is not None and quote.total > locked.monthly_budget:
            raise BookingRefused(
                f"It costs {quote.words()} That is more than {team.name}'s "
                f"{usd(locked.monthly_budget)} monthly budget."
            )
        booking = Booking.objects.create(
            team=locked, owner=user, title=title, vm_size=offering.vm_size,
            region=offering.region, gpu_model=offering.gpu_model,
            gpus_each=str(offering.gpu_share), count=count,
            price_per_hour=offering.price_per_hour, starts_at=starts_at, ends_at=ends_at,
            created_at=now,
        )  # fmt: skip
        audit_record(
            actor=user, team=locked, action="booking.created", obj=booking, before={},
            after={"count": count, "vm_size": offering.vm_size, "region": offering.region,
                   "starts_at": starts_at.isoformat(), "ends_at": ends_at.isoformat(),
                   "cost": str(quote.total)},
            now=now,
        )  # fmt: skip
    return booking


def _check_window(starts_at: datetime, ends_at: datetime, count: int, now: datetime) -> None:
    if count < 1:
        raise BookingRefused("Book at least one VM.")
    if starts_at <= now:
        raise BookingRefused("The window must start in the future.")
    if ends_at <= starts_at:
        raise BookingRefused("The window must end after it starts.")
    if ends_at - starts_at > LONGEST:
        raise BookingRefused("A booking lasts at most 14 days; book the rest separately.")


def _check_quota(
    team: Team, offering: SizeOffering, count: int, starts_at: datetime, ends_at: datetime
) -> None:
    """The team's quota of the model holds this booking beside every open one of the same
    model that overlaps it (all at once, the worst case)."""
    quota = GpuQuota.objects.filter(team=team, gpu_model=offering.gpu_model).first()
    limit = quota.gpus if quota else 0
    overlapping = Booking.objects.filter(
        Q(starts_at__lt=ends_at) & Q(ends_at__gt=starts_at),
        team=team,
        gpu_model=offering.gpu_model,
        status__in=OPEN,
    )
    booked = sum((Fraction(b.gpus_each) * b.count for b in overlapping), Fraction(0))
    wanted = offering.gpu_share * count
    if booked + wanted > limit:
        others = "; ".join(f"“{b.title}” {b.count} × {b.vm_size}" for b in overlapping)
        raise BookingRefused(
            f"It needs {wanted} {offering.gpu_model} GPUs; {team.name}'s quota is {limit}"
            + (f" and {booked} are booked in that window ({others})." if others else ".")
        )


def bookings_tick(*, now: datetime) -> None:
    """Move every booking on (a beat task, every minute): hold its reservation from
    BOOKING_HOLD_MINUTES before the window, see Azure's answer, open the window, warn the
    owner BOOKING_WARN_MINUTES before its end, and at the end release the reservation."""
    for booking in Booking.objects.filter(
        status=BookingStatus.BOOKED, starts_at__lte=now + hold_lead()
    ):
        _hold(booking, now)
    for booking in Booking.objects.filter(status=BookingStatus.HOLDING):
        _check_held(booking, now)
    Booking.objects.filter(status=BookingStatus.HELD, starts_at__lte=now).update(
        status=BookingStatus.ACTIVE
    )
    warn = timedelta(minutes=settings.BOOKING_WARN_MINUTES)
    for booking in Booking.objects.filter(
        status=BookingStatus.ACTIVE, warned_at__isnull=True, ends_at__lte=now + warn
    ):
        _warn(booking, now)
    for booking in Booking.objects.filter(status__in=OPEN[1:], ends_at__lte=now):
        _release(booking, now)


def _hold(booking: Booking, now: datetime) -> None:
    tags = {"portal-booking": str(booking.pk), "portal-team": booking.team.slug}
    try:
        azure_reservations.group_ensure(
            azure_settings(), name=booking.group_name, location=booking.region, tags=tags
        )
        azure_reservations.reservation_put(
            azure_settings(), group=booking.group_name, name=booking.group_name,
            location=booking.region, vm_size=booking.vm_size, capacity=booking.count, tags=tags,
        )  # fmt: skip
    except CloudError as exc:
        _failed(booking, f"Azure refused the reservation: {exc.code}: {exc.message}", now)
        return
    Booking.objects.filter(pk=booking.pk, status=BookingStatus.BOOKED).update(
        status=BookingStatus.HOLDING
    )


def _check_held(booking: Booking, now: datetime) -> None:
    try:
        state = azure_reservations.reservation_get(
            azure_settings(), group=booking.group_name, name=booking.group_name
        )
    except CloudError as exc:
        log.warning("booking %s: reservation not read: %s", booking.pk, exc.code)
        return
    if state is not None and state.succeeded:
        Booking.objects.filter(pk=booking.pk, status=BookingStatus.HOLDING).update(
            status=BookingStatus.HELD
        )
    elif state is None or state.failed:
        _failed(booking, "Azure had no room for the reservation (AllocationFailed).", now)


def _failed(booking: Booking, reason: str, now: datetime) -> None:
    Booking.objects.filter(pk=booking.pk).update(status=BookingStatus.FAILED, reason=reason)
    notice_send(
        users=[booking.owner], subject=f"Booking “{booking.title}” could not be held",
        text=f"{reason} The booking from {mark(booking.starts_at)} is not backed by Azure.",
        link="/queue/bookings/", now=now,
    )  # fmt: skip


def _warn(booking: Booking, now: datetime) -> None:
    Booking.objects.filter(pk=booking.pk).update(warned_at=now)
    notice_send(
        users=[booking.owner], subject=f"Booking “{booking.title}” ends soon",
        text=f"The booking ends at {mark(booking.ends_at)}; its reservation is released then.",
        link="/queue/bookings/", now=now,
    )  # fmt: skip


def _release(booking: Booking, now: datetime) -> None:
    """Delete the reservation and its group; a delete Azure refuses (VMs still allocated)
    is tried again at the next tick."""
    try:
        azure_reservations.reservation_delete(
            azure_settings(), group=booking.group_name, name=booking.group_name
        )
        azure_reservations.group_delete(azure_settings(), name=booking.group_name)
    except CloudError as exc:
        log.warning("booking %s: not released yet: %s", booking.pk, exc.code)
        return
    Booking.objects.filter(pk=booking.pk).update(status=BookingStatus.RELEASED)


def bookings_upcoming(*, team_ids: list[int] | None, now: datetime) -> list[Booking]:
    """Bookings not ended, of ``team_ids`` (None: every team), by start."""
    rows = Booking.objects.filter(status__in=OPEN, ends_at__gt=now).select_related("team", "owner")
    if team_ids is not None:
        rows = rows.filter(team_id__in=team_ids)
    return list(rows.order_by("starts_at"))
