"""Resizing a VM as Azure allows it: the sizes a VM may take (VirtualMachines_ListAvailableSizes,
``GET .../virtualMachines/{vm}/vmSizes``) and the hardware-cluster rule a PUT or PATCH of a new
``hardwareProfile.vmSize`` is held to.

Azure hosts an allocated VM on one hardware cluster, which runs some sizes only: a running VM
can be resized only to a size that cluster hosts; any other needs the VM deallocated first
(https://learn.microsoft.com/azure/virtual-machines/sizes/resize-vm, "If the VM is running,
resizing it causes it to restart ... If the size you want is not listed, deallocate the VM").
Here a hardware cluster hosts the sizes of one quota family (one VM series on one GPU model);
a deallocated VM may take any size of its location, which is what ListAvailableSizes answers
then (restricted sizes included, as Azure's list does: the Resource SKUs API says which this
subscription may not deploy).
"""

from . import errors, faults, views
from .cloud import Cloud
from .errors import ArmError
from .models import VM, resource_id
from .protocol import Request, Response
from .skus import SizeInfo

RESIZE_DOCS = "https://aka.ms/azure-resizevm"


def cluster_sizes(cloud: Cloud, vm: VM) -> list[SizeInfo]:
    """The sizes the VM can take now: its hardware cluster's (its family in its location)
    while allocated, else every size of its location."""
    sizes = cloud.catalog.in_location(vm.location)
    if not vm.allocated:
        return sizes
    current = cloud.catalog.get(vm.location, vm.size)
    family = current.family if current else ""
    return [s for s in sizes if s.family == family]


def check_hardware_cluster(cloud: Cloud, vm: VM, size: SizeInfo) -> None:
    """409 OperationNotAllowed, worded as Azure words it, when the allocated VM's hardware
    cluster cannot host ``size``."""
    if not vm.allocated:
        return
    hosted = cluster_sizes(cloud, vm)
    if any(s.name.lower() == size.name.lower() for s in hosted):
        return
    names = ",".join(s.name for s in hosted)
    message = (
        f"Unable to resize the VM '{vm.name}' because the requested size {size.name} is not "
        f"available in the current hardware cluster. The available sizes are: {names}. "
        f"Read more on VM resizing strategy at {RESIZE_DOCS}."
    )
    raise ArmError(409, "OperationNotAllowed", message, target="vmSize")


def _size_body(size: SizeInfo) -> dict:
    """A VirtualMachineSize as the Compute API returns it (MB, as Azure counts them)."""
    return {
        "name": size.name,
        "numberOfCores": size.vcpus,
        "osDiskSizeInMB": 1047552,
        "resourceDiskSizeInMB": 0,
        "memoryInMB": int(size.memory_gb * 1024),
        "maxDataDiskCount": 8,
    }


def list_vm_sizes(cloud: Cloud, req: Request) -> Response:
    """GET .../virtualMachines/{vm}/vmSizes: {"value": [VirtualMachineSize]}, the sizes the VM
    can be resized to now (see cluster_sizes). 404 for a VM that does not exist."""
    faults.raise_injected(cloud, "vm.sizes", req.params["sub"])
    vm_id = resource_id(req.params["sub"], req.params["rg"], views.VM_TYPE, req.params["name"])
    vm = cloud.vm(vm_id)
    if vm is None:
        raise errors.not_found(views.VM_TYPE, req.params["name"], req.params["rg"])
    return Response(200, {"value": [_size_body(s) for s in cluster_sizes(cloud, vm)]})
