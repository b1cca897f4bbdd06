"""JSON bodies of resources and operations, in the shapes the Azure REST specs give."""

import copy

from . import quirks
from .cloud import Cloud
from .models import VM, Disk, Nic, Operation, iso

VM_TYPE = "Microsoft.Compute/virtualMachines"
DISK_TYPE = "Microsoft.Compute/disks"
NIC_TYPE = "Microsoft.Network/networkInterfaces"

POWER_DISPLAY = {
    "running": "VM running",
    "starting": "VM starting",
    "stopping": "VM stopping",
    "stopped": "VM stopped",
    "deallocating": "VM deallocating",
    "deallocated": "VM deallocated",
}
PROVISIONING_DISPLAY = {
    "Creating": "Creating",
    "Updating": "Updating",
    "Deleting": "Deleting",
    "Succeeded": "Provisioning succeeded",
    "Failed": "Provisioning failed",
}


def _os_disk(vm: VM, disk: Disk | None, given: dict) -> dict:
    # Echo the request, plus what Azure fills in: name, defaults and the managed disk id.
    os_disk = {"osType": "Linux", "caching": "ReadWrite", "deleteOption": "Detach", **given}
    os_disk["name"] = vm.os_disk_name
    os_disk["createOption"] = given.get("createOption", "FromImage")
    managed = dict(given.get("managedDisk") or {})
    managed["id"] = vm.disk_id
    if disk is not None:
        managed.setdefault("storageAccountType", disk.storage_type)
        os_disk["diskSizeGB"] = disk.size_gb
    os_disk["managedDisk"] = managed
    return os_disk


def vm_body(cloud: Cloud, vm: VM, expand: bool = False) -> dict:
    """VirtualMachine: id, name, type, location, tags, properties (+instanceView if expand)."""
    props = copy.deepcopy(vm.properties)
    props["vmId"] = vm.vm_id
    props["hardwareProfile"] = {**(props.get("hardwareProfile") or {}), "vmSize": vm.size}
    storage = dict(props.get("storageProfile") or {})
    storage["osDisk"] = _os_disk(vm, cloud.disk(vm.disk_id), storage.get("osDisk") or {})
    storage.setdefault("dataDisks", [])
    props["storageProfile"] = storage
    if isinstance(props.get("osProfile"), dict):
        props["osProfile"].setdefault("secrets", [])
    props["provisioningState"] = vm.provisioning
    props["timeCreated"] = iso(vm.created)
    if expand:
        props["instanceView"] = instance_view(cloud, vm)
    location = quirks.shown_location(cloud, vm.location)
    body = {"id": vm.id, "name": vm.name, "type": VM_TYPE, "location": location}
    body.update({"tags": dict(vm.tags), "properties": props})
    if vm.zones:
        body["zones"] = list(vm.zones)
    return body


def _provisioning_status(vm: VM) -> dict:
    code = f"ProvisioningState/{vm.provisioning.lower()}"
    status = {"code": code, "level": "Info", "displayStatus": PROVISIONING_DISPLAY[vm.provisioning]}
    if vm.provisioning == "Failed" and vm.last_error:
        status.update(code=f"{code}/{vm.last_error['code']}", level="Error")
        status["message"] = vm.last_error["message"]
    return status


def instance_view(cloud: Cloud, vm: VM) -> dict:
    """VirtualMachineInstanceView: statuses [ProvisioningState/..., PowerState/...], disks."""
    provisioning = _provisioning_status(vm)
    power = {"code": f"PowerState/{vm.power}", "level": "Info"}
    power["displayStatus"] = POWER_DISPLAY[vm.power]
    disk_status = {"code": "ProvisioningState/succeeded", "level": "Info"}
    disk_status.update(displayStatus="Provisioning succeeded", time=iso(vm.created))
    return {
        "computerName": (vm.properties.get("osProfile") or {}).get("computerName", vm.name),
        "hyperVGeneration": "V2",
        "disks": [{"name": vm.os_disk_name, "statuses": [disk_status]}],
        "statuses": [provisioning, power],
    }


def nic_body(nic: Nic) -> dict:
    """NetworkInterface with one ipConfiguration (privateIPAddress, subnet.id)."""
    props = copy.deepcopy(nic.properties)
    props.pop("virtualMachine", None)  # Read-only: set below from our own records.
    config_id = f"{nic.id}/ipConfigurations/{nic.ipconfig_name}"
    config_props = {
        "provisioningState": nic.provisioning,
        "privateIPAddress": nic.private_ip,
        "privateIPAllocationMethod": "Dynamic",
        "privateIPAddressVersion": "IPv4",
        "subnet": {"id": nic.subnet_id},
        "primary": True,
    }
    config = {"name": nic.ipconfig_name, "id": config_id, "etag": nic.etag}
    config.update(type=f"{NIC_TYPE}/ipConfigurations", properties=config_props)
    props.update(
        provisioningState=nic.provisioning, resourceGuid=nic.guid, ipConfigurations=[config]
    )
    props.setdefault("dnsSettings", {"dnsServers": [], "appliedDnsServers": []})
    props.setdefault("enableAcceleratedNetworking", False)
    props.setdefault("enableIPForwarding", False)
    props.setdefault("nicType", "Standard")
    if nic.vm_id:
        props["virtualMachine"] = {"id": nic.vm_id}
    body = {"name": nic.name, "id": nic.id, "etag": nic.etag, "type": NIC_TYPE}
    body.update(location=nic.location, tags=dict(nic.tags), properties=props)
    return body


def disk_body(cloud: Cloud, disk: Disk) -> dict:
    """Disk: managedBy, sku, properties.diskState (Attached/Reserved/Unattached), diskSizeGB."""
    tier = "Premium" if disk.storage_type.lower().startswith("premium") else "Standard"
    props = {
        "osType": "Linux",
        "hyperVGeneration": "V2",
        "creationData": {"createOption": "FromImage", "imageReference": dict(disk.image)},
        "diskSizeGB": disk.size_gb,
        "diskState": cloud.disk_state(disk),
        "provisioningState": "Succeeded",
        "timeCreated": iso(disk.created),
        "uniqueId": disk.unique_id,
    }
    body = {"id": disk.id, "name": disk.name, "type": DISK_TYPE, "location": disk.location}
    body["sku"] = {"name": disk.storage_type, "tier": tier}
    if disk.tags:
        body["tags"] = dict(disk.tags)
    if disk.managed_by:
        body["managedBy"] = disk.managed_by
    body["properties"] = props
    return body


def operation_body(op: Operation) -> dict:
    """{"name", "status", "startTime", "endTime" (when done), "error" (when Failed)}."""
    body = {"name": op.id, "status": op.status, "startTime": iso(op.start)}
    if op.status != "InProgress":
        body["endTime"] = iso(op.end)
    if op.status == "Failed" and op.error:
        body["error"] = dict(op.error)
    return body
