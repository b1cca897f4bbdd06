"""Spot VMs through the real SDK: what the adapter sends, what Azure returns, how an eviction
looks to power_states()."""

import dataclasses

import pytest

from cloud.azure_vm import begin, get, power_states, vm_names
from cloud.clients import compute_client
from cloud.errors import CloudError

from .support import RESOURCE_GROUP, resume


def create(azure, spec):
    name = vm_names(spec.workspace_id).vm
    return resume(azure, "create", name=name, token=begin(azure, "create", name=name, spec=spec))


def test_a_spot_vm_is_sent_and_returned_with_priority_eviction_policy_and_max_price(
    azure, control, spec
):
    state = create(azure, dataclasses.replace(spec, spot=True))

    assert (state.power_state, state.priority) == ("running", "Spot")
    [sent] = control.state()["virtualMachines"]
    assert (sent["priority"], sent["evictionPolicy"]) == ("Spot", "Deallocate")
    assert sent["billingProfile"] == {"maxPrice": -1}
    props = compute_client(azure).virtual_machines.get(RESOURCE_GROUP, state.name).properties
    assert (props.priority, props.eviction_policy) == ("Spot", "Deallocate")
    assert props.billing_profile.max_price == -1


def test_a_regular_vm_sends_no_spot_properties(azure, control, spec):
    state = create(azure, spec)

    assert state.priority == "Regular"
    [sent] = control.state()["virtualMachines"]
    assert (sent["priority"], sent["evictionPolicy"], sent["billingProfile"]) == (
        "Regular",
        None,
        None,
    )


def test_power_states_show_an_evicted_spot_vm_deallocated_in_one_call(azure, control, spec):
    spot = create(azure, dataclasses.replace(spec, spot=True))
    other = dataclasses.replace(spec, workspace_id="0b6c1f2a-3d4e-4f5a-8b6c-7d8e9f0a1b2c")
    regular = create(azure, other)
    control.evict(spot.name)
    before = len(control.requests())

    states = power_states(azure)

    assert states == {spot.name: "deallocated", regular.name: "running"}
    assert len(control.requests()) == before + 1
    assert get(azure, name=spot.name).power_state == "deallocated"


def test_power_states_leave_out_vms_of_other_resource_groups(azure, spec):
    create(azure, spec)

    assert power_states(dataclasses.replace(azure, resource_group="rg-elsewhere")) == {}


def test_a_throttled_listing_is_a_transient_cloud_error(azure, control):
    control.inject("vm.list", "throttle", count=3)

    with pytest.raises(CloudError) as caught:
        power_states(azure)

    assert (caught.value.code, caught.value.transient) == ("TooManyRequests", True)
