"""On-demand capacity reservations: Microsoft.Compute/capacityReservationGroups and their
capacityReservations, in the shapes of Microsoft's REST examples (Compute 2024-07-01:
CapacityReservationGroup_CreateOrUpdate/Get/Delete, CapacityReservation_CreateOrUpdate/Get/
Delete), and what Microsoft Learn documents (learn.microsoft.com/azure/virtual-machines/
capacity-reservation-overview, -overallocate, -modify):

- A group is a container (synchronous PUT, 200/201); a reservation in it holds `sku.capacity`
  instances of `sku.name` in the group's location from when its create succeeds (an LRO, which
  fails with AllocationFailed when the region has no room) until it is deleted. It counts
  against the regional vCPU quota and takes capacity slots as running VMs do, used or not.
- A VM created with `properties.capacityReservation.capacityReservationGroup.id` is associated
  with the group; while a reservation of its size has an unused instance, it takes that one
  and needs no free slot of the region; beyond it ("overallocated") it needs one, as any VM.
- `$expand=instanceView` gives a reservation's `utilizationInfo` (`currentCapacity`,
  `virtualMachinesAllocated`) and a group's per-reservation view.
- A reservation with VMs allocated to it, or a group with reservations or VMs, refuses its
  delete (409); so does a group in another location than the VM.
"""

from . import errors, faults
from .cloud import Cloud
from .models import (
    COMPUTE,
    VM,
    CapacityReservation,
    CapacityReservationGroup,
    Operation,
    iso,
    key_of,
    resource_id,
)
from .protocol import Request, Response, lro_headers
from .skus import normalize_location

GROUP_TYPE = "Microsoft.Compute/capacityReservationGroups"
RESERVATION_TYPE = f"{GROUP_TYPE}/capacityReservations"
FAULT_OPS = frozenset({"reservation.create"})


def _group_id(req: Request) -> str:
    p = req.params
    return resource_id(p["sub"], p["rg"], GROUP_TYPE, p["name"])


def _group(cloud: Cloud, req: Request) -> CapacityReservationGroup:
    group = cloud.reservation_groups.get(key_of(_group_id(req)))
    if group is None:
        raise errors.not_found(GROUP_TYPE, req.params["name"], req.params["rg"])
    return group


def put_group(cloud: Cloud, req: Request) -> Response:
    """PUT (CapacityReservationGroups_CreateOrUpdate): 201 new, 200 update (tags only)."""
    body = req.json() if isinstance(req.json(), dict) else {}
    location = body.get("location")
    if not isinstance(location, str) or not location:
        raise errors.invalid_parameter(
            "Required parameter 'location' is missing (null).", "location"
        )
    rid = _group_id(req)
    existing = cloud.reservation_groups.get(key_of(rid))
    tags = body.get("tags") if isinstance(body.get("tags"), dict) else {}
    if existing is not None:
        existing.tags = tags
        return Response(200, group_body(cloud, existing, expand=False))
    zones = body.get("zones") if isinstance(body.get("zones"), list) else None
    group = CapacityReservationGroup(rid, req.params["name"], normalize_location(location), tags)
    group.zones = zones
    cloud.reservation_groups[key_of(rid)] = group
    return Response(201, group_body(cloud, group, expand=False))


def get_group(cloud: Cloud, req: Request) -> Response:
    expand = "instanceview" in req.query.get("$expand", "").lower()
    return Response(200, group_body(cloud, _group(cloud, req), expand=expand))


def delete_group(cloud: Cloud, req: Request) -> Response:
    """DELETE: 200, 204 when there is none; 409 while it holds reservations or VMs."""
    group = cloud.reservation_groups.get(key_of(_group_id(req)))
    if group is None:
        return Response(204)
    if group.reservations or associated_vms(cloud, group):
        message = (
            "Capacity reservation group cannot be deleted as it still has capacity reservations "
            "or virtual machines associated with it. Delete the capacity reservations and "
            "disassociate the virtual machines first."
        )
        raise errors.ArmError(409, "OperationNotAllowed", message)
    cloud.reservation_groups.pop(key_of(group.id))
    return Response(200)


def put_reservation(cloud: Cloud, req: Request) -> Response:
    """PUT (CapacityReservations_CreateOrUpdate): 201 new (LRO), 200 update of its capacity."""
    faults.raise_injected(cloud, "reservation.create", req.params["sub"])
    group = _group(cloud, req)
    body = req.json() if isinstance(req.json(), dict) else {}
    size, capacity = _sku(body)
    info = cloud.offered(group.location, size)
    if info is None:
        message = f"Capacity Reservation is not supported for VM size {size}."
        raise errors.ArmError(400, "NotSupported", message)
    name = req.params["child"]
    reservation = group.reservations.get(name.lower())
    created = reservation is None
    if reservation is None:
        rid = f"{group.id}/capacityReservations/{name}"
        reservation = CapacityReservation(rid, name, group.id, group.location, size, capacity)
        reservation.tags = body.get("tags") if isinstance(body.get("tags"), dict) else {}
    extra = capacity - (reservation.capacity if reservation.held else 0)
    error = _allocation_error(cloud, group.location, info, extra) if extra > 0 else None
    quota = cloud.quota_shortfall(group.location, info, max(extra, 0)) if extra > 0 else None
    if quota is not None:
        family, limit, used, needed = quota
        raise errors.quota_exceeded(req.params["sub"], family, group.location, limit, used, needed)
    group.reservations[name.lower()] = reservation
    reservation.provisioning = "Creating" if created else "Updating"
    op = cloud.start_operation(
        "PUT",
        COMPUTE,
        group.location,
        req.params["sub"],
        reservation.id,
        lambda op: _finish_put(reservation, capacity, op),
        error=error,
    )
    if error is None:
        reservation.capacity, reservation.held = capacity, True  # slots taken now
    headers = lro_headers(req, op, cloud.retry_after, location=False)
    return Response(201 if created else 200, reservation_body(cloud, reservation), headers)


def _finish_put(reservation: CapacityReservation, capacity: int, op: Operation) -> None:
    """A failed create holds nothing; a failed increase keeps what was held (Learn: "a
    reservation goes into a Failed state ... until the quantity is restored")."""
    if op.status == "Failed":
        reservation.provisioning = "Failed"
        return
    reservation.provisioning = "Succeeded"
    reservation.capacity, reservation.held = capacity, True


def _sku(body: dict) -> tuple[str, int]:
    sku = body.get("sku")
    name = sku.get("name") if isinstance(sku, dict) else None
    capacity = sku.get("capacity") if isinstance(sku, dict) else None
    if not isinstance(name, str) or not name:
        raise errors.invalid_parameter("Required parameter 'sku.name' is missing (null).", "sku")
    if isinstance(capacity, bool) or not isinstance(capacity, int) or not 0 <= capacity <= 1000:
        message = "The value of 'sku.capacity' must be a whole number from 0 to 1000."
        raise errors.invalid_parameter(message, "sku.capacity")
    return name, capacity


def _allocation_error(cloud: Cloud, location: str, info, count: int) -> dict | None:
    fault = cloud.take_fault("reservation.create", frozenset({"allocation_failed"}))
    if fault is not None or cloud.free_capacity(location, info.name) < count:
        return errors.allocation_failed()
    return None


def get_reservation(cloud: Cloud, req: Request) -> Response:
    expand = "instanceview" in req.query.get("$expand", "").lower()
    return Response(200, reservation_body(cloud, _reservation(cloud, req), expand=expand))


def delete_reservation(cloud: Cloud, req: Request) -> Response:
    """DELETE (CapacityReservations_Delete): 202 LRO, 204 when there is none; 409 while VMs
    are allocated to it. The slots are freed when the delete completes."""
    group = _group(cloud, req)
    reservation = group.reservations.get(req.params["child"].lower())
    if reservation is None:
        return Response(204)
    if allocated_to(cloud, reservation):
        message = (
            f"Capacity reservation '{reservation.name}' cannot be deleted while virtual machines "
            "are allocated to it. Deallocate or disassociate them first."
        )
        raise errors.ArmError(409, "OperationNotAllowed", message)
    reservation.provisioning = "Deleting"
    op = cloud.start_operation(
        "DELETE",
        COMPUTE,
        group.location,
        req.params["sub"],
        reservation.id,
        lambda op: _gone(group, reservation),
        done_status=204,
    )
    return Response(202, None, lro_headers(req, op, cloud.retry_after))


def _gone(group: CapacityReservationGroup, reservation: CapacityReservation) -> None:
    reservation.held = False
    group.reservations.pop(reservation.name.lower(), None)


def _reservation(cloud: Cloud, req: Request) -> CapacityReservation:
    reservation = _group(cloud, req).reservations.get(req.params["child"].lower())
    if reservation is None:
        name = f"capacityReservationGroups/{req.params['name']}/capacityReservations/"
        raise errors.not_found("Microsoft.Compute", name + req.params["child"], req.params["rg"])
    return reservation


# --- VMs and capacity ----------------------------------------------------------------------


def group_of(vm: VM) -> str | None:
    """The id of the group a VM's properties associate it with, or None."""
    link = (vm.properties.get("capacityReservation") or {}).get("capacityReservationGroup")
    rid = link.get("id") if isinstance(link, dict) else None
    return rid if isinstance(rid, str) and rid else None


def associated_vms(cloud: Cloud, group: CapacityReservationGroup) -> list[VM]:
    return [vm for vm in cloud.vms.values() if key_of(group_of(vm) or "") == key_of(group.id)]


def associated_of_size(cloud: Cloud, reservation: CapacityReservation) -> list[VM]:
    """The VMs associated with the reservation's group that are of its size, allocated or not."""
    group = cloud.reservation_groups.get(key_of(reservation.group_id))
    if group is None:
        return []
    size = reservation.size.lower()
    return [v for v in associated_vms(cloud, group) if v.size.lower() == size]


def allocated_to(cloud: Cloud, reservation: CapacityReservation) -> list[VM]:
    """The allocated VMs of the reservation's group and size, at most its capacity (those
    beyond it are overallocated: they hold a slot of the region like any VM)."""
    vms = [v for v in associated_of_size(cloud, reservation) if v.allocated]
    return vms[: reservation.capacity]


def unused_reserved(cloud: Cloud, location: str, size: str) -> int:
    """Reserved instances of `size` in `location` no VM uses: they hold slots all the same."""
    loc, wanted = normalize_location(location), size.lower()
    return sum(
        max(r.capacity - len(allocated_to(cloud, r)), 0)
        for g in cloud.reservation_groups.values()
        for r in g.reservations.values()
        if r.held and g.location == loc and r.size.lower() == wanted
    )


def check_reassociation(cloud: Cloud, vm: VM, properties: dict) -> None:
    """For a VM update (PATCH or PUT) whose ``properties`` name another capacity reservation
    group than the VM's (or null, to take it out of its group): Learn (capacity-reservation-
    associate-vm, -remove-vm) has the VM deallocated first, so an allocated VM is refused
    (409 OperationNotAllowed); a group that does not exist, or is in another location, is a
    400 as at create."""
    link = (properties.get("capacityReservation") or {}).get("capacityReservationGroup")
    wanted = link.get("id") if isinstance(link, dict) else None
    wanted = wanted if isinstance(wanted, str) and wanted else None
    if key_of(wanted or "") == key_of(group_of(vm) or ""):
        return
    if vm.allocated:
        message = (
            f"The capacity reservation group of virtual machine '{vm.name}' can be changed only "
            "while it is deallocated. Deallocate the virtual machine first."
        )
        raise errors.ArmError(409, "OperationNotAllowed", message)
    group = cloud.reservation_groups.get(key_of(wanted)) if wanted else None
    if wanted and (group is None or group.location != vm.location):
        message = (
            f"Capacity reservation group '{wanted}' was not found in location '{vm.location}'."
        )
        raise errors.invalid_parameter(message, "capacityReservation.capacityReservationGroup")


def checked_association(cloud: Cloud, vm: VM) -> bool:
    """For a VM being created: whether a reservation of its group takes it (reserved_for).
    Raises 400 when it names a group that does not exist, or one in another location."""
    rid = group_of(vm)
    if rid is None:
        return False
    group = cloud.reservation_groups.get(key_of(rid))
    if group is None or group.location != vm.location:
        message = f"Capacity reservation group '{rid}' was not found in location '{vm.location}'."
        raise errors.invalid_parameter(message, "capacityReservation.capacityReservationGroup")
    return reserved_for(cloud, vm)


def reserved_for(cloud: Cloud, vm: VM) -> bool:
    """Whether an unused instance of a reservation in the VM's group can take the VM."""
    group = cloud.reservation_groups.get(key_of(group_of(vm) or ""))
    if group is None or group.location != vm.location:
        return False
    size = vm.size.lower()
    return any(
        r.held and r.size.lower() == size and len(allocated_to(cloud, r)) < r.capacity
        for r in group.reservations.values()
    )


# --- bodies --------------------------------------------------------------------------------


def reservation_body(cloud: Cloud, r: CapacityReservation, expand: bool = False) -> dict:
    properties: dict = {
        "platformFaultDomainCount": 3,
        "reservationId": r.reservation_id,
        "provisioningState": r.provisioning,
        "provisioningTime": iso(r.created),
        "timeCreated": iso(r.created),
        "virtualMachinesAssociated": [{"id": v.id} for v in associated_of_size(cloud, r)],
    }
    if expand:
        properties["instanceView"] = {
            "utilizationInfo": {
                "currentCapacity": r.capacity,
                "virtualMachinesAllocated": [{"id": v.id} for v in allocated_to(cloud, r)],
            },
            "statuses": [
                {
                    "code": f"ProvisioningState/{r.provisioning.lower()}",
                    "level": "Info",
                    "displayStatus": f"Provisioning {r.provisioning.lower()}",
                }
            ],
        }
    return {
        "name": r.name,
        "id": r.id,
        "type": RESERVATION_TYPE,
        "location": r.location,
        "tags": dict(r.tags),
        "sku": {"name": r.size, "capacity": r.capacity},
        "properties": properties,
    }


def group_body(cloud: Cloud, group: CapacityReservationGroup, expand: bool) -> dict:
    properties: dict = {
        "capacityReservations": [{"id": r.id} for r in group.reservations.values()],
        "virtualMachinesAssociated": [{"id": v.id} for v in associated_vms(cloud, group)],
    }
    if expand:
        properties["instanceView"] = {
            "capacityReservations": [
                {"name": r.name, **reservation_body(cloud, r, True)["properties"]["instanceView"]}
                for r in group.reservations.values()
            ]
        }
    body = {
        "name": group.name,
        "id": group.id,
        "type": GROUP_TYPE,
        "location": group.location,
        "tags": dict(group.tags),
        "properties": properties,
    }
    if group.zones:
        body["zones"] = list(group.zones)
    return body
