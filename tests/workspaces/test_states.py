"""The state machine: legal edges, compare-and-set, one event per change."""

import pytest
from django.utils import timezone

from tests.factories import WorkspaceFactory
from workspaces import states
from workspaces.models import Workspace, WorkspaceEvent
from workspaces.states import ACTIVE, BILLABLE, STEADY, STYLE, Status

pytestmark = pytest.mark.django_db


def test_every_status_has_a_style_and_an_entry_in_the_graph():
    assert set(STYLE) == set(Status) == set(states.TRANSITIONS)
    assert BILLABLE <= ACTIVE
    assert Status.RUNNING in STEADY and Status.PROVISIONING not in STEADY


def test_transition_moves_the_status_and_writes_one_event(cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    now = timezone.now()
    moved = states.transition(
        workspace_id=ws.pk,
        expected=Status.RUNNING,
        to=Status.STOPPING,
        now=now,
        actor=cast.researcher,
        reason="Stopped by user",
    )
    assert moved is True
    ws.refresh_from_db()
    assert ws.status == Status.STOPPING and ws.status_changed_at == now
    event = WorkspaceEvent.objects.get(workspace=ws)
    assert (event.from_status, event.to_status, event.actor, event.reason) == (
        Status.RUNNING,
        Status.STOPPING,
        cast.researcher,
        "Stopped by user",
    )


def test_a_stale_expected_status_changes_nothing(cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.STOPPED)
    moved = states.transition(
        workspace_id=ws.pk, expected=Status.RUNNING, to=Status.STOPPING, now=timezone.now()
    )
    assert moved is False
    assert Workspace.objects.get(pk=ws.pk).status == Status.STOPPED
    assert not WorkspaceEvent.objects.filter(workspace=ws).exists()


def test_only_one_of_two_racing_workers_wins(cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.PROVISIONING)
    results = [
        states.transition(
            workspace_id=ws.pk, expected=Status.PROVISIONING, to=Status.RUNNING, now=timezone.now()
        )
        for _ in range(2)
    ]
    assert results == [True, False]
    assert WorkspaceEvent.objects.filter(workspace=ws, to_status=Status.RUNNING).count() == 1


@pytest.mark.parametrize(
    "current,target",
    [
        (Status.DELETED, Status.STARTING),
        (Status.RUNNING, Status.STARTING),
        (Status.STOPPED, Status.STOPPING),
        (Status.PROVISIONING, Status.DELETING),
        (Status.DELETED, Status.REQUESTED),
    ],
)
def test_illegal_transitions_are_refused_with_a_message(cast, current, target):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=current)
    with pytest.raises(states.IllegalTransition) as excinfo:
        states.transition(workspace_id=ws.pk, expected=current, to=target, now=timezone.now())
    assert "cannot become" in str(excinfo.value)
    assert Workspace.objects.get(pk=ws.pk).status == current


def test_a_deleted_workspace_has_nowhere_to_go():
    assert states.TRANSITIONS[Status.DELETED] == frozenset()
