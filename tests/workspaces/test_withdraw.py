"""A request waiting for approval can be withdrawn by its owner or a team admin, from the page,
the API and the CLI, audited; it then stops counting toward the per-member cap (issue 29,
item 7). Before, the page had no button, and the API and `gpuportal rm` answered 409."""

import uuid

import pytest
from django.urls import reverse
from django.utils import timezone

from teams.models import AuditEntry, Decision, GpuQuota
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.requests import JustificationNeeded, workspace_close_unapproved
from workspaces.states import Status
from workspaces.withdrawals import workspace_withdraw

pytestmark = pytest.mark.django_db


def _ask(cast, justification="Paper deadline", name=None):
    return workspace_request(
        user=cast.researcher,
        team=cast.team,
        name=name or f"big-{uuid.uuid4().hex[:6]}",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        justification=justification,
        now=timezone.now(),
    )


@pytest.fixture
def pending(cast):
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=0)
    ws = _ask(cast)
    assert ws.status == Status.PENDING_APPROVAL
    return ws


def _withdrawn(ws):
    ws.refresh_from_db()
    event = ws.events.order_by("at", "id").last()
    return (ws.status, event.detail.get("outcome"), ws.quota_request.decision)


def test_the_owner_withdraws_from_the_page_and_it_is_audited(client, cast, pending):
    client.force_login(cast.researcher)
    detail = reverse("workspaces:detail", args=[pending.pk])
    assert 'data-testid="withdraw"' in client.get(detail).content.decode()

    client.post(reverse("workspaces:action", kwargs={"pk": pending.pk, "action": "withdraw"}))

    assert _withdrawn(pending) == (Status.DELETED, "withdrawn", Decision.WITHDRAWN)
    audit = AuditEntry.objects.get(action="quota_request.withdrawn")
    assert audit.actor == cast.researcher and audit.team == cast.team
    page = client.get(detail).content.decode()
    assert "Withdrawn" in page and 'data-testid="withdraw"' not in page


def test_a_withdrawn_request_no_longer_counts_toward_the_per_member_cap(cast, pending):
    cast.team.max_workspaces_per_user = 1
    cast.team.save()
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=4)
    with pytest.raises(JustificationNeeded, match="allows 1 per member"):
        _ask(cast, justification="")
    workspace_withdraw(user=cast.researcher, workspace=pending, now=timezone.now())
    assert _ask(cast, justification="").status != Status.PENDING_APPROVAL


def test_a_team_admin_withdraws_through_the_api(client, cast, pending):
    client.force_login(cast.team_admin)
    answer = client.post(f"/api/v1/workspaces/{pending.pk}/withdraw")
    assert answer.status_code == 202 and answer.json()["status"] == "deleted"
    assert _withdrawn(pending) == (Status.DELETED, "withdrawn", Decision.WITHDRAWN)


def test_delete_of_a_pending_request_withdraws_it(client, cast, pending):
    client.force_login(cast.researcher)
    answer = client.delete(f"/api/v1/workspaces/{pending.pk}")
    assert answer.status_code == 202, answer.content
    assert _withdrawn(pending) == (Status.DELETED, "withdrawn", Decision.WITHDRAWN)


def test_others_may_not_withdraw(client, cast, pending):
    client.force_login(cast.teammate)  # a member, neither owner nor team admin
    assert client.post(f"/api/v1/workspaces/{pending.pk}/withdraw").status_code == 403
    client.force_login(cast.outsider)
    assert client.post(f"/api/v1/workspaces/{pending.pk}/withdraw").status_code == 404
    assert Workspace.objects.get(pk=pending.pk).status == Status.PENDING_APPROVAL


def test_a_decided_request_cannot_be_withdrawn(client, cast, pending):
    workspace_close_unapproved(
        workspace_id=pending.pk, actor=cast.platform_admin, reason="no", now=timezone.now()
    )
    client.force_login(cast.researcher)
    answer = client.post(f"/api/v1/workspaces/{pending.pk}/withdraw")
    assert answer.status_code == 409
    assert "waiting for approval" in answer.json()["detail"]
