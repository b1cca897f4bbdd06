"""The workspaces of a booking (docs/bookings.md, "Its workspaces"): naming them, at booking
time or later, each either an existing VM of the team in the booking's region and size or one
to make at the window's start; bookings.lifecycle starts them into the capacity reservation
group at the start and stops them at the end.

Errors raised: SeatRefused (the message is shown as is), ActionNotAllowed.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from bookings.models import LIVE, Booking, BookingSeat
from common.permissions import access_require
from teams.audit import audit_record
from teams.guards import team_lock
from workspaces.backends.vm_reserved import reservable_refusal, reserved_environment
from workspaces.models import Workspace
from workspaces.selectors import user_ssh_key_last_used
from workspaces.ssh_keys import validate_ssh_public_key
from workspaces.states import Status

NAME_MAX = 63


class SeatRefused(Exception):
    """A workspace that may not be added to a booking; the message says why."""


def booking_seat_add(
    *,
    actor: User,
    booking: Booking,
    now: datetime,
    workspace: Workspace | None = None,
    name: str = "",
    environment: str = "",
    ssh_public_key: str = "",
) -> BookingSeat:
    """Add ``workspace`` (an existing VM ``actor`` may act on) to ``booking``, or, without it,
    a VM ``name`` made for ``actor`` at the window's start from the environment ``environment``
    (a slug; "" for the team's default) with ``ssh_public_key`` ("": the key of ``actor``'s
    newest workspace). Decided holding the team's
    row: a booking has at most its ``instances`` workspaces, a workspace is in at most one
    live booking at a time, and one added after the window began is started at the next tick.
    Audited (booking.seat_add). Raises SeatRefused, ActionNotAllowed."""
    access_require(user=actor, perm="bookings.book", obj=booking.team)
    if workspace is not None:
        access_require(user=actor, perm="workspaces.act_on_workspace", obj=workspace)
    with transaction.atomic():
        team_lock(booking.team)
        booking.refresh_from_db()
        _check_room(booking)
        seat = BookingSeat(booking=booking, owner=actor, created_at=now)
        if workspace is not None:
            _check_workspace(booking, workspace)
            seat.workspace, seat.owner = workspace, workspace.owner
        else:
            _fill_new(seat, booking, name, environment, ssh_public_key)
        seat.save()
        what = {"workspace": str(workspace.pk)} if workspace else {"make": seat.name}
        audit_record(
            actor=actor,
            team=booking.team,
            action="booking.seat_add",
            obj=booking,
            before={},
            after=what,
            now=now,
        )
    return seat


def _check_room(booking: Booking) -> None:
    if booking.state not in LIVE:
        raise SeatRefused(f"{booking.title} is {booking.get_state_display().lower()}.")
    if booking.seats.count() >= booking.instances:
        raise SeatRefused(
            f"{booking.title} holds {booking.instances} VM(s), and each has its workspace."
        )


def _check_workspace(booking: Booking, workspace: Workspace) -> None:
    why = reservable_refusal(
        workspace=workspace, team=booking.team, region=booking.region, vm_size=booking.vm_size
    )
    if why:
        raise SeatRefused(why)
    other = BookingSeat.objects.filter(
        workspace=workspace,
        booking__state__in=LIVE,
        booking__starts_at__lt=booking.ends_at,
        booking__ends_at__gt=booking.starts_at,
    ).first()
    if other is not None:
        raise SeatRefused(f"{workspace.name} is already in {other.booking.title} then.")


def _fill_new(
    seat: BookingSeat, booking: Booking, name: str, environment: str, ssh_public_key: str
) -> None:
    name = name.strip()
    if not name or len(name) > NAME_MAX:
        raise SeatRefused(f"Give the new workspace a name of 1 to {NAME_MAX} characters.")
    taken = Workspace.objects.filter(team=booking.team, name=name).exclude(status=Status.DELETED)
    if taken.exists() or booking.seats.filter(name=name).exists():
        raise SeatRefused(f"The team already has a workspace named “{name}”.")
    key = ssh_public_key or user_ssh_key_last_used(user=seat.owner)
    try:
        seat.ssh_public_key = validate_ssh_public_key(key)
    except ValidationError as exc:
        raise SeatRefused(" ".join(exc.messages)) from None
    if environment:
        found = reserved_environment(team=booking.team, vm_size=booking.vm_size, slug=environment)
        if found is None:
            raise SeatRefused(f"The environment “{environment}” is not offered for the size.")
        seat.environment = found
    seat.name = name
