"""/api/v1: autostart schedules and a team's quiet hours (docs/scarce-gpus.md). A schedule
starts a stopped workspace through the fair queue at a local time in its owner's zone; quiet
hours keep anything of the team from starting. Bad weekdays or zones are 400, a workspace or
team the caller may not see 404, may not change 403."""

from datetime import time
from typing import Any
from uuid import UUID

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.utils import timezone
from ninja import Router, Schema

from api.auth import require_write
from api.errors import FieldErrors
from scheduling.autostart import (
    ScheduleRefused,
    autostart_off,
    autostart_set,
    quiet_hours_set,
)
from scheduling.models import AutostartSchedule
from teams import selectors as team_selectors
from workspaces import selectors as workspace_selectors

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


def _refused(exc: ScheduleRefused) -> FieldErrors:
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
    return _schedule_out(schedule)


def _schedule_out(schedule: AutostartSchedule | None) -> dict[str, Any]:
    if schedule is None:
        return {"weekdays": [], "at": "", "timezone": "", "enabled": False}
    return {
        "weekdays": [int(d) for d in schedule.weekdays.split(",")],
        "at": schedule.at.strftime("%H:%M"),
        "timezone": schedule.timezone,
        "enabled": schedule.enabled,
    }


@router.delete(
    "/workspaces/{workspace_id}/autostart",
    response=AutostartOut,
    summary="Turn a workspace's autostart schedule off (its days and time are kept)",
)
def autostart_delete(request: HttpRequest, workspace_id: UUID) -> Any:
    """200 with the schedule, now off (``enabled`` false; empty fields when there was none);
    403 for a workspace the caller may not change, 404 for one they do not see."""
    require_write(request)
    visible = workspace_selectors.workspace_visible_to(user=request.user)
    workspace = get_object_or_404(visible, pk=workspace_id)
    schedule = autostart_off(user=request.user, workspace=workspace)  # type: ignore[arg-type]
    return _schedule_out(schedule)


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
