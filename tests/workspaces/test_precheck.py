"""The Azure-side pre-check before provisioning: regional vCPU quota by family and SKU
restrictions, read from the emulator through the real SDK. A workspace Azure cannot take yet
waits as requested with a plain reason, no VM PUT is sent, and the task checks again later;
where the platform admin allows it, the workspace moves to the next offered region instead."""

import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from billing.models import Price
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.actions import workspace_delete
from workspaces.azure import azure_headroom
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.states import Status
from workspaces.tasks import advance_workspace

pytestmark = pytest.mark.django_db(transaction=True)

A100 = "Standard_NC24ads_A100_v4"  # 24 vCPUs
A100_FAMILY = "standardNCADSA100v4Family"
SPOT_QUOTA = "lowPriorityCores"  # One regional quota for Spot VMs of every family.
LONG_AGO = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _recheck_at_once(settings):
    settings.AZURE_PRECHECK_RETRY_SECONDS = 0


def _request(cast, *, user=None, offering=None, spot=False):
    return workspace_request(
        user=user or cast.researcher,
        team=cast.team,
        name=f"llm-finetune-{uuid.uuid4().hex[:6]}",  # unique per team
        offering=offering or OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
        spot=spot,
    )


def _spot_price(region="eastus", unit_price=Decimal("0.7346")):
    Price.objects.create(
        kind="vm",
        sku=A100,
        region=region,
        spot=True,
        unit_price=unit_price,
        unit="1 Hour",
        effective_start=LONG_AGO,
        source="api",
        synced_at=LONG_AGO,
    )


def _reload(ws):
    return Workspace.objects.get(pk=ws.pk)


def _vm_puts(sim):
    return [r for r in sim.requests() if r["method"] == "PUT" and "virtualMachines" in r["path"]]


def _arm_puts(sim):
    return [r for r in sim.requests() if r["method"] == "PUT"]


def test_without_quota_the_workspace_waits_with_a_plain_reason_and_no_put(cast, sim):
    sim.set_quota("eastus", A100_FAMILY, 0)
    ws = _reload(_request(cast))
    assert ws.status == Status.REQUESTED
    assert ws.waiting_reason.startswith(
        f"Azure quota for {A100_FAMILY} in eastus is 0/0 vCPUs; this size needs 24 more."
    )
    assert "a platform admin can raise the subscription's quota" in ws.waiting_reason
    assert _arm_puts(sim) == []  # neither the NIC nor the VM
    assert ws.error_code == "" and [e.to_status for e in ws.events.all()] == [Status.REQUESTED]


def test_a_full_family_reads_used_over_limit(cast, sim):
    sim.set_quota("eastus", A100_FAMILY, 24)
    first = _reload(_request(cast))
    assert first.status == Status.RUNNING
    ws = _reload(_request(cast, user=cast.teammate))
    assert ws.status == Status.REQUESTED
    assert f"Azure quota for {A100_FAMILY} in eastus is 24/24 vCPUs" in ws.waiting_reason
    assert len(_vm_puts(sim)) == 1


def test_the_regional_core_quota_counts_too(cast, sim):
    sim.set_quota("eastus", "cores", 10)
    ws = _reload(_request(cast))
    assert ws.status == Status.REQUESTED
    assert "Azure quota for Total Regional vCPUs in eastus is 0/10 vCPUs" in ws.waiting_reason
    assert _arm_puts(sim) == []


def test_a_spot_request_waits_on_the_spot_quota_while_a_regular_one_fits(cast, sim):
    _spot_price()
    sim.set_quota("eastus", SPOT_QUOTA, 0)

    spot = _reload(_request(cast, spot=True))
    regular = _reload(_request(cast, user=cast.teammate))

    assert spot.status == Status.REQUESTED
    assert spot.waiting_reason.startswith(
        "Azure quota for Total Regional Low-priority vCPUs (Spot) in eastus is 0/0 vCPUs; "
        "this size needs 24 more."
    )
    assert regular.status == Status.RUNNING
    [vm] = sim.state()["virtualMachines"]
    assert vm["priority"] == "Regular"


def test_a_full_family_and_region_hold_back_a_regular_request_but_not_a_spot_one(cast, sim):
    _spot_price()
    sim.set_quota("eastus", A100_FAMILY, 0)
    sim.set_quota("eastus", "cores", 0)

    regular = _reload(_request(cast))
    spot = _reload(_request(cast, user=cast.teammate, spot=True))

    assert regular.status == Status.REQUESTED
    assert f"Azure quota for {A100_FAMILY} in eastus is 0/0 vCPUs" in regular.waiting_reason
    assert spot.status == Status.RUNNING and spot.waiting_reason == ""
    [vm] = sim.state()["virtualMachines"]
    assert vm["priority"] == "Spot"


def test_spot_vms_in_use_fill_the_spot_quota_for_the_next_spot_request(cast, sim):
    _spot_price()
    sim.set_quota("eastus", SPOT_QUOTA, 24)
    first = _reload(_request(cast, spot=True))
    second = _reload(_request(cast, user=cast.teammate, spot=True))
    assert first.status == Status.RUNNING
    assert second.status == Status.REQUESTED
    assert "Low-priority vCPUs (Spot) in eastus is 24/24 vCPUs" in second.waiting_reason


def test_a_spot_request_falls_back_to_a_region_with_spot_quota(cast, sim):
    here = OfferingFactory(allow_region_fallback=True)
    OfferingFactory(region="westus", price_per_hour=Decimal("4.7750"))
    _spot_price()
    _spot_price("westus", Decimal("0.9550"))
    sim.set_quota("eastus", SPOT_QUOTA, 0)

    ws = _reload(_request(cast, offering=here, spot=True))

    assert (ws.status, ws.region) == (Status.RUNNING, "westus")
    moved = ws.events.get(to_status=Status.PROVISIONING)
    assert moved.reason.startswith(
        "Moved from eastus to westus: Azure quota for Total Regional Low-priority vCPUs (Spot) "
        "in eastus is 0/0 vCPUs"
    )


def test_once_quota_is_raised_the_next_check_provisions(cast, sim):
    sim.set_quota("eastus", A100_FAMILY, 0)
    ws = _request(cast)
    advance_workspace.apply(args=[str(ws.pk)])  # still no quota: waits again, does not spin
    assert _reload(ws).status == Status.REQUESTED and _arm_puts(sim) == []

    sim.set_quota("eastus", A100_FAMILY, 48)
    advance_workspace.apply(args=[str(ws.pk)])
    ws = _reload(ws)
    assert ws.status == Status.RUNNING and ws.waiting_reason == ""
    assert len(_vm_puts(sim)) == 1
    steps = [e.to_status for e in ws.events.order_by("at", "id")]
    assert steps == [Status.REQUESTED, Status.PROVISIONING, Status.RUNNING]


def test_a_restricted_size_waits_with_azures_reason(cast, sim):
    sim.restrict_sku("eastus", A100)
    ws = _reload(_request(cast))
    assert ws.status == Status.REQUESTED
    assert ws.waiting_reason.startswith(
        f"{A100} is not available to this subscription in eastus (NotAvailableForSubscription)."
    )
    assert _arm_puts(sim) == []

    sim.restrict_sku("eastus", A100, restricted=False)
    advance_workspace.apply(args=[str(ws.pk)])
    assert _reload(ws).status == Status.RUNNING


def test_with_fallback_allowed_it_moves_to_the_next_region_and_says_so(cast, sim):
    here = OfferingFactory(allow_region_fallback=True)
    OfferingFactory(region="westus", price_per_hour=Decimal("4.7750"))
    OfferingFactory(region="westus3", price_per_hour=Decimal("3.6730"))
    OfferingFactory(region="eastus2", price_per_hour=Decimal("3.6730"))
    OfferingFactory(region="centralus", price_per_hour=Decimal("3.0000"), offered=False)
    sim.set_quota("eastus", A100_FAMILY, 0)
    sim.restrict_sku("eastus2", A100)

    ws = _reload(_request(cast, offering=here))

    assert ws.status == Status.RUNNING and ws.waiting_reason == ""
    # Cheapest first, then by name: centralus is not offered, eastus2 is restricted.
    assert ws.region == "westus3" and ws.price_per_hour == Decimal("3.6730")
    [vm] = sim.state()["virtualMachines"]
    assert vm["location"] == "westus3"
    moved = ws.events.get(to_status=Status.PROVISIONING)
    assert moved.reason.startswith(
        f"Moved from eastus to westus3: Azure quota for {A100_FAMILY} in eastus is 0/0 vCPUs"
    )
    assert moved.detail == {"from_region": "eastus", "to_region": "westus3"}


def test_fallback_to_a_dearer_region_takes_its_price(cast, sim):
    here = OfferingFactory(allow_region_fallback=True)
    OfferingFactory(region="westus", price_per_hour=Decimal("4.7750"))
    sim.set_quota("eastus", A100_FAMILY, 0)
    ws = _reload(_request(cast, offering=here))
    assert (ws.status, ws.region, ws.price_per_hour) == (
        Status.RUNNING,
        "westus",
        Decimal("4.7750"),
    )


def test_without_fallback_allowed_it_waits_in_its_region(cast, sim):
    OfferingFactory(region="westus3")
    sim.set_quota("eastus", A100_FAMILY, 0)
    ws = _reload(_request(cast))
    assert ws.status == Status.REQUESTED and ws.region == "eastus"
    assert _arm_puts(sim) == []


def test_when_no_allowed_region_has_room_it_waits_and_names_them(cast, sim):
    here = OfferingFactory(allow_region_fallback=True)
    OfferingFactory(region="westus3")
    sim.set_quota("eastus", A100_FAMILY, 0)
    sim.set_quota("westus3", A100_FAMILY, 0)
    ws = _reload(_request(cast, offering=here))
    assert ws.status == Status.REQUESTED and ws.region == "eastus"
    assert "eastus is 0/0 vCPUs" in ws.waiting_reason
    assert "The other allowed regions (westus3) have no room either." in ws.waiting_reason
    assert _arm_puts(sim) == []


def test_a_waiting_workspace_is_not_checked_again_before_its_time(cast, sim, settings):
    settings.AZURE_PRECHECK_RETRY_SECONDS = 300
    sim.set_quota("eastus", A100_FAMILY, 0)
    ws = _request(cast)
    checks = len(sim.requests())
    sim.set_quota("eastus", A100_FAMILY, 48)
    # A task re-queued by the reconcile sweep meanwhile: the waiting task's countdown owns it.
    advance_workspace.apply(args=[str(ws.pk)])
    assert len(sim.requests()) == checks
    assert _reload(ws).status == Status.REQUESTED


def test_a_waiting_task_requeues_itself_with_the_retry_countdown(cast, sim, settings):
    from unittest import mock

    from tests.factories import WorkspaceFactory

    settings.AZURE_PRECHECK_RETRY_SECONDS = 120
    sim.set_quota("eastus", A100_FAMILY, 0)
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.REQUESTED)
    with mock.patch.object(advance_workspace, "apply_async") as sent:
        advance_workspace(str(ws.pk))  # called as a worker calls it: not eager
    sent.assert_called_once_with(args=[str(ws.pk)], kwargs={"claim": mock.ANY}, countdown=120)
    assert _reload(ws).waiting_reason


def test_a_transient_error_in_the_precheck_is_retried_by_the_task(cast, sim):
    sim.inject("usage.list", "throttle", count=4)  # beyond the SDK's own retries
    sim.inject("sku.list", "server_error", count=4)
    ws = _reload(_request(cast))
    assert ws.status == Status.RUNNING


def test_a_precheck_throttled_beyond_the_retries_fails_with_azures_code(cast, sim, settings):
    settings.WORKSPACE_RETRY_MAX = 1
    sim.inject("sku.list", "throttle", count=50)
    ws = _reload(_request(cast))
    assert ws.status == Status.FAILED and ws.error_code == "TooManyRequests"
    assert _arm_puts(sim) == []


def test_a_precheck_azure_refuses_fails_clearly_and_creates_nothing(cast, sim):
    sim.inject("usage.list", "authorization_failed")
    ws = _reload(_request(cast))
    assert ws.status == Status.FAILED and ws.error_code == "AuthorizationFailed"
    assert "Microsoft.Compute/locations/usages/read" in ws.error_message
    failed = ws.events.get(to_status=Status.FAILED)
    assert failed.reason == "Azure refused the quota and size check: AuthorizationFailed"
    assert failed.detail["code"] == "AuthorizationFailed"
    assert _arm_puts(sim) == [] and ws.can_retry


def test_a_waiting_workspace_can_be_deleted(cast, sim):
    sim.set_quota("eastus", A100_FAMILY, 0)
    ws = _request(cast)
    workspace_delete(user=cast.researcher, workspace=_reload(ws), now=timezone.now())
    assert _reload(ws).status == Status.DELETED
    assert _vm_puts(sim) == []


def test_the_status_panel_shows_why_it_waits(client, cast, sim):
    sim.set_quota("eastus", A100_FAMILY, 0)
    ws = _request(cast)
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:detail", kwargs={"pk": ws.pk})).content.decode()
    assert "Waiting for Azure" in page
    assert f"Azure quota for {A100_FAMILY} in eastus is 0/0 vCPUs" in page


def _pending(cast, *, spot=False):
    from teams.models import GpuQuota

    GpuQuota.objects.filter(team=cast.team).update(gpus=0)
    ws = workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="big",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        justification="Deadline",
        now=timezone.now(),
        spot=spot,
    )
    return ws.quota_request


def test_the_approval_queue_shows_azures_quota_left_for_the_size(client, cast, sim):
    sim.set_quota("eastus", A100_FAMILY, 100)
    qr = _pending(cast)
    client.force_login(cast.platform_admin)
    queue = client.get(reverse("approvals")).content.decode()
    assert reverse("approval-azure-quota", args=[qr.pk]) in queue  # loaded by htmx
    cell = client.get(reverse("approval-azure-quota", args=[qr.pk])).content.decode()
    assert f"100 vCPUs of {A100_FAMILY} left in eastus" in cell
    assert "room for 4 more Standard_NC24ads_A100_v4" in cell


def test_the_approval_queue_shows_the_spot_quota_left_for_a_spot_request(client, cast, sim):
    _spot_price()
    sim.set_quota("eastus", A100_FAMILY, 0)
    sim.set_quota("eastus", SPOT_QUOTA, 50)
    qr = _pending(cast, spot=True)
    client.force_login(cast.platform_admin)
    cell = client.get(reverse("approval-azure-quota", args=[qr.pk])).content.decode()
    assert "50 vCPUs of Total Regional Low-priority vCPUs (Spot) left in eastus" in cell
    assert "room for 2 more Standard_NC24ads_A100_v4" in cell


def test_spot_and_regular_quota_left_are_kept_apart(cast, sim):
    sim.set_quota("eastus", A100_FAMILY, 48)
    sim.set_quota("eastus", SPOT_QUOTA, 24)
    regular = azure_headroom(region="eastus", vm_size=A100)
    spot = azure_headroom(region="eastus", vm_size=A100, spot=True)
    assert (regular.vcpus_left, regular.vms_left, regular.quota_label) == (48, 2, A100_FAMILY)
    assert (spot.vcpus_left, spot.vms_left) == (24, 1)
    assert spot.quota_label == "Total Regional Low-priority vCPUs (Spot)"


def test_azure_quota_left_is_the_lower_of_family_and_region(cast, sim):
    sim.set_quota("eastus", A100_FAMILY, 100)
    sim.set_quota("eastus", "cores", 30)
    headroom = azure_headroom(region="eastus", vm_size="Standard_NC24ads_A100_v4")
    assert (headroom.vcpus_left, headroom.vms_left) == (30, 1)


def test_azure_quota_left_is_kept_a_minute_rather_than_asked_per_page(cast, sim):
    for _ in range(3):
        azure_headroom(region="eastus", vm_size="Standard_NC24ads_A100_v4")
    usage_gets = [r for r in sim.requests() if r["path"].endswith("/usages")]
    assert len(usage_gets) == 1


def test_when_azure_does_not_answer_the_queue_says_so(client, cast, sim):
    qr = _pending(cast)
    sim.inject("usage.list", "authorization_failed")
    client.force_login(cast.platform_admin)
    cell = client.get(reverse("approval-azure-quota", args=[qr.pk]))
    assert cell.status_code == 200
    assert "Azure did not answer: AuthorizationFailed." in cell.content.decode()


def test_a_restricted_size_shows_azures_reason_in_the_queue(cast, sim):
    sim.restrict_sku("eastus", "Standard_NC24ads_A100_v4")
    headroom = azure_headroom(region="eastus", vm_size="Standard_NC24ads_A100_v4")
    assert headroom.problem == "Not available here (NotAvailableForSubscription)."
