"""Azure Spot VMs: the priority / evictionPolicy / billingProfile properties and evictions.

Validation follows Azure's error table for Spot VMs ("Error messages for Azure Spot Virtual
Machines and scale sets", learn.microsoft.com): an eviction policy or a max price on a VM that
is not Spot is refused with EvictionPolicyCanBeSetOnlyOnAzureSpotVirtualMachines or
MaxPriceIsSupportedOnlyForAzureSpotVirtualMachines, a max price other than -1 or a positive
number with MaxPriceValueInvalid. A Spot VM's GET shows Azure's defaults (evictionPolicy
Deallocate, billingProfile.maxPrice -1) when the PUT left them out.

An eviction is what Azure does when it needs the capacity back: a running Spot VM with
evictionPolicy Deallocate is deallocated (OS disk and NIC kept, capacity slot freed), so its
instance view says PowerState/deallocated; with Delete the VM itself goes. It is triggered by
``POST .../virtualMachines/{name}/simulateEviction`` (ARM, 204) or the control API.
"""

import time

from . import errors, views
from .cloud import Cloud
from .errors import ArmError
from .models import SPOT_PRIORITIES, VM
from .protocol import Request, Response, dig

PRIORITIES = {"regular": "Regular", "low": "Low", "spot": "Spot"}
EVICTION_POLICIES = {"deallocate": "Deallocate", "delete": "Delete"}


def _spot_error(code: str, message: str, target: str) -> ArmError:
    return ArmError(400, code, message, target=target)


def _choice(properties: dict, name: str, allowed: dict) -> str | None:
    value = properties.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or value.lower() not in allowed:
        choices = ", ".join(allowed.values())
        message = f"The value '{value}' of parameter '{name}' is not valid. Allowed: {choices}."
        raise errors.invalid_parameter(message, name)
    return allowed[value.lower()]


def check_spot(properties: dict) -> None:
    """Validate a VM PUT's Spot properties as Azure does (400 with Azure's codes), then write
    them back with Azure's casing and, for a Spot VM, Azure's defaults."""
    priority = _choice(properties, "priority", PRIORITIES)
    policy = _choice(properties, "evictionPolicy", EVICTION_POLICIES)
    billing = properties.get("billingProfile")
    if billing is not None and not isinstance(billing, dict):
        raise errors.invalid_parameter("'billingProfile' must be an object.", "billingProfile")
    max_price = dig(properties, "billingProfile", "maxPrice")
    spot = priority in SPOT_PRIORITIES
    if policy is not None and not spot:
        raise _spot_error(
            "EvictionPolicyCanBeSetOnlyOnAzureSpotVirtualMachines",
            "Eviction policy can be set only on Azure Spot Virtual Machines.",
            "evictionPolicy",
        )
    if max_price is not None:
        _check_max_price(max_price, spot)
    if priority is not None:
        properties["priority"] = priority
    if spot:
        properties["evictionPolicy"] = policy or "Deallocate"
        properties["billingProfile"] = {"maxPrice": -1 if max_price is None else max_price}


def _check_max_price(max_price, spot: bool) -> None:
    if not spot:
        raise _spot_error(
            "MaxPriceIsSupportedOnlyForAzureSpotVirtualMachines",
            "Max price is supported only for Azure Spot Virtual Machines.",
            "billingProfile.maxPrice",
        )
    number = isinstance(max_price, int | float) and not isinstance(max_price, bool)
    if not number or (max_price != -1 and max_price <= 0):
        raise _spot_error(
            "MaxPriceValueInvalid",
            "Invalid max price value. The only supported values for max price are -1 or a "
            "decimal greater than zero. Max price value of -1 indicates the Azure Spot Virtual "
            "Machine will not be evicted for price reasons.",
            "billingProfile.maxPrice",
        )


def is_spot(vm: VM) -> bool:
    return vm.spot


def evict(cloud: Cloud, vm: VM) -> str:
    """Evict a running Spot VM now; returns what happened to it ("deallocated" or "deleted").

    Raises 409 OperationNotAllowed for a VM that is not Spot or holds no capacity (already
    deallocated), and 409 Conflict while another operation runs on it."""
    if not is_spot(vm):
        message = (
            f"Operation 'simulateEviction' is not allowed on VM '{vm.name}' since it is not an "
            "Azure Spot Virtual Machine."
        )
        raise ArmError(409, "OperationNotAllowed", message)
    running = cloud.busy_with(vm.active_op)
    if running is not None:
        raise errors.conflict("simulateEviction", running.name, vm.name)
    if not vm.allocated:
        message = (
            f"Operation 'simulateEviction' is not allowed on VM '{vm.name}' since it is "
            "deallocated and has nothing to evict."
        )
        raise ArmError(409, "OperationNotAllowed", message)
    if vm.properties.get("evictionPolicy") == "Delete":
        from .vms import remove_vm

        remove_vm(cloud, vm)
        return "deleted"
    vm.allocated, vm.power, vm.wants_running = False, "deallocated", False
    vm.provisioning, vm.last_error, vm.evicted_at = "Succeeded", None, time.time()
    return "deallocated"


def simulate_eviction(cloud: Cloud, req: Request) -> Response:
    """POST .../virtualMachines/{name}/simulateEviction: 204, the VM evicted at once."""
    rid = f"/subscriptions/{req.params['sub']}/resourceGroups/{req.params['rg']}/providers/"
    vm = cloud.vm(f"{rid}{views.VM_TYPE}/{req.params['name']}")
    if vm is None:
        raise errors.not_found(views.VM_TYPE, req.params["name"], req.params["rg"])
    evict(cloud, vm)
    return Response(204)
