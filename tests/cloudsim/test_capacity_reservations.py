"""On-demand capacity reservations as Azure answers them (REST examples CapacityReservation*,
Microsoft Learn's capacity-reservation-overview/-overallocate/-modify): a reservation holds its
instances' slots used or not, a VM of its group takes one without a free slot of the region,
one beyond it is overallocated, a full region refuses the reservation, and deletes wait for
VMs to go."""

from tests.cloudsim.conftest import A100, resource_path

GROUP = resource_path("Microsoft.Compute/capacityReservationGroups", "course")


def _group(arm, location="eastus"):
    return arm.call("PUT", GROUP, {"location": location, "tags": {"booking": "b1"}})


def _reserve(arm, capacity=2, name="a100"):
    body = {"location": "eastus", "sku": {"name": A100, "capacity": capacity}}
    return arm.call("PUT", f"{GROUP}/capacityReservations/{name}", body)


def _reserved_vm(arm, name):
    link = {"capacityReservationGroup": {"id": GROUP}}
    return arm.put_vm(name, capacityReservation=link)


def _view(arm, name="a100"):
    return arm.call("GET", f"{GROUP}/capacityReservations/{name}?$expand=instanceView").body


def test_a_reservation_is_created_as_an_lro_and_shows_its_utilisation(arm, finish):
    created = _group(arm)
    assert created.status == 201 and created.body["type"] == (
        "Microsoft.Compute/capacityReservationGroups"
    )
    reply = _reserve(arm)
    assert reply.status == 201 and reply.body["properties"]["provisioningState"] == "Creating"
    assert reply.body["sku"] == {"name": A100, "capacity": 2}
    assert arm.wait(reply)["status"] == "Succeeded"
    info = _view(arm)["properties"]["instanceView"]["utilizationInfo"]
    assert info == {"currentCapacity": 2, "virtualMachinesAllocated": []}


def test_reserved_instances_hold_the_regions_slots_and_a_vm_of_the_group_takes_one(
    arm, ctl, finish
):
    _group(arm)
    ctl.set_capacity("eastus", A100, 2)
    assert arm.wait(_reserve(arm, capacity=2))["status"] == "Succeeded"
    # Nobody else gets those two slots...
    assert arm.wait(arm.put_vm("outsider"))["status"] == "Failed"
    # ...but the group's VMs do, without a free slot of the region.
    assert arm.wait(_reserved_vm(arm, "booked-1"))["status"] == "Succeeded"
    allocated = _view(arm)["properties"]["instanceView"]["utilizationInfo"]
    assert [v["id"].rsplit("/", 1)[1] for v in allocated["virtualMachinesAllocated"]] == [
        "booked-1"
    ]


def test_a_vm_beyond_the_reservation_is_overallocated_and_needs_a_free_slot(arm, ctl, finish):
    _group(arm)
    ctl.set_capacity("eastus", A100, 1)
    assert arm.wait(_reserve(arm, capacity=1))["status"] == "Succeeded"
    assert arm.wait(_reserved_vm(arm, "first"))["status"] == "Succeeded"
    assert arm.wait(_reserved_vm(arm, "second"))["status"] == "Failed"  # the region is full


def test_a_full_region_refuses_the_reservation_and_it_holds_nothing(arm, ctl, finish):
    _group(arm)
    ctl.set_capacity("eastus", A100, 1)
    result = arm.wait(_reserve(arm, capacity=3))
    assert result["status"] == "Failed" and result["error"]["code"] == "AllocationFailed"
    assert _view(arm)["properties"]["provisioningState"] == "Failed"
    assert arm.wait(arm.put_vm("free"))["status"] == "Succeeded"


def test_deletes_wait_for_vms_to_go_then_free_the_slots(arm, ctl, finish):
    _group(arm)
    ctl.set_capacity("eastus", A100, 1)
    assert arm.wait(_reserve(arm, capacity=1))["status"] == "Succeeded"
    assert arm.wait(_reserved_vm(arm, "booked"))["status"] == "Succeeded"
    path = f"{GROUP}/capacityReservations/a100"
    assert arm.call("DELETE", path).status == 409
    assert arm.call("DELETE", GROUP).status == 409
    assert arm.wait(arm.call("POST", arm.vm_path("booked") + "/deallocate"))["status"] == (
        "Succeeded"
    )
    assert arm.wait(arm.call("DELETE", path))["status"] == "Succeeded"
    assert arm.call("GET", path).status == 404


def test_a_vm_naming_a_missing_group_is_refused(arm):
    reply = _reserved_vm(arm, "lost")
    assert reply.status == 400 and reply.code == "InvalidParameter"


def test_an_existing_vm_is_associated_only_while_deallocated_and_then_starts_reserved(
    arm, ctl, finish
):
    _group(arm)
    ctl.set_capacity("eastus", A100, 2)
    assert arm.wait(arm.put_vm("mine"))["status"] == "Succeeded"  # a plain VM, allocated
    assert arm.wait(_reserve(arm, capacity=1))["status"] == "Succeeded"  # the region is full
    link = {"properties": {"capacityReservation": {"capacityReservationGroup": {"id": GROUP}}}}
    refused = arm.call("PATCH", arm.vm_path("mine"), link)
    assert (refused.status, refused.code) == (409, "OperationNotAllowed")
    assert arm.wait(arm.call("POST", arm.vm_path("mine") + "/deallocate"))["status"] == (
        "Succeeded"
    )
    assert arm.wait(arm.call("PATCH", arm.vm_path("mine"), link))["status"] == "Succeeded"
    # No free slot in the region, but the reservation's instance takes it.
    assert arm.wait(arm.call("POST", arm.vm_path("mine") + "/start"))["status"] == "Succeeded"
    allocated = _view(arm)["properties"]["instanceView"]["utilizationInfo"]
    assert [v["id"].rsplit("/", 1)[1] for v in allocated["virtualMachinesAllocated"]] == ["mine"]
    # Taken out again (deallocated, id null as Learn's remove-vm shows): the group can go.
    assert arm.wait(arm.call("POST", arm.vm_path("mine") + "/deallocate"))["status"] == (
        "Succeeded"
    )
    unlink = {"properties": {"capacityReservation": {"capacityReservationGroup": {"id": None}}}}
    assert arm.wait(arm.call("PATCH", arm.vm_path("mine"), unlink))["status"] == "Succeeded"
    assert arm.wait(arm.call("DELETE", f"{GROUP}/capacityReservations/a100"))["status"] == (
        "Succeeded"
    )
    assert arm.call("DELETE", GROUP).status == 200
