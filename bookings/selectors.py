"""Reads of bookings: a team's calendar and the platform's (docs/bookings.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from uuid import UUID

from django.db.models import QuerySet
from django.utils import timezone

from bookings.models import Booking
from teams.models import Team
from teams.selectors import team_visible_to
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
    local day they start (the active time zone), soonest first, with their workspaces and
    weekly series. Three queries."""
    found = Booking.objects.filter(ends_at__gt=now - timedelta(days=PAST_DAYS))
    if team is not None:
        found = found.filter(team=team)
    rows = (
        found.select_related("team", "created_by", "series")
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


def booking_visible_to(*, user: Any, pk: object) -> Booking | None:
    """The booking ``pk`` with its team, if it is of a team ``user`` may see (teams.selectors.
    team_visible_to); None otherwise, and for a ``pk`` that is no booking id at all, so the
    caller answers 404 either way."""
    try:
        booking_id = UUID(str(pk))
    except ValueError:
        return None
    return (
        Booking.objects.select_related("team")
        .filter(pk=booking_id, team__in=team_visible_to(user=user))
        .first()
    )
