"""Bookings: the cost shown before confirming (to the cent), the reasons one is refused, and
its life in Azure (the emulator): the capacity reservation made before the window, held,
its maker warned before the end, released at the end; one Azure cannot hold fails, is told
and cleaned up; one cancelled before its hold never reaches Azure."""

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from bookings.lifecycle import RESERVATION, bookings_advance
from bookings.models import Booking, BookingState
from bookings.services import BookingRefused, booking_cancel, booking_create, booking_quote
from cloud import azure_reservations
from tests.factories import OfferingFactory
from workspaces.azure import azure_settings

pytestmark = pytest.mark.django_db(transaction=True)
A100 = "Standard_NC24ads_A100_v4"


def _window(hours_ahead=2, hours=8):
    start = (timezone.now() + timedelta(hours=hours_ahead)).replace(microsecond=0)
    return start, start + timedelta(hours=hours)


def _book(cast, instances=2, **window):
    starts_at, ends_at = _window(**window)
    return booking_create(
        actor=cast.team_admin,
        team=cast.team,
        title="Course lab",
        offering=OfferingFactory(),
        instances=instances,
        starts_at=starts_at,
        ends_at=ends_at,
        now=timezone.now(),
    )


def _settle(booking, now, want, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        bookings_advance(now=now)
        booking.refresh_from_db()
        if booking.state in want:
            return booking
        time.sleep(0.05)
    pytest.fail(f"booking still {booking.state}")


def test_the_quote_counts_the_hold_from_before_the_window_to_the_cent(cast, sim):
    now = datetime(2026, 3, 3, 8, 0, tzinfo=UTC)
    quote = booking_quote(
        team=cast.team,
        offering=OfferingFactory(),
        instances=2,
        starts_at=now + timedelta(hours=1),
        ends_at=now + timedelta(hours=9),
        now=now,
    )
    # Held from 30 minutes before the window: 8.5 h x 2 x $3.6730.
    assert (quote.held_hours, quote.cost, quote.gpus, quote.over) == (
        Decimal("8.5000"),
        Decimal("62.44"),
        2,
        (),
    )


def test_quota_other_bookings_budget_and_the_window_refuse_it_saying_why(cast, sim):
    sim.set_quota("eastus", "standardNCADSA100v4Family", 1000)  # Azure has room for all
    _book(cast, instances=3)  # of the team's 4 A100s
    with pytest.raises(BookingRefused) as refused:
        _book(cast, instances=2)
    assert refused.value.reasons == (
        "Vision Lab may hold 4 A100 GPUs; its other bookings then hold 3, and this one asks for 2.",
    )
    assert _book(cast, instances=2, hours_ahead=20).instances == 2  # another time: room
    cast.team.monthly_budget = Decimal("10.00")
    cast.team.save(update_fields=["monthly_budget"])
    with pytest.raises(BookingRefused, match=r"It costs \$31\.22; Vision Lab has \$10\.00"):
        _book(cast, instances=1, hours_ahead=40)
    with pytest.raises(BookingRefused, match="must start in the future"):
        _book(cast, instances=1, hours_ahead=-1)
    assert Booking.objects.count() == 2


def test_azures_regional_quota_against_every_teams_bookings(cast, sim):
    sim.set_quota("eastus", "standardNCADSA100v4Family", 48)  # two A100 VMs of 24 vCPUs
    _book(cast, instances=2)
    with pytest.raises(BookingRefused, match="Azure's quota in eastus leaves 48 vCPUs"):
        _book(cast, instances=1)


def test_a_booking_is_held_before_its_window_warned_and_released_at_its_end(cast, sim):
    booking = _book(cast, instances=2)
    bookings_advance(now=booking.hold_from - timedelta(minutes=1))
    booking.refresh_from_db()
    assert booking.state == BookingState.SCHEDULED  # not yet: nothing in Azure
    assert not azure_reservations.reservation_get(
        azure_settings(), group=booking.azure_name, name=RESERVATION
    )
    _settle(booking, booking.hold_from, {BookingState.HELD})
    held = azure_reservations.reservation_get(
        azure_settings(), group=booking.azure_name, name=RESERVATION
    )
    assert (held.vm_size, held.capacity) == (A100, 2)
    assert cast.team_admin.notices.filter(text__contains="are held for you").count() == 1
    bookings_advance(now=booking.ends_at - timedelta(minutes=10))
    assert cast.team_admin.notices.filter(text__contains="ends in 15 minutes").count() == 1
    _settle(booking, booking.ends_at, {BookingState.ENDED})
    assert booking.released_at == booking.ends_at
    assert not azure_reservations.reservation_get(
        azure_settings(), group=booking.azure_name, name=RESERVATION
    )


def test_one_azure_cannot_hold_fails_is_told_and_cleaned_up_and_others_go_on(cast, sim):
    sim.set_capacity("eastus", A100, 2)
    first = _book(cast, instances=2)
    second = _book(cast, instances=1, hours_ahead=3)
    sim.inject("reservation.create", "allocation_failed")
    bookings_advance(now=first.hold_from)  # the fault meets the first
    bookings_advance(now=second.hold_from)
    _settle(first, second.hold_from, {BookingState.FAILED})
    assert first.error_code == "AllocationFailed"
    assert cast.team_admin.notices.filter(text__contains="could not be held").exists()
    _settle(second, second.hold_from, {BookingState.HELD})
    first = _settle(first, second.hold_from, {BookingState.FAILED})
    for _ in range(50):
        bookings_advance(now=second.hold_from)
        first.refresh_from_db()
        if first.released_at:
            break
        time.sleep(0.05)
    assert first.state == BookingState.FAILED and first.released_at is not None


def test_cancelled_before_its_hold_it_never_reaches_azure(cast, sim):
    booking = _book(cast)
    assert booking_cancel(actor=cast.team_admin, booking=booking, now=timezone.now())
    bookings_advance(now=booking.hold_from)
    booking.refresh_from_db()
    assert booking.state == BookingState.CANCELLED
    assert not [r for r in sim.requests() if "capacityReservation" in r["path"]]
