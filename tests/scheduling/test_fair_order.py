"""The fair order: teams with less recent GPU use go first, decayed with the half-life; a
team's priority scales its past use; within a team, first come first served; a platform
admin's move wins."""

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
import time_machine
from django.utils import timezone

from billing.models import UsageInterval
from scheduling.fairness import Waiting, decayed_hours, fair_order, team_decayed_gpu_hours
from teams.models import GpuQuota, Membership
from tests.factories import SSH_KEY, OfferingFactory, TeamFactory, UserFactory, WorkspaceFactory
from workspaces.actions import workspace_delete
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.states import Status

T0 = datetime(2031, 3, 4, 9, 0, tzinfo=UTC)
WEEK = timedelta(days=7)


def _w(team, minutes, gpus=1, **kw):
    return Waiting(
        uuid.uuid4(), team, "A100", Fraction(gpus), T0 + timedelta(minutes=minutes), **kw
    )


def test_a_week_old_hour_weighs_half_with_the_default_half_life():
    assert decayed_hours(T0 - timedelta(hours=1), T0, T0, WEEK) == pytest.approx(1, rel=1e-2)
    week_ago = decayed_hours(T0 - WEEK - timedelta(hours=1), T0 - WEEK, T0, WEEK)
    assert week_ago == pytest.approx(0.5, rel=1e-2)


def test_the_team_with_less_recent_use_goes_first_then_teams_take_turns():
    queue = [_w(1, 0), _w(1, 1), _w(2, 2), _w(2, 3), _w(3, 4)]
    order = fair_order(queue, usage={1: 10.0, 2: 0.0, 3: 0.5}, priority={})
    assert [w.team_id for w in order] == [2, 3, 2, 1, 1]
    # First come first served within a team.
    assert order[0].enqueued_at < order[2].enqueued_at


def test_priority_divides_past_use_by_two_per_step():
    queue = [_w(1, 0), _w(2, 1)]
    assert [w.team_id for w in fair_order(queue, usage={1: 3.0, 2: 2.0}, priority={})] == [2, 1]
    assert [w.team_id for w in fair_order(queue, usage={1: 3.0, 2: 2.0}, priority={1: 1})] == [
        1,
        2,
    ]


def test_a_pinned_entry_goes_first_and_a_held_back_one_last():
    pinned, back = _w(1, 9, pinned_at=T0), _w(2, 0, held_back=True)
    order = fair_order([_w(1, 1), back, pinned, _w(3, 2)], usage={1: 5.0}, priority={})
    assert order[0] is pinned and order[-1] is back


@pytest.mark.django_db
def test_decayed_gpu_hours_come_from_the_compute_meters(cast):
    ws = WorkspaceFactory(team=cast.team, gpu_model="A100", gpu_count=4, status=Status.DELETED)
    _interval(ws, T0 - timedelta(hours=10), T0)
    usage = team_decayed_gpu_hours(team_ids=[cast.team.pk, cast.other_team.pk], now=T0)
    assert usage[cast.team.pk] == pytest.approx(40, rel=0.03)
    assert usage[cast.other_team.pk] == 0


def _interval(ws, start, end):
    UsageInterval.objects.create(
        workspace=ws,
        team=ws.team,
        kind="vm",
        sku=ws.vm_size,
        region=ws.region,
        started_at=start,
        ended_at=end,
        price_per_hour=Decimal("3.6730"),
    )


def _team(name, past_gpu_hours):
    team = TeamFactory(name=name, slug=name.lower())
    GpuQuota.objects.create(team=team, gpu_model="A100", gpus=4)
    user = UserFactory(username=f"{name.lower()}-user")
    Membership.objects.create(team=team, user=user)
    if past_gpu_hours:
        old = WorkspaceFactory(team=team, gpu_model="A100", gpu_count=1, status=Status.DELETED)
        _interval(old, T0 - timedelta(hours=2 + past_gpu_hours), T0 - timedelta(hours=2))
    return team, user


def _ask(team, user, name):
    return workspace_request(
        user=user,
        team=team,
        name=name,
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
        queue_when_full=True,
    ).pk


@pytest.mark.django_db(transaction=True)
def test_a_day_of_three_teams_against_one_a100_is_served_in_the_fair_order(sim):
    """Azure's quota in eastus holds one A100 VM. Ada's team used 100 GPU-hours yesterday,
    Bo's 20, Cy's none; at 09:00 each asks for two. Whoever holds the A100 deletes it after
    an hour (a deallocated VM still counts against Azure's quota); the queue serves Cy's,
    then Bo's, then Ada's, not the order they asked in."""
    sim.set_quota("eastus", "standardNCADSA100v4Family", 24)
    teams = [_team("Ada", 100), _team("Bo", 20), _team("Cy", 0)]
    with time_machine.travel(T0, tick=True) as clock:  # the emulator's operations take time
        asked = [_ask(t, u, f"{t.slug}-{i}") for i in (1, 2) for t, u in teams]
        first = Workspace.objects.get(pk=asked[0])
        assert first.status == Status.RUNNING  # Ada's first had the A100 free
        assert Workspace.objects.filter(status=Status.QUEUED).count() == 5
        served = []
        running = first
        for _hour in range(5):
            clock.shift(timedelta(hours=1))
            workspace_delete(user=running.owner, workspace=running, now=timezone.now())
            running = Workspace.objects.get(status=Status.RUNNING)
            served.append(running.name)
    assert served == ["cy-1", "cy-2", "bo-1", "bo-2", "ada-2"]
    # FIFO would have been bo-1, cy-1, ada-2, bo-2, cy-2.
