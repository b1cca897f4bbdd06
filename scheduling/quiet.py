"""A team's quiet hours, as the queue and the schedules read them."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from scheduling.calendar import weekday_set, within, zone
from scheduling.models import TeamQuietHours


def quiet_until(*, team_ids: Collection[int], now: datetime) -> dict[int, datetime]:
    """{team_id: when its quiet hours end} for the teams of ``team_ids`` quiet at ``now``.
    One query."""
    ends = {}
    for quiet in TeamQuietHours.objects.filter(team_id__in=team_ids):
        end = within(
            start=quiet.start,
            end=quiet.end,
            weekdays=weekday_set(quiet.weekdays),
            tz=zone(quiet.timezone),
            now=now,
        )
        if end is not None:
            ends[quiet.team_id] = end
    return ends


def quiet_start_refusal(*, team_id: int, now: datetime) -> str:
    """Why a person's Start of a workspace of team ``team_id`` is refused at ``now``: the
    team's quiet hours, with when they end in the quiet hours' own time zone; "" outside
    them. One query. (workspaces.hooks.StartHeld, provided in SchedulingConfig.ready().)"""
    quiet = TeamQuietHours.objects.filter(team_id=team_id).first()
    if quiet is None:
        return ""
    tz = zone(quiet.timezone)
    until = within(
        start=quiet.start, end=quiet.end, weekdays=weekday_set(quiet.weekdays), tz=tz, now=now
    )
    if until is None:
        return ""
    local = until.astimezone(tz)
    return (
        f"It is the team's quiet hours until {local:%a %H:%M} ({quiet.timezone}): nothing of the "
        "team starts until then. Use Start when there is room to have it start then, or ask a "
        "team admin to change the quiet hours."
    )
