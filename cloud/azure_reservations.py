"""On-demand capacity reservations through azure-mgmt-compute's
``capacity_reservation_groups`` and ``capacity_reservations``: a group per booking, a
reservation of N instances of one VM size in it, VMs created into the group
(cloud.azure_vm.VmSpec.capacity_reservation_group).

Facts (learn.microsoft.com/azure/virtual-machines/capacity-reservation-overview): a reservation
holds its instances from its create until its delete, "charged at the same rate as the
underlying VM size" whether VMs use them or not, and counts against the regional vCPU quota; a
VM associated with the group takes an unused instance, beyond them it is "overallocated" and
allocated as any VM (capacity-reservation-overallocate). A reservation with VMs allocated to
it, or a group with reservations or VMs, cannot be deleted (capacity-reservation-modify).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.compute.models import CapacityReservationGroup

from .azure_vm import _SendOnly
from .clients import AzureSettings, compute_client
from .errors import azure_errors


@dataclass(frozen=True)
class ReservationState:
    """A capacity reservation as Azure reports it: provisioning_state ("Creating",
    "Updating", "Succeeded", "Failed", "Deleting"), the instances reserved, and the names of
    the VMs allocated to them (instanceView.utilizationInfo)."""

    name: str
    vm_size: str
    capacity: int
    provisioning_state: str
    allocated_vms: tuple[str, ...]

    @property
    def succeeded(self) -> bool:
        return self.provisioning_state.lower() == "succeeded"

    @property
    def failed(self) -> bool:
        return self.provisioning_state.lower() == "failed"


def group_ensure(azure: AzureSettings, *, name: str, location: str, tags: dict[str, str]) -> str:
    """Create (or update the tags of) the capacity reservation group ``name``; its id.
    Raises CloudError."""
    body = CapacityReservationGroup(location=location, tags=dict(tags))
    with azure_errors():
        groups = compute_client(azure).capacity_reservation_groups
        group = groups.create_or_update(azure.resource_group, name, body)
    return str(group.id)


def group_id(azure: AzureSettings, *, name: str) -> str:
    """The ARM id of the capacity reservation group ``name`` (what a VM names to join it)."""
    return (
        f"/subscriptions/{azure.subscription_id}/resourceGroups/{azure.resource_group}"
        f"/providers/Microsoft.Compute/capacityReservationGroups/{name}"
    )


def group_delete(azure: AzureSettings, *, name: str) -> None:
    """Send the group's DELETE without waiting (empty: its reservations deleted, no VM
    associated). Raises CloudError (409 while it still holds reservations or VMs)."""
    with azure_errors():
        compute_client(azure).capacity_reservation_groups.begin_delete(
            azure.resource_group, name, polling=_SendOnly(azure.polling_interval)
        )


def reservation_put(
    azure: AzureSettings,
    *,
    group: str,
    name: str,
    location: str,
    vm_size: str,
    capacity: int,
    tags: dict[str, str],
) -> str:
    """Send the reservation's PUT (``capacity`` instances of ``vm_size``) without waiting; the
    LRO continuation token. Azure refuses it at once over the regional vCPU quota (409), and
    fails the LRO with AllocationFailed when the region has no room: read reservation_get.
    Raises CloudError."""
    body = {
        "location": location,
        "tags": dict(tags),
        "sku": {"name": vm_size, "capacity": capacity},
    }
    with azure_errors():
        reservations = compute_client(azure).capacity_reservations
        poller = reservations.begin_create_or_update(  # type: ignore[call-overload]  # JSON
            azure.resource_group, group, name, body, polling=_SendOnly(azure.polling_interval)
        )
        return str(poller.continuation_token())


def reservation_get(azure: AzureSettings, *, group: str, name: str) -> ReservationState | None:
    """The reservation with its utilisation, or None when there is none. Raises CloudError."""
    with azure_errors():
        try:
            found = compute_client(azure).capacity_reservations.get(
                azure.resource_group, group, name, expand="instanceView"
            )
        except ResourceNotFoundError:
            return None
    return _state(found)


def reservation_delete(azure: AzureSettings, *, group: str, name: str) -> None:
    """Send the reservation's DELETE without waiting (its instances are released when it
    ends). Raises CloudError (409 while VMs are allocated to it)."""
    with azure_errors():
        compute_client(azure).capacity_reservations.begin_delete(
            azure.resource_group, group, name, polling=_SendOnly(azure.polling_interval)
        )


def _state(found: Any) -> ReservationState:
    view = getattr(found, "instance_view", None)
    usage = getattr(view, "utilization_info", None)
    allocated = getattr(usage, "virtual_machines_allocated", None) or []
    sku = getattr(found, "sku", None)
    return ReservationState(
        name=str(found.name),
        vm_size=str(getattr(sku, "name", "") or ""),
        capacity=int(getattr(sku, "capacity", 0) or 0),
        provisioning_state=str(found.provisioning_state or ""),
        allocated_vms=tuple(str(ref.id).rsplit("/", 1)[-1] for ref in allocated),
    )


def vm_group(azure: AzureSettings, *, name: str) -> str | None:
    """The id of the capacity reservation group VM ``name`` is associated with
    (properties.capacityReservation.capacityReservationGroup.id), None for none or no such VM.
    Raises CloudError."""
    with azure_errors():
        try:
            vm = compute_client(azure).virtual_machines.get(azure.resource_group, name)
        except ResourceNotFoundError:
            return None
    profile = getattr(vm, "capacity_reservation", None)
    group = getattr(profile, "capacity_reservation_group", None)
    found = getattr(group, "id", None)
    return str(found) if found else None


def vm_associate(azure: AzureSettings, *, name: str, group: str | None) -> None:
    """Associate the deallocated VM ``name`` with the capacity reservation group ``group`` (an
    id), or with None take it out of its group, and wait for the update (seconds: nothing is
    allocated). Microsoft Learn (capacity-reservation-associate-vm, -remove-vm): a VM is
    deallocated first, then updated with ``capacityReservation.capacityReservationGroup.id``
    (null to remove it), then started. Raises CloudError (409 OperationNotAllowed for a VM
    that is allocated, 400 for a group that is not there or in another region)."""
    body: dict[str, Any] = {
        "properties": {"capacityReservation": {"capacityReservationGroup": {"id": group}}}
    }
    vms = compute_client(azure).virtual_machines
    with azure_errors():
        poller = vms.begin_update(  # type: ignore[call-overload]  # a JSON dict, sent as it is
            azure.resource_group, name, body, polling_interval=azure.polling_interval
        )
        poller.result()
