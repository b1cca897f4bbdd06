"""Microsoft.Compute/virtualMachines/{vm}/extensions/{name}: PUT, GET (with
`$expand=instanceView`), list, DELETE, in the shapes of Microsoft's REST examples
(VirtualMachineExtension_CreateOrUpdate/Get/Delete/List, Compute 2024-07-01), and what the
NVIDIA GPU Driver Extension for Linux does (learn.microsoft.com/azure/virtual-machines/
extensions/hpccompute-gpu-linux):

- It takes `seconds` (ExtensionPlay; 4 x the LRO latency by default) to install, with a guest
  reboot in the middle: the VM stays PowerState/running, its agent falls silent.
- It fails with the handler's exit code as Azure shows it: 13 on a size that is not N-series,
  11 on an N-series size without an NVIDIA GPU (the AMD NVv4), or what a fault queued for
  "vm.extension.create" says (kinds in EXIT_KINDS). The LRO then fails with
  VMExtensionProvisioningError and the instanceView's status and substatus carry the exit code.
- Once it succeeded the VM has a driver. Images that carry one (DRIVER_IMAGES: Ubuntu-HPC,
  the Data Science VMs) have it from the start. With `drivers_required` (POST
  /_sim/extensions), a VM's agent reports no GPU and driver "missing" until it has one.
"""

import copy
import time

from . import errors, faults
from .agent_protocol import gpu_model
from .cloud import Cloud
from .models import COMPUTE, VM, Extension, Operation, iso, key_of, resource_id
from .protocol import Request, Response, lro_headers

EXTENSION_TYPE = "Microsoft.Compute/virtualMachines/extensions"
NVIDIA = ("microsoft.hpccompute", "nvidiagpudriverlinux")  # (publisher, type), lower case
FAULT_OPS = frozenset({"vm.extension.create", "vm.extension.get", "vm.extension.delete"})
# Fault kinds for "vm.extension.create": the exit code the handler ends with.
EXIT_KINDS = {"extension_no_gpu": 11, "extension_size_unsupported": 13, "extension_failed": 14}
# The extension's exit codes (hpccompute-gpu-linux, "Exit codes").
EXIT_MEANINGS = {
    0: "Operation successful",
    1: "Incorrect usage of extension",
    10: "Linux Integration Services for Hyper-V and Azure not available or installed",
    11: "NVIDIA GPU not found on this VM size",
    12: "Image offer not supported",
    13: "VM size not supported",
    14: "Operation unsuccessful",
}
# (publisher, offer) of marketplace images that come with the NVIDIA driver (learn.microsoft.com
# /azure/virtual-machines/configure: Ubuntu-HPC; the Data Science VMs).
DRIVER_IMAGES = frozenset(
    {
        ("microsoft-dsvm", "ubuntu-hpc"),
        ("microsoft-dsvm", "ubuntu-2004"),
        ("microsoft-dsvm", "ubuntu-2204"),
    }
)
REBOOT = (0.4, 0.6)  # The share of the install during which the guest reboots.


def image_carries_driver(image: dict) -> bool:
    """True for a marketplace imageReference of DRIVER_IMAGES."""
    publisher = str(image.get("publisher") or "").lower()
    return (publisher, str(image.get("offer") or "").lower()) in DRIVER_IMAGES


def gpus_visible(cloud: Cloud, vm: VM) -> bool:
    """Whether the VM's agent can read its GPUs (NVML needs the driver)."""
    return vm.driver or not cloud.extension_play.drivers_required


def rebooting(vm: VM, now: float) -> bool:
    """Whether the VM's guest is rebooting at `now` (unix seconds)."""
    return vm.rebooting is not None and vm.rebooting[0] <= now < vm.rebooting[1]


def _ids(req: Request) -> tuple[str, str]:
    p = req.params
    vm_id = resource_id(p["sub"], p["rg"], "Microsoft.Compute/virtualMachines", p["name"])
    return vm_id, f"{vm_id}/extensions/{p.get('child', '')}"


def _vm(cloud: Cloud, req: Request) -> VM:
    vm = cloud.vm(_ids(req)[0])
    if vm is None:
        message = (
            f"The Resource 'Microsoft.Compute/virtualMachines/{req.params['name']}' under "
            f"resource group '{req.params['rg']}' was not found."
        )
        raise errors.ArmError(404, "ParentResourceNotFound", message)
    return vm


def _extension(cloud: Cloud, req: Request) -> tuple[VM, Extension]:
    vm = _vm(cloud, req)
    ext = vm.extensions.get(req.params["child"].lower())
    if ext is None:
        name = f"virtualMachines/{vm.name}/extensions/{req.params['child']}"
        raise errors.not_found("Microsoft.Compute", name, req.params["rg"])
    return vm, ext


def _properties(body: dict) -> dict:
    properties = body.get("properties")
    if not isinstance(properties, dict):
        raise errors.invalid_parameter("Required parameter 'properties' is missing.", "properties")
    for name in ("publisher", "type", "typeHandlerVersion"):
        if not isinstance(properties.get(name), str) or not properties[name].strip():
            message = f"Required parameter '{name}' is missing (null)."
            raise errors.invalid_parameter(message, name)
    if properties.get("settings") is not None and not isinstance(properties["settings"], dict):
        raise errors.invalid_parameter("'settings' must be an object.", "settings")
    clean = copy.deepcopy(properties)
    for read_only in ("provisioningState", "instanceView", "protectedSettings"):
        clean.pop(read_only, None)  # protectedSettings is write-only: never echoed
    return clean


def _is_nvidia(ext: Extension) -> bool:
    p = ext.properties
    return (str(p.get("publisher")).lower(), str(p.get("type")).lower()) == NVIDIA


def _exit_code(cloud: Cloud, vm: VM, ext: Extension) -> int:
    """Decided when the PUT arrives, reported when the install ends (like allocations)."""
    fault = cloud.take_fault("vm.extension.create", frozenset(EXIT_KINDS))
    if fault is not None:
        return EXIT_KINDS[fault.kind]
    if not _is_nvidia(ext):
        return 0
    if not vm.size.lower().startswith("standard_n"):
        return 13
    size = cloud.catalog.get(vm.location, vm.size)
    if size is not None and size.gpus == 0:
        return 13
    return 11 if gpu_model(vm.size).name is None else 0  # an AMD GPU: NVIDIA finds none


def _failure(ext: Extension, code: int) -> dict:
    p = ext.properties
    return {
        "code": "VMExtensionProvisioningError",
        "message": (
            f"VM has reported a failure when processing extension '{ext.name}' (publisher "
            f"'{p.get('publisher')}' and type '{p.get('type')}'). Error message: 'Exit code "
            f"{code}: {EXIT_MEANINGS.get(code, 'Operation unsuccessful')}'. More information "
            "on troubleshooting is available at https://aka.ms/VMExtensionLinuxTroubleshoot."
        ),
    }


def _finish(vm: VM, ext: Extension, code: int, op: Operation) -> None:
    ext.exit_code, ext.finished = code, op.end
    ext.message = f"Exit code {code}: {EXIT_MEANINGS.get(code, 'Operation unsuccessful')}"
    ext.provisioning = "Succeeded" if code == 0 else "Failed"
    if code == 0 and _is_nvidia(ext):
        vm.driver = True


def put_extension(cloud: Cloud, req: Request) -> Response:
    """PUT (VirtualMachineExtensions_CreateOrUpdate): 201 for a new extension, 200 for an
    update (which runs the handler again), the extension body and Azure-AsyncOperation; 409
    while the VM is not running or the extension is busy."""
    faults.raise_injected(cloud, "vm.extension.create", req.params["sub"])
    vm, body = _vm(cloud, req), req.json()
    properties = _properties(body if isinstance(body, dict) else {})
    if vm.power != "running":
        message = "Cannot modify extensions in the VM when the VM is not running."
        raise errors.ArmError(409, "OperationNotAllowed", message)
    name = req.params["child"]
    existing = vm.extensions.get(name.lower())
    if existing is not None and cloud.busy_with(existing.active_op) is not None:
        raise errors.conflict("PUT", "PUT", name)
    tags = body.get("tags") if isinstance(body.get("tags"), dict) else {}
    ext = Extension(_ids(req)[1], name, vm.id, vm.location, properties, tags)
    vm.extensions[name.lower()] = ext
    code = _exit_code(cloud, vm, ext)
    seconds = cloud.extension_play.seconds
    duration = 4 * cloud.latency if seconds is None else seconds
    if code == 0 and _is_nvidia(ext):
        vm.rebooting = (ext.started + REBOOT[0] * duration, ext.started + REBOOT[1] * duration)
    op = cloud.start_operation(
        "PUT",
        COMPUTE,
        vm.location,
        vm.subscription,
        ext.id,
        lambda op: _finish(vm, ext, code, op),
        error=_failure(ext, code) if code else None,
        duration=duration,
    )
    ext.active_op = op.id
    headers = lro_headers(req, op, cloud.retry_after, location=False)
    return Response(200 if existing else 201, body_of(ext, expand=False), headers)


def get_extension(cloud: Cloud, req: Request) -> Response:
    """GET (VirtualMachineExtensions_Get); `$expand=instanceView` adds properties.instanceView."""
    faults.raise_injected(cloud, "vm.extension.get", req.params["sub"])
    _vm_, ext = _extension(cloud, req)
    expand = "instanceview" in req.query.get("$expand", "").lower()
    return Response(200, body_of(ext, expand=expand))


def list_extensions(cloud: Cloud, req: Request) -> Response:
    """GET .../extensions (VirtualMachineExtensions_List): {"value": [extension]}."""
    faults.raise_injected(cloud, "vm.extension.get", req.params["sub"])
    expand = "instanceview" in req.query.get("$expand", "").lower()
    return Response(
        200, {"value": [body_of(e, expand) for e in _vm(cloud, req).extensions.values()]}
    )


def delete_extension(cloud: Cloud, req: Request) -> Response:
    """DELETE (VirtualMachineExtensions_Delete): 202 LRO, 204 when there is no such extension.
    The driver it installed stays, as on Azure."""
    faults.raise_injected(cloud, "vm.extension.delete", req.params["sub"])
    vm = _vm(cloud, req)
    ext = vm.extensions.get(req.params["child"].lower())
    if ext is None:
        return Response(204)
    if cloud.busy_with(ext.active_op) is not None:
        raise errors.conflict("Delete", "PUT", ext.name)
    ext.provisioning = "Deleting"
    op = cloud.start_operation(
        "Delete",
        COMPUTE,
        vm.location,
        vm.subscription,
        ext.id,
        lambda op: vm.extensions.pop(key_of(ext.name), None),
        done_status=204,
    )
    ext.active_op = op.id
    return Response(202, None, lro_headers(req, op, cloud.retry_after))


def body_of(ext: Extension, expand: bool) -> dict:
    """VirtualMachineExtension: name, id, type, location, tags, properties (+instanceView)."""
    properties = {**copy.deepcopy(ext.properties), "provisioningState": ext.provisioning}
    if expand:
        properties["instanceView"] = instance_view(ext)
    return {
        "name": ext.name,
        "id": ext.id,
        "type": EXTENSION_TYPE,
        "location": ext.location,
        "tags": dict(ext.tags),
        "properties": properties,
    }


def instance_view(ext: Extension) -> dict:
    """VirtualMachineExtensionInstanceView: a ProvisioningState status (transitioning,
    succeeded, failed/<exit code>) and, once finished, a substatus with the exit code."""
    p, at = ext.properties, iso(ext.finished or ext.started)
    view = {
        "name": ext.name,
        "type": f"{p.get('publisher')}.{p.get('type')}",
        "typeHandlerVersion": str(p.get("typeHandlerVersion")),
    }
    if ext.exit_code is None:
        status = {"code": "ProvisioningState/transitioning", "displayStatus": "Transitioning"}
        view["statuses"] = [
            {**status, "level": "Info", "message": "Enable in progress", "time": at}
        ]
        return view
    ok = ext.exit_code == 0
    state = "succeeded" if ok else f"failed/{ext.exit_code}"
    shown = "Provisioning succeeded" if ok else "Provisioning failed"
    level = "Info" if ok else "Error"
    enable = "Enable succeeded" if ok else f"Enable failed: exit status={ext.exit_code}"
    view["statuses"] = [
        {
            "code": f"ProvisioningState/{state}",
            "level": level,
            "displayStatus": shown,
            "message": f"{enable}. {ext.message}",
            "time": at,
        }
    ]
    view["substatuses"] = [
        {
            "code": f"ComponentStatus/nvidia-vmext-status/{'succeeded' if ok else 'failed'}",
            "level": level,
            "displayStatus": shown,
            "message": ext.message,
            "time": at,
        }
    ]
    return view


def elapsed(ext: Extension) -> float:
    """Seconds since the install began (for /_sim/state)."""
    return (ext.finished or time.time()) - ext.started
