"""Spot VMs: priority, evictionPolicy and billingProfile validated and echoed as Azure does, and
evictions (ARM simulateEviction and the control API)."""

import pytest

from cloudsim import SimControlError

SPOT = {"priority": "Spot", "evictionPolicy": "Deallocate", "billingProfile": {"maxPrice": -1}}


def test_a_spot_vm_is_stored_and_returned_with_its_spot_properties(arm):
    arm.wait(arm.put_vm("vm1", **SPOT))

    props = arm.vm("vm1")["properties"]

    assert (props["priority"], props["evictionPolicy"]) == ("Spot", "Deallocate")
    assert props["billingProfile"] == {"maxPrice": -1}


def test_a_spot_vm_without_policy_or_max_price_gets_azures_defaults(arm):
    arm.wait(arm.put_vm("vm1", priority="spot"))

    props = arm.vm("vm1")["properties"]

    assert (props["priority"], props["evictionPolicy"]) == ("Spot", "Deallocate")
    assert props["billingProfile"] == {"maxPrice": -1}


def test_a_regular_vm_has_no_eviction_policy(arm):
    arm.wait(arm.put_vm("vm1"))

    props = arm.vm("vm1")["properties"]

    assert "evictionPolicy" not in props and "billingProfile" not in props


@pytest.mark.parametrize(
    "properties, code, target",
    [
        (
            {"evictionPolicy": "Deallocate"},
            "EvictionPolicyCanBeSetOnlyOnAzureSpotVirtualMachines",
            "evictionPolicy",
        ),
        (
            {"priority": "Regular", "evictionPolicy": "Delete"},
            "EvictionPolicyCanBeSetOnlyOnAzureSpotVirtualMachines",
            "evictionPolicy",
        ),
        (
            {"billingProfile": {"maxPrice": 2.5}},
            "MaxPriceIsSupportedOnlyForAzureSpotVirtualMachines",
            "billingProfile.maxPrice",
        ),
        (
            {"priority": "Spot", "billingProfile": {"maxPrice": 0}},
            "MaxPriceValueInvalid",
            "billingProfile.maxPrice",
        ),
        (
            {"priority": "Spot", "billingProfile": {"maxPrice": "cheap"}},
            "MaxPriceValueInvalid",
            "billingProfile.maxPrice",
        ),
        ({"priority": "Cheap"}, "InvalidParameter", "priority"),
        ({"priority": "Spot", "evictionPolicy": "Hibernate"}, "InvalidParameter", "evictionPolicy"),
        ({"priority": "Spot", "billingProfile": "free"}, "InvalidParameter", "billingProfile"),
    ],
)
def test_spot_properties_are_validated_like_azure(arm, ctl, properties, code, target):
    reply = arm.put_vm("vm1", **properties)

    assert reply.status == 400
    assert reply.code == code and reply.headers["x-ms-error-code"] == code
    assert reply.body["error"]["target"] == target and reply.body["error"]["message"]
    assert ctl.state()["virtualMachines"] == []


def test_simulate_eviction_deallocates_a_spot_vm_and_keeps_its_disk(arm, ctl):
    arm.wait(arm.put_vm("vm1", **SPOT))

    reply = arm.call("POST", arm.vm_path("vm1") + "/simulateEviction")

    assert reply.status == 204
    assert arm.power("vm1") == ("ProvisioningState/succeeded", "PowerState/deallocated")
    state = ctl.state()
    assert state["disks"][0]["diskState"] == "Reserved"
    assert state["virtualMachines"][0]["evictedAt"]


def test_an_evicted_vm_frees_its_capacity_and_starts_again_when_there_is_room(arm, ctl):
    arm.wait(arm.put_vm("vm1", **SPOT))
    ctl.set_capacity("eastus", arm.A100, 0)

    assert ctl.evict("vm1")["outcome"] == "deallocated"
    # Azure gives the slot to someone else: vm1's start then fails for capacity.
    assert arm.wait(arm.put_vm("vm2"))["status"] == "Succeeded"
    failed = arm.wait(arm.call("POST", arm.vm_path("vm1") + "/start"))
    assert failed["error"]["code"] == "AllocationFailed"
    assert arm.power("vm1")[1] == "PowerState/deallocated"

    ctl.set_capacity("eastus", arm.A100, 1)
    assert arm.wait(arm.call("POST", arm.vm_path("vm1") + "/start"))["status"] == "Succeeded"
    assert arm.power("vm1")[1] == "PowerState/running"


def test_a_spot_vm_with_the_delete_policy_is_deleted_when_evicted(arm, ctl):
    arm.wait(arm.put_vm("vm1", priority="Spot", evictionPolicy="Delete"))

    assert ctl.evict("vm1")["outcome"] == "deleted"

    assert arm.call("GET", arm.vm_path("vm1")).status == 404


def test_evicting_a_regular_vm_is_refused(arm, ctl):
    arm.wait(arm.put_vm("vm1"))

    with pytest.raises(SimControlError) as caught:
        ctl.evict("vm1")
    reply = arm.call("POST", arm.vm_path("vm1") + "/simulateEviction")

    assert caught.value.status == 409 and caught.value.body["error"]["code"] == (
        "OperationNotAllowed"
    )
    assert (reply.status, reply.code) == (409, "OperationNotAllowed")
    assert arm.power("vm1")[1] == "PowerState/running"


def test_evicting_a_deallocated_or_unknown_vm_is_refused(arm, ctl):
    arm.wait(arm.put_vm("vm1", **SPOT))
    ctl.evict("vm1")

    with pytest.raises(SimControlError) as again:
        ctl.evict("vm1")
    with pytest.raises(SimControlError) as unknown:
        ctl.evict("vm-nope")

    assert again.value.status == 409
    assert unknown.value.status == 404


def test_list_all_with_status_only_carries_each_instance_view(arm, ctl):
    arm.wait(arm.put_vm("vm1", **SPOT))
    arm.wait(arm.put_vm("vm2"))
    ctl.evict("vm1")
    path = f"/subscriptions/{arm.SUB}/providers/Microsoft.Compute/virtualMachines"

    plain = arm.call("GET", path).body["value"]
    status = arm.call("GET", path + "?statusOnly=true").body["value"]

    assert all("instanceView" not in vm["properties"] for vm in plain)
    codes = {vm["name"]: vm["properties"]["instanceView"]["statuses"][1]["code"] for vm in status}
    assert codes == {"vm1": "PowerState/deallocated", "vm2": "PowerState/running"}
