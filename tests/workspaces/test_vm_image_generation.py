"""A VM workspace gets the image generation and OS disk SKU its size's resource SKU allows
(HyperVGenerations, PremiumIO), end to end through the emulator, which refuses a Gen2 image on
a Gen1-only size and Premium_LRS on a size without premium storage, as Azure does."""

import uuid

import pytest
from django.utils import timezone

from cloud.clients import compute_client
from teams.models import GpuQuota
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.azure import azure_settings
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


def _provision(cast, offering) -> Workspace:
    ws = workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="gen-check",
        offering=offering,
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
    )
    return Workspace.objects.get(pk=ws.pk)


def _boot(ws: Workspace) -> tuple[str, str]:
    settings = azure_settings()
    vm = compute_client(settings).virtual_machines.get(settings.resource_group, f"ws-{ws.short_id}")
    storage = vm.storage_profile
    return storage.image_reference.sku, storage.os_disk.managed_disk.storage_account_type


def test_a_gen2_premium_size_gets_the_gen2_image_and_premium_ssd(cast, sim):
    ws = _provision(cast, OfferingFactory())  # Standard_NC24ads_A100_v4: V2 only, PremiumIO

    assert ws.status == Status.RUNNING
    assert _boot(ws) == ("22_04-lts-gen2", "Premium_LRS")


def test_a_gen1_size_without_premium_io_gets_the_gen1_image_and_standard_ssd(cast, sim):
    # Standard_NC6: HyperVGenerations V1, PremiumIO False. One image and Premium_LRS for every
    # size made Azure refuse it.
    GpuQuota.objects.create(team=cast.team, gpu_model="K80", gpus=2)
    offering = OfferingFactory(
        vm_size="Standard_NC6", region="westus2", gpu_model="K80", vcpus=6, gpu_memory_gib=12
    )

    ws = _provision(cast, offering)

    assert (ws.status, ws.error_code) == (Status.RUNNING, "")
    assert _boot(ws) == ("22_04-lts", "StandardSSD_LRS")
