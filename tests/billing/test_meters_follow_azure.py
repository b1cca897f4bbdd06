"""Meters and quota follow what Azure says (issue 29 item 1, issue 28 finding 6): a compute meter
opens only once Azure says the create succeeded, and a delete keeps the meter and the GPUs until
Azure confirms it; the page shows what a stuck delete has cost. Azure through the emulator."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from billing.models import Meter, UsageInterval
from billing.workspace_cost import workspace_cost
from teams.models import GpuQuota
from tests.factories import vm_request
from workspaces.actions import workspace_delete, workspace_retry
from workspaces.quota import team_gpus_in_use
from workspaces.requests import JustificationNeeded
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


def _compute(ws):
    return UsageInterval.objects.filter(workspace=ws, meter=Meter.COMPUTE)


def test_a_create_azure_refused_opens_no_meter_and_costs_nothing(client, cast, sim):
    sim.inject("vm.create", "allocation_failed")
    ws = vm_request(cast)
    assert ws.status == Status.FAILED
    assert not _compute(ws).exists()
    cost = workspace_cost(workspace=ws, now=timezone.now() + timedelta(hours=1))
    assert (cost.month, cost.total, cost.per_hour) == (0, 0, 0)
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:detail", args=[ws.pk])).content.decode()
    assert "$0.00 this month, $0.00 in total" in page


def test_the_meter_opens_when_azure_says_the_create_succeeded(cast, sim):
    ws = vm_request(cast)
    assert ws.status == Status.RUNNING
    running_at = ws.events.get(to_status=Status.RUNNING).at
    assert [i.started_at for i in _compute(ws)] == [running_at]


def _stuck_delete(cast, sim, settings):
    settings.WORKSPACE_RETRY_MAX = 1
    settings.AZURE_RETRY_TOTAL = 0
    ws = vm_request(cast)
    sim.inject("vm.delete", "server_error", count=2)  # every attempt the bound allows
    workspace_delete(user=cast.researcher, workspace=ws, now=timezone.now())
    ws.refresh_from_db()
    assert (ws.status, ws.failed_operation) == (Status.FAILED, "delete")
    assert len(sim.state()["virtualMachines"]) == 1  # Azure still runs, and bills, the VM
    return ws


def test_a_failing_delete_keeps_the_meter_and_the_gpus_until_azure_confirms(
    client, cast, sim, settings
):
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=1)
    ws = _stuck_delete(cast, sim, settings)

    assert _compute(ws).get().ended_at is None
    assert team_gpus_in_use(team_ids=[cast.team.pk])[cast.team.pk]["A100"] == 1
    with pytest.raises(JustificationNeeded, match="has 0 of its 1 left"):
        vm_request(cast, name="second")

    # What the stuck delete has cost: two hours of the VM since the delete was asked.
    asked = ws.events.filter(to_status=Status.DELETING).get().at
    cost = workspace_cost(workspace=ws, now=asked + timedelta(hours=2))
    assert cost.delete_asked_at == asked
    assert Decimal("7.34") <= cost.since_delete <= Decimal("7.40")  # 2 h x $3.673 (+ disk)
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:detail", args=[ws.pk])).content.decode()
    assert 'data-testid="delete-cost"' in page and "Azure bills it until the delete" in page

    workspace_retry(user=cast.researcher, workspace=ws, now=timezone.now())
    ws.refresh_from_db()
    assert ws.status == Status.DELETED and not sim.state()["virtualMachines"]
    assert _compute(ws).get().ended_at == ws.status_changed_at
    assert team_gpus_in_use(team_ids=[cast.team.pk]).get(cast.team.pk, {}).get("A100", 0) == 0
