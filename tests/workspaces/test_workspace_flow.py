"""A VM workspace's life through the services and tasks, with the real Azure SDK talking to the
emulator. Celery runs eagerly; Azure is the only thing faked."""

import uuid

import pytest
from django.conf import settings
from django.utils import timezone

from common.permissions import ActionNotAllowed
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.actions import workspace_delete, workspace_retry, workspace_start, workspace_stop
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.operations import workspace_reconcile
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


def _request(cast, **kwargs):
    return workspace_request(
        user=kwargs.get("user", cast.researcher),
        team=cast.team,
        name="llm-finetune",
        offering=kwargs.get("offering") or OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=kwargs.get("request_key") or uuid.uuid4(),
        now=timezone.now(),
    )


def _vm(sim, workspace):
    name = f"ws-{workspace.id.hex[:12]}"
    return next((v for v in sim.state()["virtualMachines"] if v["name"] == name), None)


def _statuses(workspace):
    return [e.to_status for e in workspace.events.order_by("at", "id")]


def test_request_provisions_a_tagged_vm_without_public_ip(cast, sim):
    ws = Workspace.objects.get(pk=_request(cast).pk)
    assert ws.status == Status.RUNNING
    assert ws.private_ip and ws.ssh_command == f"ssh researcher@{ws.private_ip}"
    assert _statuses(ws) == [Status.REQUESTED, Status.PROVISIONING, Status.RUNNING]
    vm = _vm(sim, ws)
    assert vm["vmSize"] == "Standard_NC24ads_A100_v4" and vm["location"] == "eastus"
    assert vm["tags"] == {
        "portal": "gpu-workspace-portal",
        "team": "vision",
        "workspace": str(ws.pk),
        "owner": "alice",
    }
    nic = sim.state()["networkInterfaces"][0]
    assert nic["name"] == f"ws-{ws.short_id}-nic" and nic["tags"]["workspace"] == str(ws.pk)
    assert nic["privateIPAddress"] == ws.private_ip
    assert "publicIPAddress" not in str(nic)
    assert not ws.operation_token


def test_stop_deallocates_keeps_the_disk_then_start_and_delete(cast, sim):
    ws = _request(cast)
    workspace_stop(user=cast.researcher, workspace=_reload(ws), now=timezone.now())
    assert _reload(ws).status == Status.STOPPED
    assert _vm(sim, ws)["powerState"] == "deallocated"
    assert [d["name"] for d in sim.state()["disks"]] == [f"ws-{ws.short_id}-osdisk"]

    workspace_start(user=cast.researcher, workspace=_reload(ws), now=timezone.now())
    assert _reload(ws).status == Status.RUNNING
    assert _vm(sim, ws)["powerState"] == "running"

    workspace_delete(user=cast.team_admin, workspace=_reload(ws), now=timezone.now())
    assert _reload(ws).status == Status.DELETED
    state = sim.state()
    assert state["virtualMachines"] == state["networkInterfaces"] == state["disks"] == []
    deleted = _reload(ws).events.get(to_status=Status.DELETED)
    assert deleted.from_status == Status.DELETING


@pytest.mark.parametrize(
    "kind,code",
    [
        ("allocation_failed", "AllocationFailed"),
        ("zonal_allocation_failed", "ZonalAllocationFailed"),
        ("sku_not_available", "SkuNotAvailable"),
        ("quota", "OperationNotAllowed"),
    ],
)
def test_azure_refusal_fails_with_its_code_and_leaves_nothing(cast, sim, kind, code):
    sim.inject("vm.create", kind)
    ws = _reload(_request(cast))
    assert ws.status == Status.FAILED
    assert ws.error_code == code and ws.error_message
    state = sim.state()
    assert state["virtualMachines"] == state["networkInterfaces"] == state["disks"] == []
    failed = ws.events.get(to_status=Status.FAILED)
    assert failed.detail["code"] == code and failed.detail["message"] == ws.error_message


def test_quota_failure_shows_azures_message(cast, sim):
    # Quota taken by someone else between the pre-check and the VM PUT
    # (tests/workspaces/test_precheck.py covers quota missing before it): Azure's refusal is
    # shown as Azure words it.
    sim.inject("vm.create", "quota")
    ws = _reload(_request(cast))
    assert ws.error_code == "OperationNotAllowed"
    assert "standardNCADSA100v4Family" in ws.error_message
    assert "Current Limit: 96" in ws.error_message


def test_retry_after_a_failure_provisions(cast, sim):
    sim.inject("vm.create", "allocation_failed")
    ws = _request(cast)
    workspace_retry(user=cast.researcher, workspace=_reload(ws), now=timezone.now())
    ws = _reload(ws)
    assert ws.status == Status.RUNNING and ws.error_code == ""
    assert len(sim.state()["virtualMachines"]) == 1


@pytest.mark.parametrize("kind", ["throttle", "conflict", "server_error", "unavailable"])
def test_transient_errors_beyond_the_sdk_retries_are_retried_by_the_task(cast, sim, kind):
    sim.inject("vm.create", kind, count=4, retry_after=0)
    ws = _reload(_request(cast))
    assert ws.status == Status.RUNNING
    puts = [r for r in sim.requests() if r["method"] == "PUT" and "virtualMachines" in r["path"]]
    assert len(puts) == 5  # four refused, one accepted


def test_a_transient_error_that_never_ends_fails_with_azures_code(cast, sim, settings):
    settings.WORKSPACE_RETRY_MAX = 2
    sim.inject("vm.create", "throttle", count=50, retry_after=0)
    ws = _reload(_request(cast))
    assert ws.status == Status.FAILED
    assert ws.error_code == "TooManyRequests"
    assert sim.state()["networkInterfaces"] == []


def test_a_second_delivery_of_the_task_changes_nothing(cast, sim):
    from workspaces.tasks import advance_workspace

    ws = _request(cast)
    before = len(sim.requests())
    advance_workspace.apply(args=[str(ws.pk)])
    assert len(sim.requests()) == before
    assert _statuses(_reload(ws)).count(Status.RUNNING) == 1


def test_failed_start_leaves_the_vm_stopped_or_queued_for_room_with_the_reason(cast, sim):
    ws = _request(cast)
    workspace_stop(user=cast.researcher, workspace=_reload(ws), now=timezone.now())
    sim.inject("vm.start", "authorization_failed")
    workspace_start(user=cast.researcher, workspace=_reload(ws), now=timezone.now())
    ws = _reload(ws)
    assert ws.status == Status.STOPPED and ws.error_code == "AuthorizationFailed"
    # No room in Azure: it waits in the fair queue instead (tests/scheduling/test_queue.py).
    sim.inject("vm.start", "allocation_failed")
    workspace_start(user=cast.researcher, workspace=_reload(ws), now=timezone.now())
    ws = _reload(ws)
    assert ws.status == Status.QUEUED and ws.error_code == "AllocationFailed"


def test_double_submit_of_one_form_makes_one_workspace(cast, sim):
    key = uuid.uuid4()
    first, second = _request(cast, request_key=key), _request(cast, request_key=key)
    assert first.pk == second.pk
    assert Workspace.objects.count() == 1
    assert len(sim.state()["virtualMachines"]) == 1


def test_starting_a_deleted_workspace_is_refused(cast, sim):
    ws = _request(cast)
    workspace_delete(user=cast.researcher, workspace=_reload(ws), now=timezone.now())
    with pytest.raises(WorkspaceActionError, match="deleted cannot become starting"):
        workspace_start(user=cast.researcher, workspace=_reload(ws), now=timezone.now())


def test_a_teammate_cannot_stop_someone_elses_workspace(cast, sim):
    ws = _request(cast)
    with pytest.raises(ActionNotAllowed):
        workspace_stop(user=cast.teammate, workspace=_reload(ws), now=timezone.now())
    assert _reload(ws).status == Status.RUNNING


def test_reconcile_requeues_a_workspace_whose_task_was_lost(cast, sim):
    from datetime import timedelta

    from tests.factories import WorkspaceFactory

    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.REQUESTED)
    later = timezone.now() + timedelta(minutes=5)
    assert workspace_reconcile(now=later, stale_after=timedelta(minutes=2)) == [ws.pk]
    assert _reload(ws).status == Status.RUNNING


def _reload(ws):
    return Workspace.objects.get(pk=ws.pk)


def test_history_records_each_step_when_it_happened(cast, sim):
    from datetime import timedelta

    sim.set_latency(0.3)
    ws = _reload(_request(cast))
    provisioning = ws.events.get(to_status=Status.PROVISIONING)
    running = ws.events.get(to_status=Status.RUNNING)
    assert running.at - provisioning.at >= timedelta(seconds=0.3)


def test_the_vm_gets_the_users_ssh_key_and_the_agent_with_a_token_stored_hashed(cast, sim):
    import base64
    import hashlib

    from agent.cloud_init import agent_config
    from workspaces.models import WorkspaceAgent

    ws = _request(cast)
    vm = _vm(sim, ws)
    assert vm["adminUsername"] == "researcher"
    assert vm["sshPublicKeys"] == [SSH_KEY]
    cloud_init = base64.b64decode(vm["customData"]).decode()
    assert cloud_init.startswith("#cloud-config\n")
    agent = agent_config(cloud_init)
    assert agent["workspace"] == str(ws.pk)
    assert agent["portal_url"] == settings.PORTAL_URL
    stored = WorkspaceAgent.objects.get(pk=ws.pk).token_sha256
    assert stored == hashlib.sha256(agent["token"].encode()).hexdigest()
    assert agent["token"] not in stored
