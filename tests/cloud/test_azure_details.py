"""The adapters against Azure answers the emulator gives only when asked (cloudsim/quirks.py):
creates answered 201 without Azure-AsyncOperation, and locations as display names."""

import dataclasses
import random
import uuid

import pytest

from cloud import aks
from cloud.azure_vm import begin, get, sku_info, vm_names
from cloud.errors import CloudError
from cloud.locations import normalise_location

from .support import T4, arm_requests, resume
from .test_aks import CLUSTER, MIG, finish


def _lro_header_count(control) -> int:
    # The emulator logs requests, not headers; a create without the header is polled on the
    # resource itself, which the log shows as GETs of the resource, never of an operation.
    return len(arm_requests(control, "GET", contains="/operations/"))


@pytest.mark.parametrize("ops", [("vm.create", "nic.create"), ("vm.create",), ("nic.create",)])
def test_a_vm_created_without_the_async_header_is_polled_to_running_from_its_token(
    azure, control, spec, ops
):
    for op in ops:
        control.inject(op, "no_async_header")
    name = vm_names(spec.workspace_id).vm

    token = begin(azure, "create", name=name, spec=spec)  # what the portal saves
    state = resume(azure, "create", name=name, token=token)

    assert (state.provisioning_state, state.power_state) == ("Succeeded", "running")
    assert control.state()["faults"] == {}  # each create was answered without the header
    if ops == ("vm.create", "nic.create"):
        assert _lro_header_count(control) == 0
        assert arm_requests(control, "GET", contains=f"/virtualMachines/{name}")


def test_a_seeded_rate_answers_both_ways_and_creates_still_succeed(azure, control, spec):
    control.quirks(no_async_header_rate=0.5, seed=7)
    draws = random.Random(7)
    with_header = [draws.random() >= 0.5 for _ in range(8)]  # NIC, VM, NIC, VM, ...
    assert any(with_header) and not all(with_header)  # this seed gives both answers

    for _ in range(4):
        one = dataclasses.replace(spec, workspace_id=str(uuid.uuid4()))
        name = vm_names(one.workspace_id).vm
        token = begin(azure, "create", name=name, spec=one)
        assert resume(azure, "create", name=name, token=token).power_state == "running"

    assert control.quirks()["seed"] == 7


def test_an_agent_pool_created_without_the_async_header_reaches_succeeded(azure, control):
    control.create_aks_cluster(CLUSTER.subscription_id, CLUSTER.resource_group, CLUSTER.name)
    control.inject("aks.pool.create", "no_async_header")

    token = aks.pool_begin(azure, CLUSTER, "create", name=MIG.name, spec=MIG)
    pool = finish(azure, "create", MIG.name, token)

    assert (pool.provisioning_state, pool.count) == ("Succeeded", 2)
    assert control.state()["faults"] == {}


@pytest.mark.parametrize(
    ("shown", "name"),
    [("West US 2", "westus2"), ("East US", "eastus"), ("eastus", "eastus"), (None, "")],
)
def test_normalise_location(shown, name):
    assert normalise_location(shown) == name


def test_display_name_locations_are_read_as_names(azure, control, spec):
    control.quirks(display_locations=True)
    control.create_aks_cluster(CLUSTER.subscription_id, CLUSTER.resource_group, CLUSTER.name)
    name = vm_names(spec.workspace_id).vm
    resume(azure, "create", name=name, token=begin(azure, "create", name=name, spec=spec))
    control.restrict_sku("eastus", T4)  # listed with "values": ["East US"]

    assert get(azure, name=name).location == "eastus"
    assert aks.cluster_get(azure, CLUSTER).location == "eastus"
    restricted = sku_info(azure, location="eastus", vm_size=T4)
    assert (restricted.offered, restricted.reason) == (False, "NotAvailableForSubscription")


def test_a_failed_create_without_the_async_header_keeps_azures_code(azure, control, spec):
    # Polled on the VM itself, the SDK says only "invalid status 'OK'"; Azure's code is in the
    # instance view (ProvisioningState/failed/AllocationFailed).
    control.inject("vm.create", "allocation_failed")
    control.inject("vm.create", "no_async_header")
    name = vm_names(spec.workspace_id).vm
    token = begin(azure, "create", name=name, spec=spec)

    with pytest.raises(CloudError) as failed:
        resume(azure, "create", name=name, token=token)

    assert (failed.value.code, failed.value.status) == ("AllocationFailed", None)
    assert not failed.value.transient and failed.value.message
    assert control.state()["faults"] == {}
