"""Autostart schedules (weekdays 08:30 in the owner's zone) and a team's quiet hours: a due
schedule starts a stopped workspace through the queue, at the owner's local time across a
DST change; quiet hours are kept; a start that cannot happen waits queued and says why."""

from datetime import UTC, datetime, time

import pytest
from django.urls import reverse

from scheduling.autostart import ScheduleRefused, autostart_set, autostarts_run, quiet_hours_set
from scheduling.models import AutostartSchedule, QueueEntry, TeamQuietHours
from scheduling.queue import queue_pass
from teams.models import GpuQuota
from tests.factories import WorkspaceFactory
from workspaces import states
from workspaces.actions import workspace_start
from workspaces.models import Workspace
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status

pytestmark = pytest.mark.django_db

# Europe/Berlin leaves CET (UTC+1) for CEST (UTC+2) on Sunday 30 March 2031.
FRIDAY = datetime(2031, 3, 28, tzinfo=UTC)


def _at(day, hour, minute=0):
    return datetime(2031, 3, day, hour, minute, tzinfo=UTC)


def _stopped(cast):
    return WorkspaceFactory(
        team=cast.team, owner=cast.researcher, status=Status.STOPPED, gpu_model="A100", gpu_count=1
    )


def _stop_again(ws, now):
    states.transition(workspace_id=ws.pk, expected=Status.STARTING, to=Status.STOPPED, now=now)


def test_weekdays_at_0830_in_the_owners_zone_across_the_dst_change(cast):
    ws = _stopped(cast)
    autostart_set(
        user=cast.researcher, workspace=ws, weekdays="0,1,2,3,4", at=time(8, 30),
        timezone="Europe/Berlin", now=FRIDAY,
    )  # fmt: skip
    assert autostarts_run(now=_at(28, 7, 29)) == []  # 08:29 CET
    assert autostarts_run(now=_at(28, 7, 30)) == [ws.pk]  # 08:30 CET
    assert Workspace.objects.get(pk=ws.pk).status == Status.STARTING
    _stop_again(ws, _at(28, 18))
    assert autostarts_run(now=_at(29, 7, 30)) == []  # Saturday
    assert autostarts_run(now=_at(31, 6, 29)) == []  # Monday 08:29 CEST
    assert autostarts_run(now=_at(31, 6, 30)) == [ws.pk]  # Monday 08:30 CEST
    assert Workspace.objects.get(pk=ws.pk).status == Status.STARTING


def test_a_scheduled_start_without_room_waits_queued_and_says_why(cast):
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=0)
    ws = _stopped(cast)
    autostart_set(
        user=cast.researcher, workspace=ws, weekdays="4", at=time(8, 30),
        timezone="Europe/Berlin", now=FRIDAY,
    )  # fmt: skip
    assert autostarts_run(now=_at(28, 7, 31)) == [ws.pk]
    ws.refresh_from_db()
    assert ws.status == Status.QUEUED
    assert "0 of its 0 left" in ws.waiting_reason
    assert ws.events.last().reason.startswith("Scheduled start (Fri 08:30 Europe/Berlin)")
    # Its owner asked for it: once it runs there is nothing to claim.
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=1)
    assert queue_pass(now=_at(28, 8)).admitted == [ws.pk]
    states.transition(
        workspace_id=ws.pk, expected=Status.STARTING, to=Status.RUNNING, now=_at(28, 8, 5)
    )
    assert QueueEntry.objects.get(workspace=ws).claim_by is None


def test_quiet_hours_hold_a_scheduled_start_until_they_end(cast):
    ws = _stopped(cast)
    quiet_hours_set(
        user=cast.team_admin, team=cast.team, start=time(22), end=time(7),
        timezone="Europe/Berlin", weekdays="0,1,2,3,4,5,6", now=FRIDAY,
    )  # fmt: skip
    autostart_set(
        user=cast.researcher, workspace=ws, weekdays="4", at=time(6), timezone="Europe/Berlin",
        now=FRIDAY,
    )  # fmt: skip
    assert autostarts_run(now=_at(28, 5)) == [ws.pk]  # 06:00 CET, inside the quiet hours
    ws.refresh_from_db()
    assert ws.status == Status.QUEUED and "quiet hours" in ws.waiting_reason
    assert queue_pass(now=_at(28, 5, 59)).admitted == []  # 06:59 CET
    assert queue_pass(now=_at(28, 6)).admitted == [ws.pk]  # 07:00 CET
    assert Workspace.objects.get(pk=ws.pk).status == Status.STARTING


def test_a_run_missed_by_more_than_an_hour_is_skipped(cast):
    ws = _stopped(cast)
    autostart_set(
        user=cast.researcher, workspace=ws, weekdays="4", at=time(8, 30), timezone="UTC",
        now=FRIDAY,
    )  # fmt: skip
    assert autostarts_run(now=_at(28, 9, 31)) == []
    assert Workspace.objects.get(pk=ws.pk).status == Status.STOPPED


def test_a_bad_zone_or_weekday_is_refused_in_words(cast):
    ws = _stopped(cast)
    with pytest.raises(ScheduleRefused, match="not a time zone"):
        autostart_set(
            user=cast.researcher, workspace=ws, weekdays="0", at=time(8), timezone="Mars/Base",
            now=FRIDAY,
        )  # fmt: skip
    with pytest.raises(ScheduleRefused, match="Weekdays are 0"):
        autostart_set(
            user=cast.researcher, workspace=ws, weekdays="7", at=time(8), timezone="UTC",
            now=FRIDAY,
        )  # fmt: skip


def test_the_pages_set_a_schedule_and_quiet_hours(client, cast):
    ws = _stopped(cast)
    client.force_login(cast.researcher)
    panel = client.get(reverse("scheduling:panel", args=[ws.pk]))
    assert b"Autostart: off" in panel.content
    data = {"weekdays": ["0", "2"], "at": "08:30", "timezone": "Europe/Berlin", "enabled": "on"}
    client.post(reverse("scheduling:autostart", args=[ws.pk]), data)
    schedule = AutostartSchedule.objects.get(workspace=ws)
    assert (schedule.weekdays, schedule.at, schedule.timezone) == (
        "0,2",
        time(8, 30),
        "Europe/Berlin",
    )
    # A researcher may not set the team's quiet hours; its team admin may.
    quiet = {"start": "22:00", "end": "07:00", "timezone": "Europe/Berlin", "weekdays": ["0"]}
    client.post(reverse("scheduling:team", args=["vision"]), quiet)
    assert not TeamQuietHours.objects.exists()
    client.force_login(cast.team_admin)
    client.post(reverse("scheduling:team", args=["vision"]), quiet)
    assert TeamQuietHours.objects.get(team=cast.team).end == time(7)


def test_a_persons_start_inside_the_quiet_hours_is_refused_saying_until_when(cast):
    ws = _stopped(cast)
    quiet_hours_set(
        user=cast.team_admin, team=cast.team, start=time(22), end=time(7),
        timezone="Europe/Berlin", weekdays="0,1,2,3,4,5,6", now=FRIDAY,
    )  # fmt: skip
    for who in (cast.researcher, cast.team_admin):  # its team admin too: no way around it
        with pytest.raises(WorkspaceActionError) as refused:
            workspace_start(user=who, workspace=ws, now=_at(28, 5, 59))  # 06:59 CET
        assert f"{ws.name} was not started. It is the team's quiet hours until Fri 07:00" in (
            str(refused.value)
        )
    assert Workspace.objects.get(pk=ws.pk).status == Status.STOPPED
    workspace_start(user=cast.researcher, workspace=ws, now=_at(28, 6))  # 07:00 CET
    assert Workspace.objects.get(pk=ws.pk).status == Status.STARTING
