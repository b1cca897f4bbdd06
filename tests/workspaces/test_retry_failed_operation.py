"""Retry redoes the operation that failed: a workspace that failed while deleting is deleted
again, never created again. Azure and Kubernetes through the emulator; Celery eager."""

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.clusters.test_aks_workspaces import cluster, kube, make_pool, request_mig  # noqa: F401
from tests.factories import vm_request
from workspaces.actions import workspace_delete, workspace_retry
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


def _statuses(ws):
    return [e.to_status for e in ws.events.order_by("at", "id")]


def test_retry_after_a_failed_delete_deletes_and_creates_nothing(client, cast, sim, settings):
    settings.WORKSPACE_RETRY_MAX = 1
    settings.AZURE_RETRY_TOTAL = 0
    ws = vm_request(cast, "retry-me")
    sim.inject("nic.delete", "server_error", count=2)  # every attempt the bound allows
    workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now())
    ws.refresh_from_db()
    assert ws.status == Status.FAILED and ws.error_code == "InternalExecutionError"
    assert [n["name"] for n in sim.state()["networkInterfaces"]] == [f"ws-{ws.short_id}-nic"]

    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:detail", kwargs={"pk": ws.pk})).content.decode()
    assert "Retry the delete" in page

    before = len(sim.requests())
    retry = reverse("workspaces:action", kwargs={"pk": ws.pk, "action": "retry"})
    assert client.post(retry).status_code == 302

    sent = [(r["method"], r["path"].split("?")[0]) for r in sim.requests()[before:]]
    assert not [s for s in sent if s[0] == "PUT"], sent
    assert ("DELETE", sim_path(ws, "networkInterfaces", "nic")) in sent
    ws.refresh_from_db()
    assert ws.status == Status.DELETED and ws.error_code == ""
    state = sim.state()
    assert state["virtualMachines"] == state["networkInterfaces"] == state["disks"] == []
    assert _statuses(ws)[-3:] == [Status.FAILED, Status.DELETING, Status.DELETED]


def test_retry_after_a_failed_create_still_provisions(cast, sim):
    sim.inject("vm.create", "allocation_failed")
    ws = vm_request(cast, "retry-me")
    assert ws.status == Status.FAILED
    workspace_retry(user=cast.researcher, workspace=ws, now=timezone.now())
    ws.refresh_from_db()
    assert ws.status == Status.RUNNING and len(sim.state()["virtualMachines"]) == 1


def test_retry_after_a_failed_mig_delete_deletes_the_pod_and_creates_nothing(
    cast,
    cluster,  # noqa: F811
    sim,
):
    from django.core.cache import cache

    make_pool(cast, cluster)
    ws = request_mig(cast)
    assert ws.status == Status.RUNNING
    cache.clear()  # the cluster's address is asked of Azure again, which refuses it now
    sim.inject("aks.credentials", "authorization_failed")
    workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now())
    ws.refresh_from_db()
    assert ws.status == Status.FAILED and ws.error_code == "AuthorizationFailed"

    workspace_retry(user=cast.researcher, workspace=ws, now=timezone.now())

    ws.refresh_from_db()
    assert ws.status == Status.DELETED
    assert _statuses(ws)[-3:] == [Status.FAILED, Status.DELETING, Status.DELETED]
    state = kube(sim)
    names = {o["name"] for kind in ("pods", "statefulsets", "services") for o in state[kind]}
    assert not {n for n in names if n.startswith(f"ws-{ws.short_id}")}


def sim_path(ws, collection: str, suffix: str) -> str:
    from django.conf import settings

    return (
        f"/subscriptions/{settings.AZURE_SUBSCRIPTION_ID}/resourceGroups/"
        f"{settings.AZURE_RESOURCE_GROUP}/providers/Microsoft.Network/{collection}/"
        f"ws-{ws.short_id}-{suffix}"
    )


# --- Retry of a failed create is measured as a new request (issue 28, finding 2) ----------------


def _failed_create(cast):
    """A 1-A100 request whose create Azure refused: Failed, holding nothing."""
    from teams.models import GpuQuota

    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=1)
    ws = vm_request(cast, "retry-me")
    assert ws.status == Status.FAILED and ws.failed_operation == "create"
    return ws


def _retry_api(client, user, ws):
    client.force_login(user)
    return client.post(f"/api/v1/workspaces/{ws.pk}/retry")


def test_retry_of_a_failed_create_is_refused_when_the_team_filled_its_gpu_quota(client, cast, sim):
    from workspaces.selectors import team_gpus_in_use

    sim.inject("vm.create", "allocation_failed")
    failed = _failed_create(cast)
    other = vm_request(cast, "other")  # the team's last A100 (quota 1) goes to another VM
    assert other.status == Status.RUNNING

    answer = _retry_api(client, cast.researcher, failed)

    assert answer.status_code == 409, answer.content
    assert answer["Content-Type"].startswith("application/problem+json")
    assert "has 0 of its 1 left" in answer.json()["detail"]
    failed.refresh_from_db()
    assert failed.status == Status.FAILED
    assert team_gpus_in_use(team_ids=[cast.team.pk])[cast.team.pk]["A100"] == 1
    assert len(sim.state()["virtualMachines"]) == 1


def test_retry_of_a_failed_create_is_refused_at_the_per_member_cap(cast, sim):
    sim.inject("vm.create", "allocation_failed")
    failed = _failed_create(cast)
    cast.team.max_workspaces_per_user = 1
    cast.team.save()
    from tests.factories import WorkspaceFactory

    WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.STOPPED)
    with pytest.raises(WorkspaceActionError, match="allows 1 per member"):
        workspace_retry(user=cast.researcher, workspace=failed, now=timezone.now())
    failed.refresh_from_db()
    assert failed.status == Status.FAILED


def test_retry_of_a_failed_create_is_refused_over_the_budget(cast, sim):
    from decimal import Decimal

    sim.inject("vm.create", "allocation_failed")
    failed = _failed_create(cast)
    cast.team.monthly_budget = Decimal("1.00")  # under a day of one A100 VM
    cast.team.save()
    with pytest.raises(WorkspaceActionError, match="budget runs out"):
        workspace_retry(user=cast.researcher, workspace=failed, now=timezone.now())
    failed.refresh_from_db()
    assert failed.status == Status.FAILED and not sim.state()["virtualMachines"]
