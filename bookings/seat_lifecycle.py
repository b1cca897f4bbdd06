"""A booking's workspaces at the edges of its window (bookings.lifecycle calls these): at the
start each is started into the booking's capacity reservation group, or made in it; at the
end (or when the booking is cancelled) each is stopped and taken out of the group, so the
reservation and the group can be deleted (docs/bookings.md, "Its workspaces").

Each seat is handled on its own: one whose workspace cannot start (the team's quota, a name
taken meanwhile) says why on the booking and never holds up the others.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction

from bookings.models import Booking, BookingSeat
from cloud import azure_reservations as reservations
from notifications.notices import notice_send
from workspaces.azure import azure_settings
from workspaces.backends.vm_reserved import (
    LEFT,
    STOPPED,
    workspace_create_reserved,
    workspace_leave_reserved,
    workspace_start_reserved,
)
from workspaces.models import SizeOffering
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status

log = logging.getLogger(__name__)


def seats_start(*, booking: Booking, now: datetime) -> None:
    """Start (or make) every workspace of ``booking`` into its group. Safe to run twice: a
    seat's workspace is made once (the seat is its request key) and a start is a
    compare-and-set from Stopped. Raises nothing for one seat's refusal (its ``outcome``
    says it); a CloudError from Azure propagates (the tick tries again)."""
    group = reservations.group_id(azure_settings(), name=booking.azure_name)
    reason = f"Started for the booking {booking.title}"
    for seat in booking.seats.select_related("owner", "environment", "workspace"):
        if seat.workspace_id is None:
            outcome = _make(seat, booking, group, now)
        else:
            outcome = workspace_start_reserved(
                workspace_id=seat.workspace_id, group=group, now=now, reason=reason
            )
        BookingSeat.objects.filter(pk=seat.pk).update(outcome=outcome)


def _make(seat: BookingSeat, booking: Booking, group: str, now: datetime) -> str:
    offering = SizeOffering.objects.filter(region=booking.region, vm_size=booking.vm_size).first()
    if offering is None:
        return f"Not made: {booking.vm_size} is no longer offered in {booking.region}."
    try:
        with transaction.atomic():
            workspace = workspace_create_reserved(
                owner=seat.owner,
                team=booking.team,
                name=seat.name,
                offering=offering,
                environment=seat.environment,
                ssh_public_key=seat.ssh_public_key,
                group=group,
                request_key=seat.pk,
                now=now,
                why=f"Booked GPUs: {booking.title}",
            )
            BookingSeat.objects.filter(pk=seat.pk).update(workspace=workspace)
    except (WorkspaceActionError, ValidationError) as exc:
        text = f"{seat.name} was not made for {booking.title}: {exc}"
        notice_send(users=[seat.owner], subject=text, text=text, link=_link(booking), now=now)
        return f"Not made: {exc}"
    if workspace.status == Status.PENDING_APPROVAL:
        return "Asked for: above the team's quota, it waits for a platform admin."
    return "Made in the reservation."


def seats_leave(*, booking: Booking, now: datetime) -> bool:
    """Stop every workspace of ``booking`` still running (its owner told) and take the
    stopped ones out of the group. True once none is allocated or associated; False while a
    stop is under way (the next tick asks again). Raises CloudError."""
    done = True
    reason = f"The booking {booking.title} ended"
    for seat in booking.seats.filter(left_at=None).select_related("owner", "workspace"):
        left = LEFT
        if seat.workspace_id is not None:
            left = workspace_leave_reserved(workspace_id=seat.workspace_id, now=now, reason=reason)
        if left == STOPPED:
            _tell_stopped(seat, booking, now)
        if left == LEFT:
            BookingSeat.objects.filter(pk=seat.pk).update(left_at=now)
        done = done and left == LEFT
    return done


def _tell_stopped(seat: BookingSeat, booking: Booking, now: datetime) -> None:
    assert seat.workspace is not None
    text = f"{seat.workspace.name} was stopped: {booking.title} ended."
    notice_send(users=[seat.owner], subject=text, text=text, link=_link(booking), now=now)


def _link(booking: Booking) -> str:
    return f"/teams/{booking.team.slug}/bookings/"
