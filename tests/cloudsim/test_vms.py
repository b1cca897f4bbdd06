"""Virtual machine lifecycle: create LRO, idempotent PUT, power actions, delete and disks."""

import base64

import pytest


def test_create_is_an_lro_from_creating_to_succeeded(arm, sim, ctl, finish):
    ctl.set_latency(60)

    reply = arm.put_vm("vm1")

    assert reply.status == 201
    assert reply.body["properties"]["provisioningState"] == "Creating"
    assert reply.body["id"] == arm.vm_path("vm1")
    assert reply.body["type"] == "Microsoft.Compute/virtualMachines"
    assert len(reply.body["properties"]["vmId"]) == 36
    url = reply.headers["azure-asyncoperation"]
    assert url.startswith(
        f"{sim.url}/subscriptions/{arm.SUB}/providers/Microsoft.Compute/locations/eastus/operations/"
    )
    assert "api-version=2024-07-01" in url
    assert reply.headers["retry-after"] == "0"
    assert arm.call("GET", url, api=None).body["status"] == "InProgress"
    assert arm.power("vm1") == ("ProvisioningState/creating", "PowerState/starting")

    finish()

    status = arm.call("GET", url, api=None).body
    assert status["status"] == "Succeeded"
    assert status["endTime"] and "error" not in status
    assert arm.vm("vm1")["properties"]["provisioningState"] == "Succeeded"
    assert arm.power("vm1") == ("ProvisioningState/succeeded", "PowerState/running")


def test_create_with_default_latency_completes_by_itself(arm):
    status = arm.wait(arm.put_vm("vm1"))

    assert status["status"] == "Succeeded"
    assert arm.power("vm1")[1] == "PowerState/running"


def test_vm_body_echoes_request_but_never_custom_data(arm, ctl):
    arm.wait(arm.put_vm("vm1"))

    vm = arm.vm("vm1")
    state = ctl.state()["virtualMachines"][0]

    props = vm["properties"]
    assert props["hardwareProfile"]["vmSize"] == arm.A100
    assert props["osProfile"]["adminUsername"] == "azureuser"
    assert "customData" not in props["osProfile"]
    assert props["storageProfile"]["osDisk"]["managedDisk"]["id"] == arm.disk_path("vm1-osdisk")
    assert vm["tags"] == {"workspace": "w1"}
    assert base64.b64decode(state["customData"]) == b"#cloud-config"
    assert state["nics"] == [arm.nic_id("vm1-nic")]
    assert state["osDisk"] == "vm1-osdisk"


def test_expand_instance_view_and_instance_view_endpoint_agree(arm):
    arm.wait(arm.put_vm("vm1"))

    expanded = arm.call("GET", arm.vm_path("vm1") + "?$expand=instanceView").body
    view = arm.call("GET", arm.vm_path("vm1") + "/instanceView").body

    statuses = expanded["properties"]["instanceView"]["statuses"]
    assert statuses == view["statuses"]
    assert statuses[1] == {
        "code": "PowerState/running",
        "level": "Info",
        "displayStatus": "VM running",
    }
    assert "instanceView" not in arm.vm("vm1")["properties"]


def test_put_on_existing_vm_is_an_update_with_one_vm_and_one_disk(arm, ctl):
    arm.wait(arm.put_vm("vm1"))
    usage_before = arm.call(
        "GET", f"/subscriptions/{arm.SUB}/providers/Microsoft.Compute/locations/eastus/usages"
    ).body

    again = arm.put_vm("vm1")

    assert again.status == 200
    assert "azure-asyncoperation" in again.headers
    assert arm.wait(again)["status"] == "Succeeded"
    state = ctl.state()
    assert len(state["virtualMachines"]) == 1
    assert len(state["disks"]) == 1
    usage_after = arm.call(
        "GET", f"/subscriptions/{arm.SUB}/providers/Microsoft.Compute/locations/eastus/usages"
    ).body
    assert usage_after == usage_before
    assert arm.vm("vm1")["properties"]["vmId"] == again.body["properties"]["vmId"]


def test_put_while_an_operation_is_in_progress_is_a_conflict(arm, ctl, finish):
    ctl.set_latency(60)
    arm.put_vm("vm1")

    reply = arm.put_vm("vm1")

    assert reply.status == 409
    assert reply.code == "Conflict"
    assert reply.body["error"]["message"].startswith(
        "Operation 'PUT' is not allowed since a conflicting operation"
    )
    finish()
    assert arm.put_vm("vm1").status == 200


@pytest.mark.parametrize("action", ["start", "deallocate", "powerOff"])
def test_actions_conflict_with_a_running_create(arm, ctl, action):
    ctl.set_latency(60)
    arm.put_vm("vm1")

    reply = arm.call("POST", arm.vm_path("vm1") + f"/{action}")

    assert reply.status == 409
    assert reply.code == "Conflict"


def test_deallocate_then_start_moves_through_power_states(arm, ctl, finish):
    arm.wait(arm.put_vm("vm1"))
    ctl.set_latency(60)

    deallocating = arm.call("POST", arm.vm_path("vm1") + "/deallocate")

    assert deallocating.status == 202
    assert {"azure-asyncoperation", "location", "retry-after"} <= deallocating.headers.keys()
    assert arm.power("vm1")[1] == "PowerState/deallocating"
    finish()
    assert arm.power("vm1") == ("ProvisioningState/succeeded", "PowerState/deallocated")
    disk = arm.call("GET", arm.disk_path("vm1-osdisk")).body
    assert disk["properties"]["diskState"] == "Reserved"

    starting = arm.call("POST", arm.vm_path("vm1") + "/start")

    assert starting.status == 202
    assert arm.power("vm1")[1] == "PowerState/starting"
    finish()
    assert arm.power("vm1") == ("ProvisioningState/succeeded", "PowerState/running")


def test_location_monitor_answers_202_then_200(arm, ctl, finish):
    arm.wait(arm.put_vm("vm1"))
    ctl.set_latency(60)
    reply = arm.call("POST", arm.vm_path("vm1") + "/deallocate")

    running = arm.call("GET", reply.headers["location"], api=None)
    finish()
    done = arm.call("GET", reply.headers["location"], api=None)

    assert running.status == 202
    assert done.status == 200


def test_deallocating_a_deallocated_vm_and_starting_a_running_vm_succeed(arm):
    arm.wait(arm.put_vm("vm1"))

    assert arm.wait(arm.call("POST", arm.vm_path("vm1") + "/start"))["status"] == "Succeeded"
    assert arm.power("vm1")[1] == "PowerState/running"
    arm.wait(arm.call("POST", arm.vm_path("vm1") + "/deallocate"))
    again = arm.wait(arm.call("POST", arm.vm_path("vm1") + "/deallocate"))
    assert again["status"] == "Succeeded"
    assert arm.power("vm1")[1] == "PowerState/deallocated"


def test_power_off_stops_but_keeps_the_vm_allocated(arm, ctl):
    arm.wait(arm.put_vm("vm1"))

    arm.wait(arm.call("POST", arm.vm_path("vm1") + "/powerOff"))

    assert arm.power("vm1")[1] == "PowerState/stopped"
    ctl.set_capacity("eastus", arm.A100, 0)
    assert arm.wait(arm.call("POST", arm.vm_path("vm1") + "/start"))["status"] == "Succeeded"


def test_actions_on_a_missing_vm_are_404(arm):
    reply = arm.call("POST", arm.vm_path("ghost") + "/start")

    assert reply.status == 404
    assert reply.code == "ResourceNotFound"
    assert arm.call("GET", arm.vm_path("ghost")).status == 404


def test_delete_keeps_disk_and_nic_by_default_and_frees_the_nic(arm, ctl):
    arm.wait(arm.put_vm("vm1"))

    reply = arm.call("DELETE", arm.vm_path("vm1"))

    assert reply.status == 202
    assert {"azure-asyncoperation", "location", "retry-after"} <= reply.headers.keys()
    assert arm.wait(reply)["status"] == "Succeeded"
    assert arm.call("GET", arm.vm_path("vm1")).status == 404
    disk = arm.call("GET", arm.disk_path("vm1-osdisk"))
    assert disk.status == 200
    assert disk.body["properties"]["diskState"] == "Unattached"
    assert "managedBy" not in disk.body
    nic = arm.call("GET", arm.nic_id("vm1-nic")).body
    assert "virtualMachine" not in nic["properties"]
    assert arm.wait(arm.call("DELETE", arm.nic_id("vm1-nic")))["status"] == "Succeeded"
    assert arm.call("DELETE", arm.vm_path("vm1")).status == 204


def test_delete_option_delete_removes_disk_and_nic_with_the_vm(arm, ctl):
    arm.put_nic("vm1-nic")
    body = arm.vm_body("vm1-nic", disk="vm1-osdisk")
    body["properties"]["storageProfile"]["osDisk"]["deleteOption"] = "Delete"
    body["properties"]["networkProfile"]["networkInterfaces"][0]["properties"]["deleteOption"] = (
        "Delete"
    )
    arm.wait(arm.call("PUT", arm.vm_path("vm1"), body))

    arm.wait(arm.call("DELETE", arm.vm_path("vm1")))

    state = ctl.state()
    assert state["disks"] == [] and state["networkInterfaces"] == []


def test_disk_attached_to_a_vm_cannot_be_deleted_but_a_detached_one_can(arm):
    arm.wait(arm.put_vm("vm1"))

    attached = arm.call("DELETE", arm.disk_path("vm1-osdisk"))

    assert attached.status == 409
    assert attached.code == "OperationNotAllowed"
    assert attached.body["error"]["message"] == (
        f"Disk vm1-osdisk is attached to VM {arm.vm_path('vm1')}."
    )
    assert (
        arm.call("GET", arm.disk_path("vm1-osdisk")).body["properties"]["diskState"] == "Attached"
    )
    arm.wait(arm.call("DELETE", arm.vm_path("vm1")))
    deleted = arm.call("DELETE", arm.disk_path("vm1-osdisk"))
    assert deleted.status == 202
    arm.wait(deleted)
    assert arm.call("GET", arm.disk_path("vm1-osdisk")).status == 404
    assert arm.call("DELETE", arm.disk_path("vm1-osdisk")).status == 204


def test_create_validates_size_location_and_nics(arm, ctl):
    no_size = arm.vm_body("nic-a")
    del no_size["properties"]["hardwareProfile"]
    no_location = arm.vm_body("nic-a")
    del no_location["location"]

    assert arm.call("PUT", arm.vm_path("vm1"), no_size).code == "InvalidParameter"
    assert arm.call("PUT", arm.vm_path("vm1"), no_location).code == "InvalidParameter"
    missing_nic = arm.call("PUT", arm.vm_path("vm1"), arm.vm_body("nic-a"))
    assert missing_nic.status == 400
    assert missing_nic.body["error"]["message"] == f"Resource {arm.nic_id('nic-a')} was not found."
    assert ctl.state()["virtualMachines"] == []


def test_a_nic_cannot_serve_two_vms(arm, ctl):
    arm.wait(arm.put_vm("vm1", nic="nic-a"))

    reply = arm.put_vm("vm2", nic="nic-a")

    assert reply.status == 400
    assert reply.code == "NicInUse"
    assert [vm["name"] for vm in ctl.state()["virtualMachines"]] == ["vm1"]


def test_update_that_swaps_the_nic_releases_the_old_one(arm):
    arm.wait(arm.put_vm("vm1", nic="nic-a"))
    arm.put_nic("nic-b")

    arm.wait(arm.put_vm("vm1", nic="nic-b"))

    old = arm.call("GET", arm.nic_id("nic-a")).body["properties"]
    new = arm.call("GET", arm.nic_id("nic-b")).body["properties"]
    assert "virtualMachine" not in old
    assert new["virtualMachine"]["id"] == arm.vm_path("vm1")


def test_a_linux_vm_nobody_could_log_in_to_is_refused(arm, ctl):
    body = arm.vm_body("vm1-nic", disk="vm1-osdisk")
    del body["properties"]["osProfile"]["linuxConfiguration"]["ssh"]

    reply = arm.call("PUT", arm.vm_path("vm1"), body)

    assert reply.status == 400
    assert reply.body["error"]["code"] == "InvalidParameter"
    assert reply.body["error"]["target"] == "linuxConfiguration"
    assert "either SSH or by user name and password" in reply.body["error"]["message"]
    assert ctl.state()["virtualMachines"] == []
