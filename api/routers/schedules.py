"""/api/v1: autostart schedules and a team's quiet hours (docs/scarce-gpus.md). A schedule
starts a stopped workspace through the fair queue at a local time in its owner's zone; quiet
hours keep anything of the team from starting. Bad weekdays or zones are 400, a workspace or
team the caller may not see 404, may not change 403."""

from datetime import datetime, time
from typing import Any
from uuid import UUID

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.utils import timezone
from ninja import Field, Router, Schema, Status

from api.auth import require_write
from api.errors import FieldErrors
from api.schemas import utc
from scheduling.autostart import ScheduleRefused, autostart_set, quiet_hours_set
from scheduling.bookings import BookingRefused, booking_create, booking_quote
from teams import selectors as team_selectors
from workspaces import selectors as workspace_selectors
from workspaces.models import SizeOffering

router = Router(tags=["schedules"])


class AutostartIn(Schema):
    weekdays: list[int] = [0, 1, 2, 3, 4]
    at: time
    timezone: str
    enabled: bool = True


class AutostartOut(Schema):
    weekdays: list[int]
    at: str
    timezone: str
    enabled: bool


class QuietHoursIn(Schema):
    start: time
    end: time
    timezone: str
    weekdays: list[int] = [0, 1, 2, 3, 4, 5, 6]


class QuietHoursOut(Schema):
    start: str
    end: str
    timezone: str
    weekdays: list[int]


def _days(days: list[int]) -> str:
    return ",".join(str(d) for d in days)


def _refused(exc: ScheduleRefused | BookingRefused) -> FieldErrors:
    return FieldErrors([{"loc": ["body"], "msg": str(exc)}])


@router.put(
    "/workspaces/{workspace_id}/autostart",
    response=AutostartOut,
    summary="Start a stopped workspace on weekdays at a local time (through the queue)",
)
def autostart_put(request: HttpRequest, workspace_id: UUID, body: AutostartIn) -> Any:
    require_write(request)
    visible = workspace_selectors.workspace_visible_to(user=request.user)
    workspace = get_object_or_404(visible, pk=workspace_id)
    try:
        schedule = autostart_set(
            user=request.user,  # type: ignore[arg-type]
            workspace=workspace,
            weekdays=_days(body.weekdays),
            at=body.at,
            timezone=body.timezone,
            enabled=body.enabled,
            now=timezone.now(),
        )
    except ScheduleRefused as exc:
        raise _refused(exc) from None
    return {
        "weekdays": [int(d) for d in schedule.weekdays.split(",")],
        "at": schedule.at.strftime("%H:%M"),
        "timezone": schedule.timezone,
        "enabled": schedule.enabled,
    }


@router.put(
    "/teams/{slug}/quiet-hours",
    response=QuietHoursOut,
    summary="Hours in which nothing of the team starts (team admins)",
)
def quiet_hours_put(request: HttpRequest, slug: str, body: QuietHoursIn) -> Any:
    require_write(request)
    team = get_object_or_404(team_selectors.team_visible_to(user=request.user), slug=slug)
    try:
        quiet = quiet_hours_set(
            user=request.user,  # type: ignore[arg-type]
            team=team,
            start=body.start,
            end=body.end,
            timezone=body.timezone,
            weekdays=_days(body.weekdays),
            now=timezone.now(),
        )
    except ScheduleRefused as exc:
        raise _refused(exc) from None
    return {
        "start": quiet.start.strftime("%H:%M"),
        "end": quiet.end.strftime("%H:%M"),
        "timezone": quiet.timezone,
        "weekdays": [int(d) for d in quiet.weekdays.split(",")],
    }


class BookingIn(Schema):
    team: str
    title: str = Field(min_length=1, max_length=100)
    vm_size: str = Field(max_length=64)
    region: str = Field(max_length=32)
    count: int = Field(ge=1, le=100)
    starts_at: datetime
    ends_at: datetime
    confirm: bool = False


class BookingOut(Schema):
    id: int | None
    team: str
    title: str
    vm_size: str
    region: str
    count: int
    starts_at: str | None
    ends_at: str | None
    status: str
    cost: str
    cost_words: str


@router.post(
    "/bookings",
    response={200: BookingOut, 201: BookingOut},
    summary="Quote a booking, or book it with confirm: true (capacity reservation)",
)
def booking_post(request: HttpRequest, body: BookingIn) -> Any:
    require_write(request)
    team = get_object_or_404(team_selectors.team_visible_to(user=request.user), slug=body.team)
    offering = SizeOffering.objects.filter(
        vm_size=body.vm_size, region=body.region, offered=True
    ).first()
    if offering is None:
        raise FieldErrors([{"loc": ["body", "vm_size"], "msg": "That size is not offered there."}])
    quote = booking_quote(
        offering=offering, count=body.count, starts_at=body.starts_at, ends_at=body.ends_at
    )
    out = {
        "id": None, "team": team.slug, "title": body.title, "vm_size": offering.vm_size,
        "region": offering.region, "count": body.count, "starts_at": utc(body.starts_at),
        "ends_at": utc(body.ends_at), "status": "quote", "cost": str(quote.total),
        "cost_words": quote.words(),
    }  # fmt: skip
    if not body.confirm:
        return Status(200, out)
    try:
        booking = booking_create(
            user=request.user,  # type: ignore[arg-type]
            team=team, title=body.title, offering=offering, count=body.count,
            starts_at=body.starts_at, ends_at=body.ends_at, now=timezone.now(),
        )  # fmt: skip
    except BookingRefused as exc:
        raise _refused(exc) from None
    return Status(201, {**out, "id": booking.pk, "status": booking.status})
