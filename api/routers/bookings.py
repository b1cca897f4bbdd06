"""/api/v1/teams/{team}/bookings and /api/v1/bookings/{id}/cancel: a team's bookings, a quote
(``dry_run``: the cost and every reason it may not be made, nothing booked), booking, and
cancelling, with the rules the pages use (bookings.services; docs/bookings.md)."""

from datetime import date, datetime
from typing import Any
from uuid import UUID

from django.http import Http404, HttpRequest
from django.utils import timezone
from ninja import Field, Router, Schema, Status
from pydantic import StrictInt, StrictStr, field_validator

from api.auth import require_write
from api.errors import FieldErrors
from api.schemas import Printable, caller
from bookings.models import Booking
from bookings.seats import SeatRefused, booking_seat_add
from bookings.selectors import bookable_offerings, booking_calendar, booking_visible_to
from bookings.series import (
    DAYS,
    Repeat,
    booking_series_cancel,
    booking_series_create,
    series_quote,
    zone_named,
)
from bookings.services import (
    MAX_INSTANCES,
    BookingRefused,
    booking_cancel,
    booking_cost,
    booking_create,
    booking_quote,
)
from common.permissions import access_require
from teams.models import Team
from teams.selectors import team_get, team_timezones
from workspaces.models import Workspace
from workspaces.selectors import workspace_of_team

router = Router(tags=["bookings"])


class SeatOut(Schema):
    workspace_id: UUID | None = Field(description="None until one made at the start is made")
    name: str
    owner: str
    outcome: str = Field(description="What happened at the window's start, in words")


class BookingOut(Schema):
    id: UUID
    title: str
    team: str
    vm_size: str
    region: str
    gpu_model: str
    instances: int
    gpus: int
    starts_at: datetime
    ends_at: datetime
    hold_from: datetime = Field(description="When Azure's capacity reservation is made")
    state: str
    series_id: UUID | None = Field(description="The weekly series it is a day of, if any")
    cost_usd: str = Field(description="What Azure bills for the hold, USD")
    error: str
    workspaces: list[SeatOut] = Field(
        description="Started into the reservation at the start, stopped at the end"
    )


class BookingsOut(Schema):
    items: list[BookingOut]


class SeriesOut(Schema):
    series_id: UUID
    weekdays: list[int] = Field(description="Monday 0 .. Sunday 6")
    until: date
    time_zone: str
    cost_usd: str = Field(description="What Azure bills for every day's hold, USD")
    items: list[BookingOut] = Field(description="One booking per day, soonest first")


class OccurrenceOut(Schema):
    starts_at: datetime
    ends_at: datetime
    cost_usd: str
    refused: list[str]


class QuoteOut(Schema):
    cost_usd: str = Field(description="USD; for a series, every day's together")
    held_hours: str
    hold_from: datetime
    gpus: int
    refused: list[str] = Field(description="Why it may not be booked; empty when it may")
    occurrences: list[OccurrenceOut] = Field(
        description="A series' days, each with its cost and refusals; empty for one window"
    )


class RepeatIn(Schema):
    weekdays: list[StrictInt | StrictStr] = Field(
        min_length=1, max_length=7, description="mon..sun or 0 (Monday)..6"
    )
    until: date = Field(description="The last day a window may start (local)")
    time_zone: Printable = Field(
        "", max_length=64, description="IANA zone of the wall times; default the team's"
    )

    @field_validator("weekdays")
    @classmethod
    def _days(cls, given: list[int | str]) -> list[int]:
        days = []
        for day in given:
            if isinstance(day, str) and day.strip().lower()[:3] in DAYS:
                days.append(DAYS.index(day.strip().lower()[:3]))
            elif isinstance(day, int) and 0 <= day <= 6:  # StrictInt: a JSON true is refused
                days.append(day)
            else:
                raise ValueError(f"{day!r} is no weekday: use mon..sun or 0..6.")
        return days


class BookingIn(Schema):
    title: Printable = Field(min_length=1, max_length=120)
    vm_size: Printable = Field(min_length=1, max_length=64)
    region: Printable = Field(min_length=1, max_length=32)
    instances: int = Field(ge=1, le=MAX_INSTANCES)
    starts_at: datetime = Field(description="ISO 8601 with its offset")
    ends_at: datetime = Field(description="ISO 8601 with its offset")
    dry_run: bool = Field(False, description="Only quote: the cost and the reasons, no booking")
    repeat: RepeatIn | None = Field(
        None, description="Every week on these weekdays until a date: one booking per day"
    )


def _out(booking: Booking) -> dict[str, Any]:
    return {
        "id": booking.pk,
        "title": booking.title,
        "team": booking.team.slug,
        "vm_size": booking.vm_size,
        "region": booking.region,
        "gpu_model": booking.gpu_model,
        "instances": booking.instances,
        "gpus": booking.gpus,
        "starts_at": booking.starts_at,
        "ends_at": booking.ends_at,
        "hold_from": booking.hold_from,
        "state": booking.state,
        "series_id": booking.series_id,
        "cost_usd": f"{booking_cost(booking=booking):.2f}",
        "error": booking.error_message,
        "workspaces": [
            {
                "workspace_id": seat.workspace_id,
                "name": seat.workspace.name if seat.workspace else seat.name,
                "owner": seat.owner.username,
                "outcome": seat.outcome,
            }
            for seat in booking.seats.all()  # prefetched by the calendar (bookings.selectors)
        ],
    }


def _team(request: HttpRequest, slug: str) -> Team:
    try:
        return team_get(user=request.user, slug=slug)
    except Team.DoesNotExist:
        raise Http404("No such team among yours.") from None


@router.get("/teams/{team}/bookings", response=BookingsOut, summary="A team's bookings")
def booking_list(request: HttpRequest, team: str) -> Any:
    """The team's bookings not ended more than 30 days ago, soonest first; 404 for a team the
    caller does not see."""
    found = _team(request, team)
    days = booking_calendar(now=timezone.now(), team=found)
    return {"items": [_out(b) for day in days for b in day.bookings]}


@router.post(
    "/teams/{team}/bookings",
    response={200: QuoteOut, 201: BookingOut | SeriesOut},
    summary="Book GPUs for a window, or every week (or quote it)",
)
def booking_add(request: HttpRequest, team: str, body: BookingIn) -> Any:
    """201 with the booking, or with ``repeat`` the series (one booking per day, all or
    none); with ``dry_run`` 200 with its quote and nothing booked. 400 naming the fields, or
    with every reason it is refused (quota, budget, Azure's quota, the window; for a series
    each refused day named); 403 for a caller who is not a member; 404 for a team not theirs."""
    require_write(request)
    found = _team(request, team)
    access_require(user=request.user, perm="bookings.book", obj=found)
    if body.starts_at.tzinfo is None or body.ends_at.tzinfo is None:
        raise FieldErrors([{"loc": ["body", "starts_at"], "msg": "Give the time's UTC offset."}])
    offering = bookable_offerings().filter(vm_size=body.vm_size, region=body.region).first()
    if offering is None:
        raise FieldErrors([{"loc": ["body", "vm_size"], "msg": "Not offered in that region."}])
    what: dict[str, Any] = {
        "team": found,
        "offering": offering,
        "instances": body.instances,
        "starts_at": body.starts_at,
        "ends_at": body.ends_at,
        "now": timezone.now(),
    }
    repeat = _repeat(found, body.repeat)
    if body.dry_run:
        quote = series_quote(**what, repeat=repeat) if repeat else booking_quote(**what)
        return Status(200, _quote_out(quote))
    what |= {"actor": caller(request), "title": body.title}
    try:
        if repeat is not None:
            return Status(201, _series_out(booking_series_create(**what, repeat=repeat)))
        return Status(201, _out(booking_create(**what)))
    except BookingRefused as refused:
        raise FieldErrors([{"loc": ["body"], "msg": r} for r in refused.reasons]) from None


def _repeat(team: Team, given: RepeatIn | None) -> Repeat | None:
    """The repeat asked for, its zone checked (default: the team's, teams.selectors)."""
    if given is None:
        return None
    name = given.time_zone or team_timezones(team_ids=[team.pk])[team.pk].key
    try:
        zone_named(name)
    except ValueError as exc:
        raise FieldErrors([{"loc": ["body", "repeat", "time_zone"], "msg": str(exc)}]) from None
    days = frozenset(int(d) for d in given.weekdays)  # numbers once validated (RepeatIn)
    return Repeat(days, given.until, name)


def _series_out(made: list[Booking]) -> dict[str, Any]:
    series = made[0].series
    assert series is not None  # booking_series_create links each day to its series
    return {
        "series_id": series.pk,
        "weekdays": [int(d) for d in series.weekdays.split(",")],
        "until": series.until,
        "time_zone": series.time_zone,
        "cost_usd": f"{sum(booking_cost(booking=b) for b in made):.2f}",
        "items": [_out(b) for b in made],
    }


def _quote_out(quote: Any) -> dict[str, Any]:
    """A Quote or a SeriesQuote (bookings.services, bookings.series) as QuoteOut."""
    return {
        "cost_usd": f"{quote.cost:.2f}",
        "held_hours": f"{quote.held_hours}",
        "hold_from": quote.hold_from,
        "gpus": quote.gpus,
        "refused": list(quote.over),
        "occurrences": [
            {
                "starts_at": o.starts_at,
                "ends_at": o.ends_at,
                "cost_usd": f"{o.quote.cost:.2f}",
                "refused": list(o.quote.over),
            }
            for o in getattr(quote, "occurrences", ())
        ],
    }


@router.post("/bookings/{booking_id}/cancel", response=BookingOut, summary="Cancel a booking")
def booking_cancel_api(request: HttpRequest, booking_id: UUID, series: bool = False) -> Any:
    """The booking, cancelled (or releasing what Azure holds); with ``?series=true`` every
    day of its weekly series that has not ended too. 403 unless its maker, the team's admin
    or a platform admin; 404 for another team's."""
    require_write(request)
    booking = _visible_booking(request, booking_id)
    access_require(user=request.user, perm="bookings.cancel_booking", obj=booking)
    if series:
        booking_series_cancel(actor=caller(request), booking=booking, now=timezone.now())
    else:
        booking_cancel(actor=caller(request), booking=booking, now=timezone.now())
    booking.refresh_from_db()
    return _out(booking)


class SeatIn(Schema):
    workspace: Printable = Field(
        "", max_length=64, description="An existing VM of the team: its id or name"
    )
    name: Printable = Field("", max_length=63, description="Or a VM to make at the start")
    environment: Printable = Field("", max_length=64, description="Its environment's slug")
    ssh_public_key: str = Field("", max_length=16384, description="Default: your last key")


@router.post(
    "/bookings/{booking_id}/workspaces",
    response={201: BookingOut},
    summary="Add a workspace to a booking",
)
def booking_seat_add_api(request: HttpRequest, booking_id: UUID, body: SeatIn) -> Any:
    """201 with the booking. ``workspace`` names an existing VM of the team in the booking's
    region and size (one the caller may act on); without it, ``name`` is a VM made for the
    caller at the window's start. 400 saying why it is refused (not that size, the booking's
    VMs all taken, ended); 403 for a VM not theirs; 404 for a booking or VM not visible."""
    require_write(request)
    booking = _visible_booking(request, booking_id)
    if bool(body.workspace) == bool(body.name):
        raise FieldErrors([{"loc": ["body", "workspace"], "msg": "Give workspace or name."}])
    workspace = _team_workspace(booking, body.workspace) if body.workspace else None
    try:
        booking_seat_add(
            actor=caller(request),
            booking=booking,
            workspace=workspace,
            name=body.name,
            environment=body.environment,
            ssh_public_key=body.ssh_public_key,
            now=timezone.now(),
        )
    except SeatRefused as refused:
        raise FieldErrors([{"loc": ["body"], "msg": str(refused)}]) from None
    return Status(201, _out(booking))


def _visible_booking(request: HttpRequest, booking_id: UUID) -> Booking:
    booking = booking_visible_to(user=request.user, pk=booking_id)
    if booking is None:
        raise Http404("No such booking.")
    return booking


def _team_workspace(booking: Booking, given: str) -> Workspace:
    found = workspace_of_team(team=booking.team, id_or_name=given)
    if found is None:
        raise Http404("No such workspace in the booking's team.")
    return found
