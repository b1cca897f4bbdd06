"""Bookings backed by Azure capacity reservations: the cost is known before confirming, the
team's quota and other bookings bound it (refused with the reason), the reservation is held
from shortly before the window so its GPUs are there even when the region fills up, the owner
is warned before the end, and at the end the reservation is released."""

import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from cloud import azure_reservations
from notifications.models import Notice
from scheduling.bookings import BookingRefused, booking_create, booking_quote, bookings_tick
from scheduling.models import Booking, BookingStatus
from teams.models import AuditEntry
from tests.factories import OfferingFactory
from workspaces.azure import azure_settings

pytestmark = pytest.mark.django_db


def _book(cast, count=2, start_in=timedelta(hours=2), hours=8, title="Course"):
    now = timezone.now()
    return booking_create(
        user=cast.researcher, team=cast.team, title=title, offering=OfferingFactory(),
        count=count, starts_at=now + start_in, ends_at=now + start_in + timedelta(hours=hours),
        now=now,
    )  # fmt: skip


def test_the_cost_is_every_hour_held_used_or_not(cast):
    now = timezone.now()
    quote = booking_quote(
        offering=OfferingFactory(), count=2, starts_at=now, ends_at=now + timedelta(hours=8)
    )
    # 8 hours plus the 30 minutes it is held before: 2 x 3.673 x 8.5.
    assert quote.total == Decimal("62.44")
    assert "used or not" in quote.words()


def test_a_booking_beyond_the_quota_beside_another_is_refused_naming_it(cast):
    booking = _book(cast, count=3)
    assert AuditEntry.objects.get(action="booking.created").object_id == str(booking.pk)
    with pytest.raises(BookingRefused, match="quota is 4 and 3 are booked in that window"):
        _book(cast, count=2, title="Deadline")
    _book(cast, count=2, start_in=timedelta(days=1), title="Tomorrow")  # no overlap: fine


def test_a_booking_over_the_budget_or_in_the_past_is_refused(cast):
    cast.team.monthly_budget = Decimal("10")
    cast.team.save()
    with pytest.raises(BookingRefused, match="more than Vision Lab's"):
        _book(cast)
    with pytest.raises(BookingRefused, match="start in the future"):
        _book(cast, start_in=-timedelta(hours=1))


def _tick_until(status, now, booking, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        bookings_tick(now=now)
        booking.refresh_from_db()
        if booking.status == status:
            return
        time.sleep(0.05)
    raise AssertionError(f"{booking.status}, not {status}: {booking.reason}")


def test_the_reservation_holds_the_gpus_through_the_window_and_is_released(cast, sim):
    booking = _book(cast, count=2, start_in=timedelta(hours=1), hours=3)
    start, end = booking.starts_at, booking.ends_at
    bookings_tick(now=start - timedelta(minutes=31))
    assert Booking.objects.get(pk=booking.pk).status == BookingStatus.BOOKED  # not yet
    _tick_until(BookingStatus.HELD, start - timedelta(minutes=30), booking)
    # The region fills up before the window: the reserved instances stay the booking's.
    sim.set_capacity("eastus", "Standard_NC24ads_A100_v4", 0)
    _tick_until(BookingStatus.ACTIVE, start, booking)
    held = azure_reservations.reservation_get(
        azure_settings(), group=booking.group_name, name=booking.group_name
    )
    assert held.succeeded and held.capacity == 2
    _tick_until(BookingStatus.ACTIVE, end - timedelta(minutes=15), booking)
    assert Notice.objects.filter(user=cast.researcher, text__contains="ends at").exists()
    _tick_until(BookingStatus.RELEASED, end, booking)
    gone = azure_reservations.reservation_get(
        azure_settings(), group=booking.group_name, name=booking.group_name
    )
    assert gone is None


def test_azure_without_room_fails_the_booking_and_tells_its_owner(cast, sim):
    sim.set_capacity("eastus", "Standard_NC24ads_A100_v4", 1)
    booking = _book(cast, count=2, start_in=timedelta(minutes=20))
    _tick_until(BookingStatus.FAILED, timezone.now(), booking)
    assert Notice.objects.filter(user=cast.researcher, text__contains="not backed").exists()


def test_the_page_and_the_api_show_the_cost_before_booking(client, cast):
    OfferingFactory()
    client.force_login(cast.researcher)
    start = timezone.now() + timedelta(days=2)
    body = {
        "team": "vision", "title": "Course", "vm_size": "Standard_NC24ads_A100_v4",
        "region": "eastus", "count": 2, "starts_at": start.isoformat(),
        "ends_at": (start + timedelta(hours=8)).isoformat(),
    }  # fmt: skip
    quote = client.post("/api/v1/bookings", body, content_type="application/json")
    assert quote.status_code == 200 and quote.json()["cost"] == "62.44"
    assert not Booking.objects.exists()
    booked = client.post(
        "/api/v1/bookings", {**body, "confirm": True}, content_type="application/json"
    )
    assert booked.status_code == 201, booked.content
    page = client.get(reverse("scheduling:bookings"))
    assert b"Course: 2" in page.content
    refused = client.post(
        "/api/v1/bookings", {**body, "count": 3, "confirm": True}, content_type="application/json"
    )
    assert refused.status_code == 400 and "booked in that window" in refused.content.decode()
