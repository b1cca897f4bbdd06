"""The queue never starts a workspace twice, nor more than the team's quota, however many
passes run at once (beat ticks, freed GPUs, several workers): run on PostgreSQL, where the
team row's lock and the compare-and-set from queued are what keep it right."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.queue import queue_admit, queue_pass
from teams.models import GpuQuota, Membership, Team
from tests.factories import OfferingFactory, UserFactory, WorkspaceFactory
from tests.races import race
from workspaces.models import Workspace, WorkspaceEvent
from workspaces.operations import workspace_reconcile
from workspaces.states import Status


def _room(sim):
    sim.set_quota("eastus", "standardNCADSA100v4Family", 10_000)
    sim.set_quota("eastus", "cores", 10_000)
    OfferingFactory()
    return [UserFactory(username=f"queuer{i}") for i in range(5)]


def _team(users, name, gpus):
    team = Team.objects.create(name=name, slug=name.lower().replace(" ", "-"))
    GpuQuota.objects.create(team=team, gpu_model="A100", gpus=gpus)
    Membership.objects.bulk_create([Membership(team=team, user=u) for u in users])
    return team


def _starts(waiting):
    """The workspaces' moves out of the queue, one id per move."""
    return list(
        WorkspaceEvent.objects.filter(workspace__in=waiting, from_status=Status.QUEUED).values_list(
            "workspace_id", flat=True
        )
    )


def _queued(team, users, n):
    return [
        WorkspaceFactory(
            team=team,
            owner=users[i % len(users)],
            status=Status.QUEUED,
            gpu_model="A100",
            gpu_count=1,
            queue_when_full=True,
        )
        for i in range(n)
    ]


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_passes_start_each_workspace_once_and_never_overshoot(sim):
    users = _room(sim)
    overshoots = twice = 0
    for trial in range(5):
        team = _team(users, f"Queue race {trial}", gpus=2)
        waiting = _queued(team, users, 6)
        race([lambda: queue_pass(now=timezone.now()) for _ in range(50)])
        left = _starts(waiting)
        twice += len(left) - len(set(left))
        overshoots += max(0, len(set(left)) - 2)
        assert Workspace.objects.filter(team=team, status=Status.QUEUED).count() == 4
    assert (twice, overshoots) == (0, 0)


@pytest.mark.django_db(transaction=True)
def test_fifty_workspaces_admitted_at_once_for_two_gpus_take_two(sim):
    users = _room(sim)
    team = _team(users, "Admit race", gpus=2)
    waiting = _queued(team, users, 50)
    race([lambda w=w: queue_admit(workspace_id=w.pk, now=timezone.now()) for w in waiting])
    assert len(_starts(waiting)) == 2


@pytest.mark.django_db(transaction=True)
def test_one_workspace_admitted_by_fifty_passes_at_once_starts_once(sim):
    users = _room(sim)
    team = _team(users, "Same race", gpus=4)
    (only,) = _queued(team, users, 1)
    results = race([lambda: queue_admit(workspace_id=only.pk, now=timezone.now())] * 50)
    assert results.count(True) == 1
    assert len(_starts([only])) == 1


@pytest.mark.django_db
def test_a_worker_lost_after_the_admission_leaves_it_to_the_reconcile_not_a_second_start(cast):
    """The admission commits, then the worker dies before its task runs (here: on_commit
    callbacks never run in this test's transaction). Another pass does not start it again;
    the reconcile sweep takes its lost chain over, once."""
    (only,) = _queued(cast.team, [cast.researcher], 1)
    now = timezone.now()
    assert queue_admit(workspace_id=only.pk, now=now)
    assert queue_pass(now=now + timedelta(seconds=1)).admitted == []
    assert Workspace.objects.get(pk=only.pk).status == Status.REQUESTED
    assert len(_starts([only])) == 1
    later = now + timedelta(minutes=30)
    assert workspace_reconcile(now=later, stale_after=timedelta(minutes=5)) == [only.pk]
    assert workspace_reconcile(now=later, stale_after=timedelta(minutes=5)) == []
