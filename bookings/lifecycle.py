"""A booking's life in Azure, one step per beat tick (bookings_advance): at ``hold_from`` the
capacity reservation group and its reservation are made; once Azure holds the instances the
booking is held; at its start its workspaces are started (or made) into the group
(bookings.seat_lifecycle); before its end its maker is warned; at its end (or when
cancelled) its workspaces are stopped and taken out of the group, then the reservation and
the group are deleted. A reservation Azure could not make fails the booking,
its maker is told why, and what Azure made of it is deleted too (docs/bookings.md).

Each booking is advanced on its own: one Azure refuses, or one whose step raises, never holds
up the others; a transient error is tried again at the next tick.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q

from bookings.models import Booking, BookingState
from bookings.seat_lifecycle import seats_leave, seats_start
from cloud import azure_reservations as reservations
from cloud.costs import CHARGE_TAG
from cloud.errors import CloudError
from notifications.notices import notice_send
from workspaces.azure import azure_settings, azure_usage_changed

log = logging.getLogger(__name__)
RESERVATION = "instances"  # the reservation's name inside the booking's group


def bookings_advance(*, now: datetime) -> dict[str, int]:
    """Advance every booking due a step at ``now``; {state it ended in: how many}."""
    moved: dict[str, int] = {}
    for booking in _due(now):
        try:
            state = booking_step(booking=booking, now=now)
        except CloudError as exc:
            log.warning("booking %s: Azure answered %s; next tick", booking.pk, exc.code)
            continue
        except Exception:  # one booking's bug must not hold up the rest
            log.exception("booking %s could not be advanced", booking.pk)
            continue
        moved[state] = moved.get(state, 0) + 1
    return moved


def _warn() -> timedelta:
    return timedelta(minutes=settings.BOOKING_WARN_MINUTES)


def _due(now: datetime) -> list[Booking]:
    warn = _warn()
    return list(
        Booking.objects.filter(
            Q(state=BookingState.SCHEDULED, hold_from__lte=now)
            | Q(state__in=[BookingState.HOLDING, BookingState.RELEASING])
            | Q(state=BookingState.HELD, ends_at__lte=now + warn)
            | Q(state=BookingState.HELD, started_at=None, starts_at__lte=now)
            | Q(state=BookingState.FAILED, released_at=None)
        ).select_related("team", "created_by")
    )


def booking_step(*, booking: Booking, now: datetime) -> str:
    """One step of one booking; the state it is in afterwards. Raises CloudError (transient,
    or a refusal the step cannot place)."""
    steps = {
        BookingState.SCHEDULED: _hold,
        BookingState.HOLDING: _check_hold,
        BookingState.HELD: _near_end,
        BookingState.RELEASING: _release,
        BookingState.FAILED: _release,
    }
    step = steps.get(BookingState(booking.state))
    return step(booking, now) if step else booking.state


def _hold(booking: Booking, now: datetime) -> str:
    if now >= booking.ends_at:  # the portal was down for the whole window: nothing to hold
        _set(booking, BookingState.CANCELLED, now, error_message="Its window passed unheld.")
        return BookingState.CANCELLED
    azure = azure_settings()
    slug = booking.team.slug  # CHARGE_TAG: Azure's cost of it reconciles with the team's
    tags = {"portal": "gpu-workspace-portal", "booking": str(booking.pk), "team": slug}
    tags[CHARGE_TAG] = slug
    try:
        reservations.group_ensure(
            azure, name=booking.azure_name, location=booking.region, tags=tags
        )
        reservations.reservation_put(
            azure,
            group=booking.azure_name,
            name=RESERVATION,
            location=booking.region,
            vm_size=booking.vm_size,
            capacity=booking.instances,
            tags=tags,
        )
    except CloudError as exc:
        if exc.transient:
            raise
        return _failed(booking, now, exc.code, exc.message)
    azure_usage_changed(region=booking.region)
    _set(booking, BookingState.HOLDING, now, expected=BookingState.SCHEDULED)
    return BookingState.HOLDING


def _check_hold(booking: Booking, now: datetime) -> str:
    state = reservations.reservation_get(
        azure_settings(), group=booking.azure_name, name=RESERVATION
    )
    if state is None:  # lost (deleted behind our back): make it again
        _set(booking, BookingState.SCHEDULED, now, expected=BookingState.HOLDING)
        return _hold(booking, now)
    if state.failed:
        message = (
            f"Azure could not hold {booking.instances} x {booking.vm_size} in {booking.region} "
            "(no room for them there now)."
        )
        return _failed(booking, now, "AllocationFailed", message)
    if not state.succeeded:
        return BookingState.HOLDING
    if _set(booking, BookingState.HELD, now, expected=BookingState.HOLDING, held_at=now):
        _tell(booking, now, f"{booking.title}: {_what(booking)} are held for you from now.")
    return BookingState.HELD


def _near_end(booking: Booking, now: datetime) -> str:
    if now >= booking.ends_at:
        _set(booking, BookingState.RELEASING, now, expected=BookingState.HELD)
        return _release(booking, now)
    if booking.started_at is None and now >= booking.starts_at:
        # Its workspaces start into the reservation; marked once they were all sent, so a
        # tick that dies halfway starts the rest next time (each start is a compare-and-set).
        seats_start(booking=booking, now=now)
        _set(booking, BookingState.HELD, now, expected=BookingState.HELD, started_at=now)
    warn = booking.warned_at is None and now >= booking.ends_at - _warn()
    if warn and _set(booking, BookingState.HELD, now, expected=BookingState.HELD, warned_at=now):
        minutes = settings.BOOKING_WARN_MINUTES
        text = f"{booking.title} ends in {minutes} minutes: save your work."
        _tell(booking, now, text, owners=True)
    return BookingState.HELD


def _release(booking: Booking, now: datetime) -> str:
    """Delete the reservation, then, once Azure says it is gone, the group. A reservation with
    VMs still allocated to it is refused (409) until they stop: tried again next tick."""
    if booking.started_at is not None and not seats_leave(booking=booking, now=now):
        return booking.state  # its workspaces are still stopping: next tick
    azure = azure_settings()
    if reservations.reservation_get(azure, group=booking.azure_name, name=RESERVATION):
        try:
            reservations.reservation_delete(azure, group=booking.azure_name, name=RESERVATION)
        except CloudError as exc:
            if exc.status != 409:
                raise
        return booking.state
    reservations.group_delete(azure, name=booking.azure_name)
    azure_usage_changed(region=booking.region)
    final = BookingState.FAILED if booking.state == BookingState.FAILED else BookingState.ENDED
    _set(booking, final, now, expected=booking.state, released_at=now)
    return final


def _failed(booking: Booking, now: datetime, code: str, message: str) -> str:
    if _set(booking, BookingState.FAILED, now, error_code=code, error_message=message):
        _tell(booking, now, f"{booking.title} could not be held: {message}")
    return BookingState.FAILED


def _what(booking: Booking) -> str:
    return f"{booking.instances} x {booking.vm_size} in {booking.region}"


def _tell(booking: Booking, now: datetime, text: str, owners: bool = False) -> None:
    """Tell its maker (and with ``owners`` its workspaces' owners, each once)."""
    users = {booking.created_by_id: booking.created_by}
    if owners:
        users |= {seat.owner_id: seat.owner for seat in booking.seats.select_related("owner")}
    notice_send(
        users=list(users.values()),
        subject=text,
        text=text,
        link=f"/teams/{booking.team.slug}/bookings/",
        now=now,
        about=f"booking:{booking.pk}",
    )


def _set(
    booking: Booking,
    to: str,
    now: datetime,
    *,
    expected: str | None = None,
    **fields: Any,
) -> bool:
    """Compare-and-set of the booking's state (from ``expected``, default its current)."""
    changed = Booking.objects.filter(pk=booking.pk, state=expected or booking.state).update(
        state=to, updated_at=now, **fields
    )
    if changed:
        booking.state = to
        for name, value in fields.items():
            setattr(booking, name, value)
    return bool(changed)
