"""Microsoft.Compute/virtualMachines: PUT, GET, list, instanceView, start/deallocate/powerOff,
DELETE (Spot properties and evictions: spot.py).

Power and provisioning states move through an LRO: the request sets the transitional state
(Creating/Updating/Deleting, starting/deallocating/stopping) and the operation's completion
sets the final one.
"""

import copy
import dataclasses
from dataclasses import dataclass

from . import disks, errors, faults, quirks, reservations, spot, views, vm_resize
from .cloud import Cloud
from .errors import ArmError
from .extensions import image_carries_driver
from .models import COMPUTE, SPOT_PRIORITIES, VM, key_of, resource_id
from .protocol import Request, Response, dig, lro_headers
from .skus import SizeInfo, image_generation, normalize_location


@dataclass
class VmSpec:
    """What a PUT body asks for; location is normalised ("eastus")."""

    location: str
    size: str
    tags: dict
    properties: dict
    nic_refs: list[dict]
    custom_data: str | None
    zones: list | None


def _vm_id(req: Request) -> str:
    return resource_id(req.params["sub"], req.params["rg"], views.VM_TYPE, req.params["name"])


def _require(cloud: Cloud, req: Request) -> VM:
    vm = cloud.vm(_vm_id(req))
    if vm is None:
        raise errors.not_found(views.VM_TYPE, req.params["name"], req.params["rg"])
    return vm


def _ensure_idle(cloud: Cloud, vm: VM, verb: str) -> None:
    # Azure serialises operations on one VM: a second one while the first runs is a 409.
    running = cloud.busy_with(vm.active_op)
    if running is not None:
        raise errors.conflict(verb, running.name, vm.name)


def _start_op(cloud: Cloud, vm: VM, verb: str, error, apply, done_status: int = 200):
    op = cloud.start_operation(
        verb,
        COMPUTE,
        vm.location,
        vm.subscription,
        vm.id,
        apply,
        error=error,
        done_status=done_status,
    )
    vm.active_op = op.id
    return op


def _parse_spec(body: dict) -> VmSpec:
    """Validation step 1: location, vmSize and at least one NIC reference."""
    location, size = body.get("location"), dig(body, "properties", "hardwareProfile", "vmSize")
    if not isinstance(location, str) or not location.strip():
        raise errors.invalid_parameter(
            "Required parameter 'location' is missing (null).", "location"
        )
    if not isinstance(size, str) or not size.strip():
        message = "Required parameter 'hardwareProfile.vmSize' is missing (null)."
        raise errors.invalid_parameter(message, "vmSize")
    refs = dig(body, "properties", "networkProfile", "networkInterfaces")
    if not isinstance(refs, list) or not refs:
        message = "Required parameter 'networkProfile.networkInterfaces' is missing (null)."
        raise errors.invalid_parameter(message, "networkInterfaces")
    if not all(isinstance(r, dict) and isinstance(r.get("id"), str) for r in refs):
        raise errors.invalid_parameter("Network interface references need an 'id'.", "id")
    _require_objects(body["properties"])
    properties = copy.deepcopy(body["properties"])
    properties.pop("instanceView", None)  # Read-only: never taken from the client.
    spot.check_spot(properties)
    os_profile = (
        properties.get("osProfile") if isinstance(properties.get("osProfile"), dict) else {}
    )
    _require_linux_login(os_profile)
    custom_data = os_profile.pop("customData", None)  # Write-only in Azure: never echoed.
    # A VM on an attached OS disk takes no osProfile: its cloud-config comes as userData,
    # which Azure answers only to $expand=userData (not played: it is left out here).
    user_data = properties.pop("userData", None)
    custom_data = custom_data or user_data
    os_profile.pop("adminPassword", None)
    tags = body.get("tags") if isinstance(body.get("tags"), dict) else {}
    zones = body.get("zones") if isinstance(body.get("zones"), list) else None
    return VmSpec(normalize_location(location), size, tags, properties, refs, custom_data, zones)


def _require_linux_login(os_profile: dict) -> None:
    """Azure refuses a Linux VM nobody could log in to: password login disabled and no SSH
    public key (ARM's InvalidParameter on linuxConfiguration)."""
    linux = os_profile.get("linuxConfiguration")
    if not isinstance(linux, dict) or not linux.get("disablePasswordAuthentication"):
        return
    keys = (
        (linux.get("ssh") or {}).get("publicKeys") if isinstance(linux.get("ssh"), dict) else None
    )
    if not any(isinstance(k, dict) and k.get("keyData") for k in keys or []):
        raise errors.invalid_parameter(
            "Authentication using either SSH or by user name and password must be enabled in "
            "Linux profile.",
            "linuxConfiguration",
        )


def _require_objects(properties: dict) -> None:
    # Sub-objects we read must be JSON objects; anything else is the client's error, not a 500.
    paths = [("storageProfile",), ("osProfile",), ("networkProfile",), ("hardwareProfile",)]
    paths += [("storageProfile", "osDisk"), ("storageProfile", "imageReference")]
    paths += [("storageProfile", "osDisk", "managedDisk"), ("osProfile", "linuxConfiguration")]
    for path in paths:
        value = dig(properties, *path)
        if value is not None and not isinstance(value, dict):
            raise errors.invalid_parameter(f"'{'.'.join(path)}' must be an object.", path[-1])
    for ref in dig(properties, "networkProfile", "networkInterfaces") or []:
        if ref.get("properties") is not None and not isinstance(ref["properties"], dict):
            raise errors.invalid_parameter(
                "Network interface 'properties' must be an object.", "id"
            )


def _check_nics(cloud: Cloud, spec: VmSpec, owner: VM | None) -> None:
    """Validation step 2: every NIC exists and no other VM uses it."""
    for ref in spec.nic_refs:
        nic = cloud.nic(ref["id"])
        if nic is None or nic.provisioning == "Deleting":
            message = f"Resource {ref['id']} was not found."
            raise errors.invalid_parameter(message, "networkProfile.networkInterfaces")
        if nic.vm_id and (owner is None or key_of(nic.vm_id) != key_of(owner.id)):
            message = (
                f"Network Interface {nic.id} is used by existing resource {nic.vm_id}. "
                "A network interface can be attached to only one virtual machine."
            )
            raise ArmError(400, "NicInUse", message)


def _offered_size(cloud: Cloud, spec: VmSpec) -> SizeInfo:
    """Validation step 3: the size is offered in the location and not restricted."""
    info = cloud.offered(spec.location, spec.size)
    if info is None:
        raise errors.sku_not_available(spec.size, spec.location)
    return info


def _bind_nics(cloud: Cloud, vm: VM, refs: list[dict]) -> None:
    # Release NICs the VM no longer lists, then mark the listed ones as used by it.
    wanted = [key_of(r["id"]) for r in refs]
    for nic_id in vm.nic_ids:
        nic = cloud.nic(nic_id)
        if nic is not None and key_of(nic_id) not in wanted:
            nic.vm_id = None
    vm.nic_ids = [cloud.nic(r["id"]).id for r in refs]
    for nic_id in vm.nic_ids:
        cloud.nic(nic_id).vm_id = vm.id


def _finish_boot(vm: VM, op) -> None:
    """End of create/update/start: Succeeded and running, or Failed (deallocated if no slot)."""
    if op.error:
        vm.provisioning, vm.last_error = "Failed", op.error
        if not vm.allocated:
            vm.power = "deallocated"
        return
    vm.provisioning, vm.last_error = "Succeeded", None
    if vm.power == "starting":
        vm.power = "running"


def put_vm(cloud: Cloud, req: Request) -> Response:
    """PUT: 201 (create) or 200 (update) with the VM body and an Azure-AsyncOperation header."""
    body = req.json()
    vm = cloud.vm(_vm_id(req))
    size = dig(body, "properties", "hardwareProfile", "vmSize")
    faults.raise_injected(
        cloud,
        "vm.update" if vm else "vm.create",
        req.params["sub"],
        str(body.get("location") or (vm.location if vm else "")),
        str(size or ""),
        spot=_asks_spot(body),
    )
    if vm is not None:
        _ensure_idle(cloud, vm, "PUT")
    spec = _parse_spec(body)
    _check_nics(cloud, spec, vm)
    if vm is not None:
        return _update(cloud, req, vm, spec)
    return _create(cloud, req, spec)


def _asks_spot(body: dict) -> bool:
    # Read before validation (injected faults come first), so any casing of Spot or Low.
    priority = dig(body, "properties", "priority")
    return isinstance(priority, str) and priority.title() in SPOT_PRIORITIES


def _new_vm(req: Request, spec: VmSpec, size: SizeInfo) -> VM:
    sub, rg, name = req.params["sub"], req.params["rg"], req.params["name"]
    disk_name = disks.os_disk_name(spec.properties, name)
    return VM(
        id=_vm_id(req),
        name=name,
        subscription=sub,
        resource_group=rg,
        location=spec.location,
        size=size.name,
        tags=spec.tags,
        properties=spec.properties,
        custom_data=spec.custom_data,
        nic_ids=[],
        os_disk_name=disk_name,
        disk_id=resource_id(sub, rg, views.DISK_TYPE, disk_name),
        zones=spec.zones,
    )


def _check_boot(spec: VmSpec, size: SizeInfo, disk_name: str) -> None:
    """Validation step 3b: the image's Hyper-V generation is one the size boots and a
    Premium_LRS OS disk goes only on a size with PremiumIO (its resource SKU's capabilities)."""
    image = dig(spec.properties, "storageProfile", "imageReference") or {}
    generation = image_generation(image)
    if generation is not None and generation not in size.generations:
        raise errors.generation_mismatch(size.name, generation)
    disk_sku = dig(spec.properties, "storageProfile", "osDisk", "managedDisk", "storageAccountType")
    if str(disk_sku or "").lower() == "premium_lrs" and not size.premium_io:
        raise errors.premium_storage_unsupported(size.name, disk_name)


def _create(cloud: Cloud, req: Request, spec: VmSpec) -> Response:
    size = _offered_size(cloud, spec)
    attached = None
    if disks.attaches(spec.properties):
        attached = disks.disk_to_attach(cloud, spec.properties, req.params["rg"])
    _check_boot(spec, size, disks.os_disk_name(spec.properties, req.params["name"]))
    spot = spec.properties.get("priority") in SPOT_PRIORITIES
    cloud.check_quota(req.params["sub"], spec.location, size, spot=spot)  # Validation step 4.
    vm = _new_vm(req, spec, size)
    image = attached.image if attached else dig(spec.properties, "storageProfile", "imageReference")
    vm.driver = image_carries_driver(image or {})
    if attached is not None:
        disks.attach_os_disk(vm, attached)
    else:
        disks.ensure_name_free(cloud, vm)
    reserved = reservations.checked_association(cloud, vm)
    error = faults.allocation_error(cloud, "vm.create", vm.location, size.name, reserved=reserved)
    vm.allocated = error is None  # The slot is taken now, so concurrent creates see it.
    cloud.vms[key_of(vm.id)] = vm
    _bind_nics(cloud, vm, spec.nic_refs)
    if attached is None:
        disks.create_os_disk(cloud, vm)
    op = _start_op(cloud, vm, "PUT", error, lambda op: _finish_boot(vm, op))
    headers = quirks.create_headers(cloud, req, op, "vm.create")
    return Response(201, views.vm_body(cloud, vm), headers)


def _update(cloud: Cloud, req: Request, vm: VM, spec: VmSpec) -> Response:
    """Same VM, same disk, no new quota; resizing or retrying a failed allocation needs a slot.
    A resize is checked against the quota the VM counts toward (Spot or family and regional),
    and, while the VM is allocated, against its hardware cluster (cloudsim.vm_resize)."""
    size = cloud.catalog.get(vm.location, vm.size)
    if spec.size.lower() != vm.size.lower():
        size = _offered_size(cloud, dataclasses.replace(spec, location=vm.location))
        vm_resize.check_hardware_cluster(cloud, vm, size)
        spot = spec.properties.get("priority") in SPOT_PRIORITIES
        cloud.check_quota(vm.subscription, vm.location, size, exclude=vm, spot=spot)
    resizing = size.name != vm.size
    needs_slot = (resizing and vm.allocated) or (vm.wants_running and not vm.allocated)
    error = (
        faults.allocation_error(cloud, "vm.update", vm.location, size.name) if needs_slot else None
    )
    if error is None:
        vm.size = size.name
        if needs_slot and not vm.allocated:
            vm.allocated, vm.power = True, "starting"
    vm.tags, vm.zones = spec.tags, spec.zones or vm.zones
    vm.properties = spec.properties
    vm.custom_data = spec.custom_data if spec.custom_data is not None else vm.custom_data
    _bind_nics(cloud, vm, spec.nic_refs)
    vm.provisioning = "Updating"
    op = _start_op(cloud, vm, "PUT", error, lambda op: _finish_boot(vm, op))
    headers = lro_headers(req, op, cloud.retry_after, location=False)
    return Response(200, views.vm_body(cloud, vm), headers)


def patch_vm(cloud: Cloud, req: Request) -> Response:
    """PATCH (VirtualMachines_Update): what the body gives (tags, properties such as
    hardwareProfile.vmSize) merged into the VM, then validated as a PUT of the whole VM: 200
    with the VM body and an Azure-AsyncOperation header. 404 for a VM that does not exist."""
    body = req.json()
    vm = _require(cloud, req)
    size = dig(body, "properties", "hardwareProfile", "vmSize")
    faults.raise_injected(
        cloud, "vm.update", req.params["sub"], vm.location, str(size or vm.size), spot=vm.spot
    )
    _ensure_idle(cloud, vm, "PATCH")
    given = body.get("properties") or {}
    if not isinstance(given, dict):
        raise errors.invalid_parameter("'properties' must be an object.", "properties")
    properties = copy.deepcopy(vm.properties)
    for key, value in given.items():
        if isinstance(value, dict) and isinstance(properties.get(key), dict):
            properties[key] = {**properties[key], **value}
        else:
            properties[key] = value
    reservations.check_reassociation(cloud, vm, properties)
    whole = {"location": vm.location, "tags": body.get("tags", vm.tags), "properties": properties}
    whole["properties"].setdefault("hardwareProfile", {}).setdefault("vmSize", vm.size)
    return _update(cloud, req, vm, _parse_spec(whole))


def get_vm(cloud: Cloud, req: Request) -> Response:
    """GET: the VM; `$expand=instanceView` adds properties.instanceView."""
    faults.raise_injected(cloud, "vm.get")
    vm = _require(cloud, req)
    expand = "instanceview" in req.query.get("$expand", "").lower()
    return Response(200, views.vm_body(cloud, vm, expand))


def list_vms(cloud: Cloud, req: Request) -> Response:
    """GET /subscriptions/{sub}/providers/Microsoft.Compute/virtualMachines (VirtualMachines_
    ListAll): {"value": [VirtualMachine]}, one page. ``statusOnly=true`` (or
    ``$expand=instanceView``) adds each VM's properties.instanceView, its run-time status."""
    faults.raise_injected(cloud, "vm.list", req.params["sub"])
    status = req.query.get("statusonly", "").lower() == "true"
    status = status or "instanceview" in req.query.get("$expand", "").lower()
    sub = req.params["sub"].lower()
    value = [
        views.vm_body(cloud, vm, status)
        for vm in cloud.vms.values()
        if vm.subscription.lower() == sub
    ]
    return Response(200, {"value": value})


def get_instance_view(cloud: Cloud, req: Request) -> Response:
    """GET .../instanceView: statuses with ProvisioningState/* and PowerState/* codes."""
    faults.raise_injected(cloud, "vm.get")
    return Response(200, views.instance_view(cloud, _require(cloud, req)))


def _prepare_action(cloud: Cloud, req: Request, op: str, verb: str) -> VM:
    vm = cloud.vm(_vm_id(req))
    where, size = (vm.location, vm.size) if vm else ("", "")
    faults.raise_injected(cloud, op, req.params["sub"], where, size, spot=bool(vm and vm.spot))
    if vm is None:
        raise errors.not_found(views.VM_TYPE, req.params["name"], req.params["rg"])
    _ensure_idle(cloud, vm, verb)
    vm.provisioning = "Updating"
    return vm


def start_vm(cloud: Cloud, req: Request) -> Response:
    """POST .../start: 202 LRO; a deallocated VM needs a capacity slot again."""
    vm = _prepare_action(cloud, req, "vm.start", "Start")
    vm.wants_running = True
    error = None
    if not vm.allocated:
        reserved = reservations.reserved_for(cloud, vm)
        error = faults.allocation_error(cloud, "vm.start", vm.location, vm.size, reserved=reserved)
        vm.allocated = error is None
    if vm.power != "running":
        vm.power = "starting"
    op = _start_op(cloud, vm, "Start", error, lambda op: _finish_boot(vm, op))
    return Response(202, None, lro_headers(req, op, cloud.retry_after))


def _finish_deallocate(vm: VM) -> None:
    vm.allocated, vm.power = False, "deallocated"
    vm.provisioning, vm.last_error = "Succeeded", None


def deallocate_vm(cloud: Cloud, req: Request) -> Response:
    """POST .../deallocate: 202 LRO; frees the capacity slot when it completes."""
    vm = _prepare_action(cloud, req, "vm.deallocate", "Deallocate")
    vm.wants_running = False
    if vm.allocated:
        vm.power = "deallocating"
    op = _start_op(cloud, vm, "Deallocate", None, lambda op: _finish_deallocate(vm))
    return Response(202, None, lro_headers(req, op, cloud.retry_after))


def _finish_power_off(vm: VM) -> None:
    if vm.allocated:
        vm.power = "stopped"  # Stopped but still allocated: keeps its slot, as in Azure.
    vm.provisioning, vm.last_error = "Succeeded", None


def power_off_vm(cloud: Cloud, req: Request) -> Response:
    """POST .../powerOff: 202 LRO; the VM stops but stays allocated (and billed)."""
    vm = _prepare_action(cloud, req, "vm.powerOff", "PowerOff")
    vm.wants_running = False
    if vm.allocated:
        vm.power = "stopping"
    op = _start_op(cloud, vm, "PowerOff", None, lambda op: _finish_power_off(vm))
    return Response(202, None, lro_headers(req, op, cloud.retry_after))


def remove_vm(cloud: Cloud, vm: VM) -> None:
    """Remove the VM; free its NICs (deleting those marked Delete) and its disk likewise."""
    cloud.vms.pop(key_of(vm.id), None)
    for ref in dig(vm.properties, "networkProfile", "networkInterfaces") or []:
        nic = cloud.nic(ref.get("id", "")) if isinstance(ref, dict) else None
        if nic is None or nic.vm_id is None or key_of(nic.vm_id) != key_of(vm.id):
            continue
        nic.vm_id = None
        if str(dig(ref, "properties", "deleteOption")).lower() == "delete":
            cloud.nics.pop(key_of(nic.id), None)
    disks.release_os_disk(cloud, vm)


def delete_vm(cloud: Cloud, req: Request) -> Response:
    """DELETE: 202 LRO, or 204 when there is no such VM."""
    vm = cloud.vm(_vm_id(req))
    faults.raise_injected(cloud, "vm.delete")
    if vm is None:
        return Response(204)
    _ensure_idle(cloud, vm, "Delete")
    vm.provisioning = "Deleting"
    if vm.allocated:
        vm.power = "deallocating"
    op = _start_op(cloud, vm, "Delete", None, lambda op: remove_vm(cloud, vm), 204)
    return Response(202, None, lro_headers(req, op, cloud.retry_after))
