"""Resizing a VM workspace in one click, through the services and the real Azure SDK against the
emulator (workspaces.resizes, workspaces.backends.vm_resize): deallocate, change
hardwareProfile.vmSize, start; quota and budget re-checked; Azure's refusals put it back."""

import time
import uuid
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from billing.models import Meter, UsageInterval
from cloud import azure_resize
from cloud.errors import CloudError
from common.months import month_bounds
from common.permissions import ActionNotAllowed
from teams.models import GpuQuota, Team
from tests.factories import SSH_KEY, OfferingFactory
from workspaces import resizes
from workspaces.actions import workspace_stop
from workspaces.azure import azure_settings
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.requests import WorkspaceActionError
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)

TWO_A100 = "Standard_NC48ads_A100_v4"
T4 = "Standard_NC4as_T4_v3"


@pytest.fixture
def offerings():
    OfferingFactory()
    OfferingFactory(
        vm_size=TWO_A100, gpu_count=2, vcpus=48, memory_gib=Decimal(440),
        price_per_hour=Decimal("7.3460"),
    )  # fmt: skip
    OfferingFactory(
        vm_size=T4, gpu_model="T4", gpu_count=1, gpu_memory_gib=16, vcpus=4,
        memory_gib=Decimal(28), price_per_hour=Decimal("0.5260"),
    )  # fmt: skip


def _running(cast):
    ws = workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="llm-finetune",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
    )
    ws = Workspace.objects.get(pk=ws.pk)
    assert ws.status == Status.RUNNING
    return ws


def _vm(sim, ws):
    name = f"ws-{ws.short_id}"
    return next(v for v in sim.state()["virtualMachines"] if v["name"] == name)


def _history(ws):
    return [(e.to_status, e.reason) for e in ws.events.order_by("at", "id")]


def test_running_vm_is_deallocated_resized_and_started_again(cast, sim, offerings):
    ws = _running(cast)
    resizes.workspace_resize(
        user=cast.researcher, workspace=ws, target=TWO_A100, now=timezone.now()
    )

    ws.refresh_from_db()
    assert ws.status == Status.RUNNING
    assert (ws.vm_size, ws.gpu_count, ws.price_per_hour) == (TWO_A100, 2, Decimal("7.3460"))
    assert not ws.resize_to
    vm = _vm(sim, ws)
    assert vm["vmSize"] == TWO_A100 and vm["powerState"] == "running"
    steps = [status for status, _ in _history(ws)]
    assert steps[-4:] == [Status.STOPPING, Status.RESIZING, Status.STARTING, Status.RUNNING]
    reasons = dict(_history(ws)[-4:])
    assert "Resize from Standard_NC24ads_A100_v4 to" in reasons[Status.STOPPING]
    assert f"changing its size to {TWO_A100}" in reasons[Status.RESIZING]
    assert f"Azure accepted size {TWO_A100}" in reasons[Status.STARTING]
    # Billing follows: the old size's meter closed at the deallocate, the new one bills anew.
    compute = UsageInterval.objects.filter(workspace_id=ws.pk, meter=Meter.COMPUTE)
    old, new = compute.order_by("started_at", "id")
    assert (old.sku, old.price_per_hour) == ("Standard_NC24ads_A100_v4", Decimal("3.6730"))
    assert old.ended_at is not None
    assert (new.sku, new.price_per_hour, new.ended_at) == (TWO_A100, Decimal("7.3460"), None)


def test_transient_azure_answers_are_retried_and_the_resize_completes(cast, sim, offerings):
    ws = _running(cast)
    sim.inject("vm.sizes", "throttle")
    sim.inject("vm.update", "server_error")
    resizes.workspace_resize(
        user=cast.researcher, workspace=ws, target=TWO_A100, now=timezone.now()
    )
    ws.refresh_from_db()
    assert (ws.status, ws.vm_size) == (Status.RUNNING, TWO_A100)
    assert _vm(sim, ws)["vmSize"] == TWO_A100


def test_stopped_vm_is_resized_and_stays_stopped(cast, sim, offerings):
    ws = _running(cast)
    workspace_stop(user=cast.researcher, workspace=ws, now=timezone.now())
    ws.refresh_from_db()
    resizes.workspace_resize(user=cast.team_admin, workspace=ws, target=T4, now=timezone.now())
    ws.refresh_from_db()
    assert (ws.status, ws.vm_size, ws.gpu_model) == (Status.STOPPED, T4, "T4")
    assert _vm(sim, ws)["vmSize"] == T4 and _vm(sim, ws)["powerState"] == "deallocated"


def test_resize_above_the_gpu_quota_is_refused_and_nothing_moves(cast, sim, offerings):
    ws = _running(cast)
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=1)
    events = ws.events.count()
    with pytest.raises(WorkspaceActionError, match="needs 1 A100 GPU"):
        resizes.workspace_resize(
            user=cast.researcher, workspace=ws, target=TWO_A100, now=timezone.now()
        )
    ws.refresh_from_db()
    assert (ws.status, ws.vm_size, ws.events.count()) == (Status.RUNNING, ws.vm_size, events)
    # Smaller always fits: only what grows is measured.
    resizes.workspace_resize(user=cast.researcher, workspace=ws, target=T4, now=timezone.now())
    assert Workspace.objects.get(pk=ws.pk).vm_size == T4


def test_resize_that_would_exhaust_the_budget_is_refused(cast, sim, offerings):
    ws = _running(cast)
    now = timezone.now()
    month_end = month_bounds(now)[1]
    hours_left = Decimal((month_end - now).total_seconds() / 3600)
    # Room for the running A100 to the month's end, not for twice its price.
    budget = (Decimal("3.6730") * hours_left * Decimal("1.5")).quantize(Decimal(1)) + 10
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=budget)
    with pytest.raises(WorkspaceActionError, match="budget runs out on"):
        resizes.workspace_resize(user=cast.researcher, workspace=ws, target=TWO_A100, now=now)
    assert Workspace.objects.get(pk=ws.pk).status == Status.RUNNING
    resizes.workspace_resize(user=cast.researcher, workspace=ws, target=T4, now=now)
    assert Workspace.objects.get(pk=ws.pk).vm_size == T4


def test_emulator_resizes_a_running_vm_within_its_hardware_cluster(cast, sim, offerings):
    ws = _running(cast)
    name = f"ws-{ws.short_id}"
    token = azure_resize.begin_resize(azure_settings(), name=name, vm_size=TWO_A100)
    deadline = time.monotonic() + 10
    while not (progress := azure_resize.poll_resize(azure_settings(), name=name, token=token)).done:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert (progress.state.vm_size, progress.state.power_state) == (TWO_A100, "running")


def test_size_restricted_in_the_region_is_refused_before_the_deallocate(cast, sim, offerings):
    ws = _running(cast)
    sim.restrict_sku("eastus", TWO_A100)
    resizes.workspace_resize(
        user=cast.researcher, workspace=ws, target=TWO_A100, now=timezone.now()
    )
    ws.refresh_from_db()
    assert (ws.status, ws.vm_size, ws.resize_to) == (Status.RUNNING, "Standard_NC24ads_A100_v4", "")
    status, reason = _history(ws)[-1]
    assert status == Status.RUNNING and "refused; nothing was changed" in reason
    assert "NotAvailableForSubscription" in reason
    vm = _vm(sim, ws)
    assert vm["vmSize"] == "Standard_NC24ads_A100_v4" and vm["powerState"] == "running"


def test_azure_refusing_the_update_puts_the_vm_back_running_at_its_size(cast, sim, offerings):
    ws = _running(cast)
    sim.inject("vm.update", "sku_not_available")
    resizes.workspace_resize(
        user=cast.researcher, workspace=ws, target=TWO_A100, now=timezone.now()
    )
    ws.refresh_from_db()
    assert (ws.status, ws.vm_size, ws.price_per_hour) == (
        Status.RUNNING, "Standard_NC24ads_A100_v4", Decimal("3.6730"),
    )  # fmt: skip
    put_back = next(r for s, r in _history(ws) if s == Status.STARTING and "refused" in r)
    assert "kept; starting it again at its old size: Azure refused it: SkuNotAvailable" in put_back
    vm = _vm(sim, ws)
    assert vm["vmSize"] == "Standard_NC24ads_A100_v4" and vm["powerState"] == "running"


def test_a_resize_that_exhausts_its_retries_starts_the_vm_again_at_its_size(
    cast, sim, offerings, settings
):
    # Issue 28, finding 5: 100 failed updates left a running VM stopped.
    settings.WORKSPACE_RETRY_MAX = 2
    settings.AZURE_RETRY_TOTAL = 0
    ws = _running(cast)
    sim.inject("vm.update", "server_error", count=100)
    resizes.workspace_resize(
        user=cast.researcher, workspace=ws, target=TWO_A100, now=timezone.now()
    )
    ws.refresh_from_db()
    assert (ws.status, ws.vm_size, ws.resize_to, ws.resize_target) == (
        Status.RUNNING, "Standard_NC24ads_A100_v4", "", {},
    )  # fmt: skip
    given_up = next(r for s, r in _history(ws) if s == Status.STARTING)
    assert "Azure refused the resize to Standard_NC48ads_A100_v4" in given_up
    assert "Standard_NC24ads_A100_v4 kept, starting it again" in given_up
    vm = _vm(sim, ws)
    assert vm["vmSize"] == "Standard_NC24ads_A100_v4" and vm["powerState"] == "running"


def test_azure_vcpu_quota_refusal_is_shown_and_the_vm_runs_on(cast, sim, offerings):
    ws = _running(cast)
    sim.set_quota("eastus", "standardNCADSA100v4Family", 24)  # the running VM's 24 vCPUs
    resizes.workspace_resize(
        user=cast.researcher, workspace=ws, target=TWO_A100, now=timezone.now()
    )
    ws.refresh_from_db()
    assert (ws.status, ws.vm_size) == (Status.RUNNING, "Standard_NC24ads_A100_v4")
    event = ws.events.get(from_status=Status.RESIZING)
    assert event.detail["code"] == "OperationNotAllowed"
    assert "standardNCADSA100v4Family Cores quota" in event.detail["message"]
    assert _vm(sim, ws)["powerState"] == "running"


def test_emulator_refuses_a_running_resize_outside_the_hardware_cluster(cast, sim, offerings):
    ws = _running(cast)
    name = f"ws-{ws.short_id}"
    running = azure_resize.available_sizes(azure_settings(), name=name)
    assert TWO_A100 in running and T4 not in running  # the A100 v4 cluster only
    with pytest.raises(CloudError) as refused:
        azure_resize.begin_resize(azure_settings(), name=name, vm_size=T4)
    assert refused.value.code == "OperationNotAllowed" and refused.value.status == 409
    assert "is not available in the current hardware cluster" in refused.value.message
    with pytest.raises(CloudError) as not_here:
        azure_resize.begin_resize(azure_settings(), name=name, vm_size="Standard_NC24r")
    assert not_here.value.code == "SkuNotAvailable"
    assert _vm(sim, ws)["vmSize"] == "Standard_NC24ads_A100_v4"
    workspace_stop(user=cast.researcher, workspace=ws, now=timezone.now())
    assert T4 in azure_resize.available_sizes(azure_settings(), name=name)


def test_resize_page_permissions(cast, sim, offerings, client):
    ws = _running(cast)
    url = reverse("workspaces:resize", args=[ws.pk])
    client.force_login(cast.outsider)
    assert client.get(url).status_code == 404
    assert client.post(url, {"target": T4}).status_code == 404
    client.force_login(cast.teammate)
    assert client.get(url).status_code == 403
    with pytest.raises(ActionNotAllowed):
        resizes.workspace_resize(user=cast.teammate, workspace=ws, target=T4, now=timezone.now())
    client.force_login(cast.researcher)
    page = client.get(url, HTTP_HX_REQUEST="true")
    assert page.status_code == 200 and TWO_A100 in page.content.decode()
    assert "$7.3460" in page.content.decode() and "160 GiB" in page.content.decode()
    # The GPUs column says what it holds, not the size's name again (issue 29 #26)
    assert "<td>2 × A100 GPUs</td>" in page.content.decode()
    assert f"<td>{TWO_A100} (" not in page.content.decode()
    full = client.get(url)
    assert full.status_code == 200 and "<h1>Resize llm-finetune</h1>" in full.content.decode()
    assert client.post(url, {"target": "Standard_X\x00"}).status_code == 400
    assert client.post(url, {"target": "x" * 5000}).status_code == 400
    done = client.post(url, {"target": T4}, HTTP_HX_REQUEST="true")
    assert done.status_code == 200 and done["HX-Redirect"] == reverse(
        "workspaces:detail", args=[ws.pk]
    )
    ws.refresh_from_db()
    assert ws.vm_size == T4
    assert client.post(url, {"target": TWO_A100}).status_code == 302


def test_after_a_resize_the_telemetry_panel_no_longer_lists_the_old_gpus(
    cast, sim, offerings, client
):
    from workspaces.models import WorkspaceAgent

    ws = _running(cast)
    old = {"name": "NVIDIA A100 80GB PCIe (old size)", "util": 3, "mem_used": 1, "mem_total": 81920}
    WorkspaceAgent.objects.filter(pk=ws.pk).update(gpus=[old], nvml="ok", last_at=timezone.now())
    url = reverse("workspaces:telemetry", args=[ws.pk])
    client.force_login(cast.researcher)
    assert old["name"] in client.get(url, HTTP_HX_REQUEST="true").content.decode()
    resizes.workspace_resize(
        user=cast.researcher, workspace=ws, target=TWO_A100, now=timezone.now()
    )
    page = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert old["name"] not in page
    assert "No GPU reading of its current size yet." in page


# --- quota and budget for the target, the approval path (issue 29, item 8) ----------------------


def _stopped(cast, sim):
    ws = _running(cast)
    workspace_stop(user=cast.researcher, workspace=ws, now=timezone.now())
    ws.refresh_from_db()
    assert ws.status == Status.STOPPED
    return ws


def test_a_stopped_vm_is_not_resized_to_a_size_it_could_not_start_at(cast, sim, offerings):
    ws = _stopped(cast, sim)
    GpuQuota.objects.filter(team=cast.team, gpu_model="T4").update(gpus=0)
    with pytest.raises(WorkspaceActionError, match="needs 1 T4 GPU; Vision Lab has 0 of its 0"):
        resizes.workspace_resize(user=cast.researcher, workspace=ws, target=T4, now=timezone.now())
    ws.refresh_from_db()
    assert (ws.status, ws.vm_size) == (Status.STOPPED, "Standard_NC24ads_A100_v4")
    # Within the quota a stopped VM is resized as before (2 of the team's 4 A100s).
    resizes.workspace_resize(
        user=cast.researcher, workspace=ws, target=TWO_A100, now=timezone.now()
    )


def test_the_resize_list_marks_the_sizes_over_quota(client, cast, sim, offerings):
    ws = _running(cast)
    GpuQuota.objects.filter(team=cast.team, gpu_model="T4").update(gpus=0)
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:resize", args=[ws.pk])).content.decode()
    rows = {row.split("</tr>")[0] for row in page.split("<tr")[2:]}
    over = [r for r in rows if 'data-testid="over-quota"' in r]
    assert len(over) == 1 and T4 in over[0] and "has 0 of its 0 left" in over[0]
    assert "approval" in over[0]


def test_a_resize_over_quota_waits_for_approval_and_runs_once_approved(
    client, cast, sim, offerings
):
    from notifications.models import Notice
    from teams.models import Decision, QuotaRequest
    from teams.quota_requests import quota_request_approve

    ws = _stopped(cast, sim)
    GpuQuota.objects.filter(team=cast.team, gpu_model="T4").update(gpus=0)
    client.force_login(cast.researcher)
    url = reverse("workspaces:resize", args=[ws.pk])
    reply = client.post(url, {"target": T4, "justification": "Inference demo on Friday"})
    assert reply.status_code == 302
    asked = QuotaRequest.objects.get(workspace=ws, resize_to=T4)
    assert asked.decision == Decision.PENDING and asked.requester == cast.researcher
    assert asked.summary.startswith(f"Resize {ws.name} to {T4}")
    ws.refresh_from_db()
    assert (ws.status, ws.vm_size) == (Status.STOPPED, "Standard_NC24ads_A100_v4")
    page = client.get(reverse("workspaces:detail", args=[ws.pk])).content.decode()
    assert 'data-testid="resize-waiting"' in page and "Inference demo on Friday" in page
    client.force_login(cast.platform_admin)
    assert ws.name in client.get(reverse("approvals")).content.decode()

    quota_request_approve(
        quota_request_id=asked.pk, actor=cast.platform_admin, comment="ok", now=timezone.now()
    )

    ws.refresh_from_db()
    assert (ws.status, ws.vm_size, ws.gpu_model) == (Status.STOPPED, T4, "T4")
    assert _vm(sim, ws)["vmSize"] == T4
    assert not Notice.objects.filter(about=f"workspace:{ws.pk}", resolved_at=None).exists()
    assert ws.quota_request is None  # the workspace's own request: it never needed one


def test_a_resize_request_that_expires_changes_nothing_and_resolves_its_notices(
    cast, sim, offerings
):
    from notifications.models import Notice
    from teams.models import Decision, QuotaRequest
    from teams.quota_requests import quota_requests_expire

    ws = _stopped(cast, sim)
    GpuQuota.objects.filter(team=cast.team, gpu_model="T4").update(gpus=0)
    started = resizes.workspace_resize(
        user=cast.researcher, workspace=ws, target=T4, now=timezone.now(), justification="demo"
    )
    assert started is False
    with pytest.raises(WorkspaceActionError, match="already waits for approval"):
        resizes.workspace_resize(
            user=cast.researcher, workspace=ws, target=T4, now=timezone.now(), justification="x"
        )
    asked = QuotaRequest.objects.get(workspace=ws, resize_to=T4)
    assert Notice.objects.filter(about=f"workspace:{ws.pk}", resolved_at=None).exists()

    assert quota_requests_expire(now=asked.expires_at) == 1

    ws.refresh_from_db()
    assert (ws.status, ws.vm_size) == (Status.STOPPED, "Standard_NC24ads_A100_v4")
    assert QuotaRequest.objects.get(pk=asked.pk).decision == Decision.EXPIRED
    waiting = Notice.objects.filter(
        about=f"workspace:{ws.pk}", kind__in=["awaiting_approval", "approval_asked"]
    )
    assert waiting.exists() and not waiting.filter(resolved_at=None).exists()
