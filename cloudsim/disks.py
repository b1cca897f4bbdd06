"""Microsoft.Compute/disks: the OS disks VMs create, GET and DELETE."""

import uuid

from . import errors, faults, views
from .cloud import Cloud
from .errors import ArmError
from .models import COMPUTE, VM, Disk, key_of, resource_id
from .protocol import Request, Response, dig, lro_headers

DEFAULT_OS_DISK_GB = 30


def os_disk_name(properties: dict, vm_name: str) -> str:
    """osDisk.name from the request, or the name Azure generates ("{vm}_OsDisk_1_{hex}")."""
    name = dig(properties, "storageProfile", "osDisk", "name")
    if isinstance(name, str) and name.strip():
        return name
    return f"{vm_name}_OsDisk_1_{uuid.uuid4().hex}"


def ensure_name_free(cloud: Cloud, vm: VM) -> None:
    """A FromImage create cannot reuse the name of a disk that already exists."""
    if cloud.disk(vm.disk_id) is not None:
        message = (
            f"Disk {vm.os_disk_name} already exists in resource group "
            f"{vm.resource_group.upper()}. Only CreateOption.Attach is supported."
        )
        raise ArmError(409, "ConflictingUserInput", message)


def attaches(properties: dict) -> bool:
    """Whether the VM boots from an existing disk (osDisk createOption Attach)."""
    option = dig(properties, "storageProfile", "osDisk", "createOption")
    return str(option or "").lower() == "attach"


def disk_to_attach(cloud: Cloud, properties: dict, rg: str) -> Disk:
    """The disk an Attach create names, checked as Azure does: no imageReference and no
    osProfile (400 InvalidParameter: the disk's OS is set up), osType given, managedDisk.id
    a disk that exists (404 NotFound) and no VM holds (409 OperationNotAllowed)."""
    for part in ("imageReference", "osProfile"):
        where = properties.get("storageProfile", {}) if part == "imageReference" else properties
        if where.get(part) is not None:
            message = f"Parameter '{part}' is not allowed with an attached OS disk."
            raise errors.invalid_parameter(message, part)
    os_disk = dig(properties, "storageProfile", "osDisk") or {}
    if not os_disk.get("osType"):
        message = "Required parameter 'osDisk.osType' is missing (null)."
        raise errors.invalid_parameter(message, "osType")
    disk_id = str(dig(os_disk, "managedDisk", "id") or "")
    disk = cloud.disk("/" + disk_id.lstrip("/")) if disk_id else None
    if disk is None:
        raise errors.not_found(views.DISK_TYPE, disk_id.rsplit("/", 1)[-1] or "(none)", rg)
    if disk.managed_by:
        message = f"Disk {disk.name} is attached to VM {disk.managed_by}."
        raise ArmError(409, "OperationNotAllowed", message)
    return disk


def attach_os_disk(vm: VM, disk: Disk) -> None:
    """The VM boots from ``disk``: its OS disk from now on, deleted or detached with it."""
    vm.disk_id, vm.os_disk_name = disk.id, disk.name
    disk.managed_by = vm.id


def create_os_disk(cloud: Cloud, vm: VM) -> Disk:
    """Create the VM's OS disk, attached to it (size in GiB from osDisk.diskSizeGB or 30)."""
    os_disk = dig(vm.properties, "storageProfile", "osDisk") or {}
    size = os_disk.get("diskSizeGB") if isinstance(os_disk, dict) else None
    image = dig(vm.properties, "storageProfile", "imageReference")
    disk = Disk(
        id=vm.disk_id,
        name=vm.os_disk_name,
        resource_group=vm.resource_group,
        location=vm.location,
        storage_type=str(dig(os_disk, "managedDisk", "storageAccountType") or "Standard_LRS"),
        size_gb=size if type(size) is int and size > 0 else DEFAULT_OS_DISK_GB,
        image=image if isinstance(image, dict) else {},
        managed_by=vm.id,
    )
    cloud.disks[key_of(disk.id)] = disk
    return disk


def release_os_disk(cloud: Cloud, vm: VM) -> None:
    """On VM deletion: delete the disk if osDisk.deleteOption is Delete, else detach it."""
    disk = cloud.disk(vm.disk_id)
    if disk is None:
        return
    option = dig(vm.properties, "storageProfile", "osDisk", "deleteOption")
    if str(option).lower() == "delete":
        cloud.disks.pop(key_of(disk.id), None)
    else:
        disk.managed_by = None


def _remove(cloud: Cloud, disk: Disk) -> None:
    # Only this disk: a new disk may have taken the name while the delete ran.
    if cloud.disks.get(key_of(disk.id)) is disk:
        del cloud.disks[key_of(disk.id)]


def _disk_id(req: Request) -> str:
    return resource_id(req.params["sub"], req.params["rg"], views.DISK_TYPE, req.params["name"])


def get_disk(cloud: Cloud, req: Request) -> Response:
    """GET: the disk, or 404 ResourceNotFound."""
    disk = cloud.disk(_disk_id(req))
    if disk is None:
        raise errors.not_found(views.DISK_TYPE, req.params["name"], req.params["rg"])
    return Response(200, views.disk_body(cloud, disk))


def delete_disk(cloud: Cloud, req: Request) -> Response:
    """DELETE: 202 LRO, 204 when absent, 409 OperationNotAllowed while attached to a VM."""
    faults.raise_injected(cloud, "disk.delete")
    disk = cloud.disk(_disk_id(req))
    if disk is None:
        return Response(204)
    if disk.managed_by:
        message = f"Disk {disk.name} is attached to VM {disk.managed_by}."
        raise ArmError(409, "OperationNotAllowed", message)
    op = cloud.start_operation(
        "Delete",
        COMPUTE,
        disk.location,
        req.params["sub"],
        disk.id,
        lambda op: _remove(cloud, disk),
        done_status=204,
    )
    return Response(202, None, lro_headers(req, op, cloud.retry_after))


def patch_disk(cloud: Cloud, req: Request) -> Response:
    """PATCH (Disks_Update): replaces the disk's tags with the body's ``tags``, answered at
    once with 200 and the disk, as Azure does for a tags-only update; 404 when absent, 400
    InvalidRequestContent for tags that are not an object of strings."""
    faults.raise_injected(cloud, "disk.update")
    disk = cloud.disk(_disk_id(req))
    if disk is None:
        raise errors.not_found(views.DISK_TYPE, req.params["name"], req.params["rg"])
    tags = req.json().get("tags")
    if tags is not None:
        if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
            raise errors.invalid_content("tags must be an object of strings")
        disk.tags = dict(tags)
    return Response(200, views.disk_body(cloud, disk))
