"""Capacity, quota, SKU availability, usages and the resource SKU list."""

QUOTA_LINK = "https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/UsageAndQuota.ReactView/Parameters/"


def usages(arm, location="eastus") -> dict:
    path = f"/subscriptions/{arm.SUB}/providers/Microsoft.Compute/locations/{location}/usages"
    reply = arm.call("GET", path)
    assert reply.status == 200
    return {u["name"]["value"]: u for u in reply.body["value"]}


def test_usages_list_cores_and_each_family_offered_in_the_location(arm):
    entries = usages(arm)

    assert entries["cores"] == {
        "unit": "Count",
        "currentValue": 0,
        "limit": 350,
        "name": {"value": "cores", "localizedValue": "Total Regional vCPUs"},
    }
    a100 = entries["standardNCADSA100v4Family"]
    assert a100["limit"] == 96
    assert a100["name"]["localizedValue"] == "Standard NCADSA100v4 Family vCPUs"
    assert "standardNDSH100v5Family" in entries  # ND96isr_H100_v5 is offered in eastus ...
    assert "standardNDSH100v5Family" not in usages(arm, "westus2")  # ... but not in westus2.


def test_usages_count_allocated_and_deallocated_vms(arm):
    arm.wait(arm.put_vm("vm1"))
    arm.wait(arm.put_vm("vm2"))
    arm.wait(arm.call("POST", arm.vm_path("vm2") + "/deallocate"))

    entries = usages(arm)

    assert entries["standardNCADSA100v4Family"]["currentValue"] == 48
    assert entries["cores"]["currentValue"] == 48
    assert usages(arm, "westus2")["cores"]["currentValue"] == 0
    arm.wait(arm.call("DELETE", arm.vm_path("vm2")))
    assert usages(arm)["standardNCADSA100v4Family"]["currentValue"] == 24


def test_family_quota_is_enforced_with_azures_message(arm, ctl):
    arm.wait(arm.put_vm("vm1"))
    arm.wait(arm.put_vm("vm2"))
    arm.wait(arm.call("POST", arm.vm_path("vm2") + "/deallocate"))  # Still counts.
    ctl.set_quota("eastus", "standardNCADSA100v4Family", 64)

    reply = arm.put_vm("vm3")

    assert reply.status == 409
    assert reply.code == "OperationNotAllowed"
    message = reply.body["error"]["message"]
    assert message.startswith(
        "Operation could not be completed as it results in exceeding approved "
        "standardNCADSA100v4Family Cores quota. Additional details - Deployment Model: "
        "Resource Manager, Location: eastus, Current Limit: 64, Current Usage: 48, "
        "Additional Required: 24, (Minimum) New Limit Required: 72. Submit a request for "
        f"Quota increase at {QUOTA_LINK}"
    )
    assert message.endswith(
        "by specifying parameters listed in the \u2018Details\u2019 section for deployment to "
        "succeed."
    )
    assert arm.call("GET", arm.vm_path("vm3")).status == 404
    assert len(ctl.state()["disks"]) == 2


def test_default_family_quota_allows_96_vcpus(arm):
    for name in ("vm1", "vm2", "vm3", "vm4"):
        assert arm.put_vm(name).status == 201

    fifth = arm.put_vm("vm5")

    assert fifth.code == "OperationNotAllowed"
    assert (
        "Current Limit: 96, Current Usage: 96, Additional Required: 24"
        in fifth.body["error"]["message"]
    )


def test_regional_cores_quota_is_enforced(arm, ctl):
    ctl.set_quota("eastus", "cores", 30)

    assert arm.put_vm("vm1").status == 201
    reply = arm.put_vm("vm2", size="Standard_NC8as_T4_v3")

    assert reply.code == "OperationNotAllowed"
    assert "exceeding approved Total Regional Cores quota" in reply.body["error"]["message"]


SPOT = {"priority": "Spot"}


def test_spot_vms_count_only_toward_the_regional_spot_quota(arm, ctl):
    arm.wait(arm.put_vm("spot1", **SPOT))
    arm.wait(arm.put_vm("spot2", size="Standard_NC8as_T4_v3", **SPOT))
    arm.wait(arm.put_vm("regular"))
    ctl.evict("spot2")  # Deallocated: it still counts, like a deallocated regular VM.

    entries = usages(arm)

    assert entries["lowPriorityCores"] == {
        "unit": "Count",
        "currentValue": 32,
        "limit": 350,
        "name": {
            "value": "lowPriorityCores",
            "localizedValue": "Total Regional Low-priority vCPUs",
        },
    }
    assert entries["standardNCADSA100v4Family"]["currentValue"] == 24
    assert entries["standardNCASv3_T4Family"]["currentValue"] == 0
    assert entries["cores"]["currentValue"] == 24
    arm.wait(arm.call("DELETE", arm.vm_path("spot1")))
    assert usages(arm)["lowPriorityCores"]["currentValue"] == 8


def test_the_spot_quota_is_enforced_with_azures_message(arm, ctl):
    ctl.set_quota("eastus", "lowPriorityCores", 0)

    reply = arm.put_vm("vm1", **SPOT)

    assert (reply.status, reply.code) == (409, "OperationNotAllowed")
    message = reply.body["error"]["message"]
    assert message.startswith(
        "Operation could not be completed as it results in exceeding approved "
        "LowPriorityCores quota. Additional details - Deployment Model: Resource Manager, "
        "Location: eastus, Current Limit: 0, Current Usage: 0, Additional Required: 24, "
        "(Minimum) New Limit Required: 24. Submit a request for Quota increase at "
        f"{QUOTA_LINK}"
    )
    assert "%22resourceName%22:%22lowPriorityCores%22" in message
    assert message.endswith(
        "for deployment to succeed. Please read more about quota limits at "
        "https://docs.microsoft.com/en-us/azure/azure-portal/supportability/low-priority-quota"
    )
    assert ctl.state()["virtualMachines"] == []
    assert arm.put_vm("vm2").status == 201  # A regular VM does not touch the Spot quota.


def test_full_family_and_regional_quotas_do_not_block_a_spot_vm(arm, ctl):
    ctl.set_quota("eastus", "standardNCADSA100v4Family", 24)
    ctl.set_quota("eastus", "cores", 24)
    assert arm.put_vm("vm1").status == 201

    regular, spot = arm.put_vm("vm2"), arm.put_vm("vm3", **SPOT)

    assert regular.code == "OperationNotAllowed"
    assert spot.status == 201
    assert arm.wait(spot)["status"] == "Succeeded"


def test_resizing_a_spot_vm_is_checked_against_the_spot_quota(arm, ctl):
    arm.wait(arm.put_vm("vm1", **SPOT))
    ctl.set_quota("eastus", "lowPriorityCores", 40)
    ctl.set_quota("eastus", "standardNCADSA100v4Family", 0)  # Not the Spot VM's quota.

    reply = arm.put_vm("vm1", size="Standard_NC48ads_A100_v4", **SPOT)

    assert reply.code == "OperationNotAllowed"
    assert (
        "approved LowPriorityCores quota. Additional details - Deployment Model: Resource "
        "Manager, Location: eastus, Current Limit: 40, Current Usage: 0, Additional Required: 48"
    ) in reply.body["error"]["message"]
    ctl.set_quota("eastus", "lowPriorityCores", 48)
    resized = arm.put_vm("vm1", size="Standard_NC48ads_A100_v4", **SPOT)
    assert arm.wait(resized)["status"] == "Succeeded"


def test_size_not_offered_in_location_is_sku_not_available(arm, ctl):
    reply = arm.put_vm("vm1", size="Standard_NC6")  # Only in westus2 and southcentralus.

    assert reply.status == 409
    assert reply.code == "SkuNotAvailable"
    assert reply.body["error"]["message"] == (
        "The requested VM size for resource 'Following SKUs have failed for Capacity "
        "Restrictions: Standard_NC6' is currently not available in location 'eastus'. "
        "Please try another size or deploy to a different location or zones. "
        "See https://aka.ms/azureskunotavailable for details."
    )
    assert ctl.state()["virtualMachines"] == []


def test_restricted_sku_is_refused_and_listed_as_restricted_until_lifted(arm, ctl):
    ctl.restrict_sku("eastus", arm.A100)

    refused = arm.put_vm("vm1")
    skus = skus_in(arm, "eastus")

    assert refused.code == "SkuNotAvailable"
    assert skus[arm.A100]["restrictions"] == [
        {
            "type": "Location",
            "values": ["eastus"],
            "restrictionInfo": {"locations": ["eastus"]},
            "reasonCode": "NotAvailableForSubscription",
        }
    ]
    assert skus["Standard_NC48ads_A100_v4"]["restrictions"] == []
    ctl.restrict_sku("eastus", arm.A100, restricted=False)
    assert arm.put_vm("vm1").status == 201


def skus_in(arm, location: str) -> dict:
    query = f"$filter=location%20eq%20'{location}'"
    path = f"/subscriptions/{arm.SUB}/providers/Microsoft.Compute/skus?{query}"
    reply = arm.call("GET", path)
    assert reply.status == 200
    return {sku["name"]: sku for sku in reply.body["value"]}


def test_sku_list_filters_by_location_and_describes_each_size(arm):
    eastus = skus_in(arm, "eastus")
    everything = arm.call("GET", f"/subscriptions/{arm.SUB}/providers/Microsoft.Compute/skus").body

    a100 = eastus[arm.A100]
    assert a100["resourceType"] == "virtualMachines"
    assert a100["size"] == "NC24ads_A100_v4"
    assert a100["family"] == "standardNCADSA100v4Family"
    assert a100["locations"] == ["eastus"]
    assert a100["locationInfo"][0]["zones"] == ["1", "2", "3"]
    caps = {c["name"]: c["value"] for c in a100["capabilities"]}
    assert (caps["vCPUs"], caps["MemoryGB"], caps["GPUs"]) == ("24", "220", "1")
    assert "Standard_NC6" not in eastus
    assert all(sku["locations"] == ["eastus"] for sku in eastus.values())
    assert len(everything["value"]) > len(eastus)
    assert {"westus2", "eastus"} <= {sku["locations"][0] for sku in everything["value"]}


def test_no_capacity_fails_the_create_lro_and_leaves_a_failed_vm(arm, ctl):
    ctl.set_capacity("eastus", arm.A100, 0)

    reply = arm.put_vm("vm1")
    status = arm.wait(reply)

    assert reply.status == 201  # Accepted: capacity is reported through the LRO, as in Azure.
    assert status["status"] == "Failed"
    assert status["error"]["code"] == "AllocationFailed"
    assert status["error"]["message"] == (
        "Allocation failed. We do not have sufficient capacity for the requested VM size in "
        "this region. Read more about improving likelihood of allocation success at "
        "http://aka.ms/allocation-guidance"
    )
    assert arm.vm("vm1")["properties"]["provisioningState"] == "Failed"
    assert arm.power("vm1")[0] == "ProvisioningState/failed/AllocationFailed"
    assert usages(arm)["standardNCADSA100v4Family"]["currentValue"] == 24  # Still counts.
    assert arm.wait(arm.call("DELETE", arm.vm_path("vm1")))["status"] == "Succeeded"


def test_capacity_counts_allocated_vms_only(arm, ctl):
    ctl.set_capacity("eastus", arm.A100, 1)
    arm.wait(arm.put_vm("vm1"))

    blocked = arm.wait(arm.put_vm("vm2"))
    arm.wait(arm.call("POST", arm.vm_path("vm1") + "/deallocate"))
    retried = arm.wait(arm.put_vm("vm2"))  # PUT on a failed VM retries the allocation.
    restart_blocked = arm.wait(arm.call("POST", arm.vm_path("vm1") + "/start"))

    assert blocked["error"]["code"] == "AllocationFailed"
    assert retried["status"] == "Succeeded"
    assert arm.power("vm2") == ("ProvisioningState/succeeded", "PowerState/running")
    assert restart_blocked["error"]["code"] == "AllocationFailed"
    assert arm.power("vm1")[1] == "PowerState/deallocated"


def test_capacity_is_per_location_and_size(arm, ctl):
    ctl.set_capacity("eastus", arm.A100, 0)

    other_size = arm.wait(arm.put_vm("vm1", size="Standard_NC48ads_A100_v4"))
    other_region = arm.wait(arm.put_vm("vm2", location="westus2"))

    assert other_size["status"] == "Succeeded"
    assert other_region["status"] == "Succeeded"
