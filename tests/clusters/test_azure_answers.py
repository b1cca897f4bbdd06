"""The portal's create paths and location reads against Azure answers the emulator gives only
when asked (cloudsim/quirks.py): a 201 without Azure-AsyncOperation, and display-name
locations. Celery runs eagerly; only Azure is faked."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from clusters import services as cluster_services
from clusters import tasks
from clusters.models import PoolStatus
from tests.clusters.test_aks_workspaces import make_pool
from tests.workspaces.test_workspace_flow import _request, _vm
from workspaces.models import Workspace
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


def _register(cast, sim):
    sim.create_aks_cluster(
        settings.AZURE_SUBSCRIPTION_ID, settings.AZURE_RESOURCE_GROUP, "research-aks"
    )
    sim.set_quota("eastus", "standardNCADSA100v4Family", 1000)
    return cluster_services.cluster_register(
        actor=cast.platform_admin,
        subscription_id=settings.AZURE_SUBSCRIPTION_ID,
        resource_group=settings.AZURE_RESOURCE_GROUP,
        name="research-aks",
        now=timezone.now(),
    )


def test_a_vm_workspace_is_created_when_azure_sends_no_async_header(cast, sim):
    sim.inject("nic.create", "no_async_header")
    sim.inject("vm.create", "no_async_header")

    ws = Workspace.objects.get(pk=_request(cast).pk)

    assert (ws.status, ws.error_code) == (Status.RUNNING, "")
    assert _vm(sim, ws)["provisioningState"] == "Succeeded"
    assert sim.state()["faults"] == {}  # both creates were answered without the header


def test_a_failed_create_without_the_async_header_fails_with_azures_code(cast, sim):
    sim.inject("vm.create", "allocation_failed")
    sim.inject("vm.create", "no_async_header")

    ws = Workspace.objects.get(pk=_request(cast).pk)

    assert (ws.status, ws.error_code) == (Status.FAILED, "AllocationFailed")
    assert ws.error_message
    state = sim.state()
    assert state["virtualMachines"] == state["networkInterfaces"] == state["disks"] == []


def test_a_vm_workspace_is_created_with_display_name_locations(cast, sim):
    sim.quirks(display_locations=True, no_async_header_rate=0.5, seed=3)

    ws = Workspace.objects.get(pk=_request(cast).pk)

    assert (ws.status, ws.region) == (Status.RUNNING, "eastus")


def test_a_cluster_reported_as_east_us_is_stored_as_eastus_and_its_sizes_found(cast, sim):
    sim.quirks(display_locations=True)

    cluster = _register(cast, sim)
    pool = make_pool(cast, cluster)  # finds the size's offering in the cluster's region

    assert cluster.location == "eastus"
    assert pool.status == PoolStatus.READY


def test_an_agent_pool_created_without_the_async_header_resumes_from_its_token(cast, sim):
    cluster = _register(cast, sim)
    sim.inject("aks.pool.create", "no_async_header")
    real = tasks.advance_pool.delay
    tasks.advance_pool.delay = lambda pool_id: None  # the worker dies after saving the token
    try:
        pool = make_pool(cast, cluster)
        cluster_services._pool_operation(pool, "create")
    finally:
        tasks.advance_pool.delay = real
    pool.refresh_from_db()
    assert pool.operation_token and pool.status == PoolStatus.CREATING
    assert sim.state()["faults"] == {}

    later = timezone.now() + timedelta(seconds=1)
    cluster_services.pool_reconcile(now=later, stale_before=later)

    pool.refresh_from_db()
    assert (pool.status, pool.operation_token) == (PoolStatus.READY, "")
