"""Reads of bookings: a team's calendar and the platform's (docs/bookings.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db.models import QuerySet
from django.utils import timezone

from bookings.models import Booking
from teams.models import Team
from workspaces.models import SizeOffering

PAST_DAYS = 30  # how far back a calendar shows ended bookings
LIMIT = 500  # bookings on one calendar page


@dataclass(frozen=True)
class Day:
    """One day of a calendar, in the viewer's time zone, and the bookings starting on it."""

    day: date
    bookings: list[Booking]


def booking_calendar(*, now: datetime, team: Team | None = None) -> list[Day]:
    """The bookings not ended more than PAST_DAYS ago, of ``team`` (None: every team), by the
    local day they start (the active time zone), soonest first, with their workspaces.
    Three queries."""
    found = Booking.objects.filter(ends_at__gt=now - timedelta(days=PAST_DAYS))
    if team is not None:
        found = found.filter(team=team)
    rows = (
        found.select_related("team", "created_by")
        .prefetch_related("seats__workspace", "seats__owner")
        .order_by("starts_at", "id")[:LIMIT]
    )
    days: dict[date, list[Booking]] = {}
    for booking in rows:
        days.setdefault(timezone.localtime(booking.starts_at).date(), []).append(booking)
    return [Day(day, bookings) for day, bookings in days.items()]


def bookable_offerings() -> QuerySet[SizeOffering]:
    """The GPU sizes offered, by region then size: what a booking may hold."""
    return SizeOffering.objects.filter(offered=True, gpu_count__gt=0).order_by("region", "vm_size")


def booking_visible(*, bookings: QuerySet[Booking], teams: QuerySet[Team]) -> QuerySet[Booking]:
    """The bookings of ``teams`` (those the viewer may see)."""
    return bookings.filter(team__in=teams)
