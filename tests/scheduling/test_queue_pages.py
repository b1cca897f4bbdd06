"""The queue as people meet it: the request form and the API queue a request, the workspace
page shows its place and an estimate, platform admins see and move the whole queue (audited),
team admins set the team's priority within the platform admin's limits."""

import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from common.permissions import ActionNotAllowed
from scheduling.models import TeamQueuePolicy
from scheduling.moves import QueueChangeRefused, team_priority_limits_set, team_priority_set
from scheduling.selectors import queue_place
from teams.models import AuditEntry, GpuQuota
from tests.factories import SSH_KEY, OfferingFactory, WorkspaceFactory
from workspaces.models import Workspace, WorkspaceEvent
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


def _full(cast):
    """The team's only A100 runs (since an hour), so new A100 requests queue."""
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=1)
    return WorkspaceFactory(
        team=cast.team,
        owner=cast.teammate,
        status=Status.RUNNING,
        gpu_model="A100",
        gpu_count=1,
        status_changed_at=timezone.now() - timedelta(hours=1),
    )


def _api_request(client, name="queued-one"):
    OfferingFactory()
    body = {
        "kind": "vm",
        "team": "vision",
        "name": name,
        "vm_size": "Standard_NC24ads_A100_v4",
        "region": "eastus",
        "ssh_public_key": SSH_KEY,
        "queue_when_full": True,
    }
    return client.post(
        "/api/v1/workspaces",
        body,
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
    )


def test_the_api_queues_a_request_and_tells_its_place(client, cast, sim):
    _full(cast)
    client.force_login(cast.researcher)
    created = _api_request(client)
    assert created.status_code == 201, created.content
    ws = client.get(created.json()["url"]).json()
    assert ws["status"] == "queued"
    place = client.get(created.json()["url"] + "/queue").json()
    assert place["queued"] and place["position"] == 1 and place["queued_total"] == 1
    assert "0 of its 1 left" in place["waiting_reason"]


def test_the_estimate_follows_the_teams_typical_run(client, cast, sim):
    running = _full(cast)
    # The team's A100 runs last 3 hours: the one running since an hour frees its GPU in 2.
    now = timezone.now()
    past = WorkspaceFactory(
        team=cast.team, owner=cast.teammate, gpu_model="A100", gpu_count=1, status=Status.DELETED
    )
    for hours_ago, was, to in ((30, "", Status.RUNNING), (27, Status.RUNNING, Status.STOPPING)):
        WorkspaceEvent.objects.create(
            workspace=past, at=now - timedelta(hours=hours_ago), from_status=was, to_status=to
        )
    client.force_login(cast.researcher)
    ws = Workspace.objects.get(pk=_api_request(client).json()["id"])
    place = queue_place(workspace=ws, now=now)
    expected = running.status_changed_at + timedelta(hours=3)
    assert abs(place.starts_by - expected) < timedelta(seconds=5)
    assert "typical run of 3.0 h" in place.basis
    page = client.get(reverse("scheduling:panel", args=[ws.pk]))
    assert b"In the queue: 1 of 1" in page.content and b"Expected to start by" in page.content


def test_without_history_there_is_no_estimate_and_it_says_so(client, cast, sim):
    _full(cast)
    client.force_login(cast.researcher)
    ws = Workspace.objects.get(pk=_api_request(client).json()["id"])
    place = queue_place(workspace=ws, now=timezone.now())
    assert place.starts_by is None and "No estimate" in place.basis


def test_a_platform_admin_moves_an_item_to_the_front_audited(client, cast, sim):
    _full(cast)
    GpuQuota.objects.filter(team=cast.other_team, gpu_model="A100").update(gpus=0)
    client.force_login(cast.researcher)
    first = _api_request(client, "first").json()["id"]
    client.force_login(cast.outsider)
    other = WorkspaceFactory(
        team=cast.other_team, owner=cast.outsider, status=Status.QUEUED, gpu_model="A100"
    )
    client.force_login(cast.platform_admin)
    assert client.get(reverse("scheduling:queue")).status_code == 200
    moved = client.post(reverse("scheduling:move", args=[other.pk, "front"]))
    assert moved.status_code == 302
    rows = client.get("/api/v1/queue").json()
    assert [r["workspace"]["id"] for r in rows] == [str(other.pk), first]
    assert rows[0]["moved"] == "front"
    audit = AuditEntry.objects.get(action="queue.moved")
    assert audit.actor == cast.platform_admin and audit.after["to"] == "front"


def test_team_admins_set_the_priority_within_the_platform_admins_limits(cast):
    now = timezone.now()
    team_priority_set(actor=cast.team_admin, team=cast.team, priority=2, now=now)
    with pytest.raises(QueueChangeRefused, match="from -2 to 2"):
        team_priority_set(actor=cast.team_admin, team=cast.team, priority=3, now=now)
    team_priority_limits_set(
        actor=cast.platform_admin, team=cast.team, lowest=0, highest=1, now=now
    )
    assert (
        TeamQueuePolicy.objects.get(team=cast.team).priority == 1
    )  # brought within the new limits
    assert AuditEntry.objects.filter(action__startswith="queue.priority").count() == 2
    with pytest.raises(ActionNotAllowed):
        team_priority_limits_set(
            actor=cast.team_admin, team=cast.team, lowest=-5, highest=5, now=now
        )
