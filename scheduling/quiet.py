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
