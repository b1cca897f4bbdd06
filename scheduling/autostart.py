"""Autostart schedules and a team's quiet hours (issue 34, part 3).

A workspace with a schedule (e.g. weekdays 08:30 in its owner's zone) is started at those
times if it is stopped, so it is warm when work starts. The start goes through the fair
queue: with room, it starts at once; without (no quota, no capacity, the team's quiet hours),
it waits queued and its page says why. The owner has nothing to claim: they asked for it.
A run missed by more than AUTOSTART_LATE_MINUTES (the beat was down) is skipped.

Errors raised: ScheduleRefused (the message is shown as is), ActionNotAllowed.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from uuid import UUID

from django.contrib.auth.models import User
from django.db import transaction

from common.permissions import access_require
from scheduling.calendar import next_at, weekday_set, zone
from scheduling.models import AutostartSchedule, QueueEntry, TeamQuietHours
from scheduling.queue import queue_admit
from teams.models import Team
from workspaces import states
from workspaces.actions import NOT_YOURS
from workspaces.models import Workspace
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status

# A scheduled start more than this late (the beat was down) is skipped, not made up for.
AUTOSTART_LATE = timedelta(minutes=60)


class ScheduleRefused(WorkspaceActionError):
    """A schedule or quiet hours the portal does not take; the message says why."""


def autostart_set(
    *,
    user: User,
    workspace: Workspace,
    weekdays: str,
    at: time,
    timezone: str,
    now: datetime,
    enabled: bool = True,
) -> AutostartSchedule:
    """Set the workspace's autostart schedule (its owner, a team admin, a platform admin).
    Raises ScheduleRefused (bad weekdays or zone), ActionNotAllowed."""
    access_require(user=user, perm="workspaces.act_on_workspace", obj=workspace, message=NOT_YOURS)
    try:
        days, _zone = weekday_set(weekdays), zone(timezone)
    except ValueError as exc:
        raise ScheduleRefused(str(exc)) from None
    schedule, _ = AutostartSchedule.objects.update_or_create(
        workspace=workspace,
        defaults={
            "weekdays": ",".join(str(d) for d in sorted(days)),
            "at": at,
            "timezone": timezone,
            "enabled": enabled,
            "last_run_at": now,  # from now on: nothing earlier is made up for
            "created_at": now,
        },
    )
    return schedule


def autostart_off(*, user: User, workspace: Workspace) -> AutostartSchedule | None:
    """Turn the workspace's autostart schedule off, keeping its days and time for when it is
    turned on again (its owner, a team admin, a platform admin); None when it has none.
    Raises ActionNotAllowed."""
    access_require(user=user, perm="workspaces.act_on_workspace", obj=workspace, message=NOT_YOURS)
    AutostartSchedule.objects.filter(workspace=workspace).update(enabled=False)
    return AutostartSchedule.objects.filter(workspace=workspace).first()


def quiet_hours_set(
    *, user: User, team: Team, start: time, end: time, timezone: str, weekdays: str, now: datetime
) -> TeamQuietHours:
    """Set the team's quiet hours (its team admins, platform admins). Raises ScheduleRefused,
    ActionNotAllowed."""
    access_require(user=user, perm="scheduling.set_priority", obj=team)
    try:
        days, _zone = weekday_set(weekdays), zone(timezone)
    except ValueError as exc:
        raise ScheduleRefused(str(exc)) from None
    if start == end:
        raise ScheduleRefused("Quiet hours need a start and a different end.")
    quiet, _ = TeamQuietHours.objects.update_or_create(
        team=team,
        defaults={
            "start": start,
            "end": end,
            "timezone": timezone,
            "weekdays": ",".join(str(d) for d in sorted(days)),
            "updated_at": now,
        },
    )
    return quiet


def autostarts_run(*, now: datetime) -> list[UUID]:
    """Handle every schedule due by ``now``: a stopped workspace joins the queue (scheduled:
    nothing to claim) and starts at once when there is room. Returns the ids queued."""
    queued = []
    for schedule in AutostartSchedule.objects.filter(enabled=True).select_related("workspace"):
        due = next_at(
            at=schedule.at,
            weekdays=weekday_set(schedule.weekdays),
            tz=zone(schedule.timezone),
            after=schedule.last_run_at or schedule.created_at,
        )
        if due > now:
            continue
        # Taken by this caller alone (compare-and-set), so two beats never queue it twice.
        taken = AutostartSchedule.objects.filter(
            pk=schedule.pk, last_run_at=schedule.last_run_at
        ).update(last_run_at=now)
        if taken and now - due <= AUTOSTART_LATE and _queue(schedule, due, now):
            queued.append(schedule.workspace_id)
    return queued


def _queue(schedule: AutostartSchedule, due: datetime, now: datetime) -> bool:
    local = due.astimezone(zone(schedule.timezone))
    with transaction.atomic():
        joined = states.transition(
            workspace_id=schedule.workspace_id,
            expected=Status.STOPPED,
            to=Status.QUEUED,
            now=now,
            reason=f"Scheduled start ({local:%a %H:%M} {schedule.timezone})",
        )
        if not joined:
            return False
        QueueEntry.objects.update_or_create(
            workspace_id=schedule.workspace_id,
            defaults={"scheduled": True, "admitted_at": None, "claim_by": None},
        )
    queue_admit(workspace_id=schedule.workspace_id, now=now)
    return True
