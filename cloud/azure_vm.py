"""One workspace's Azure footprint: a NIC, a VM and the VM's OS disk.

Lifecycle operations are split in two so that a worker can persist progress:
begin() sends the request and returns the LRO continuation token without
waiting; poll() asks once how the operation behind a token is doing. A
replacement worker that polls with a saved token only sends GETs -- it never
re-sends the VM PUT/POST.
"""

from __future__ import annotations

import base64
import contextlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.core.polling import LROPoller
from azure.mgmt.compute.models import (
    BillingProfile,
    VirtualMachineEvictionPolicyTypes,
    VirtualMachinePriorityTypes,
)
from azure.mgmt.core.polling.arm_polling import ARMPolling
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from .clients import AzureSettings, compute_client, network_client
from .errors import CloudError, azure_errors, from_azure
from .locations import normalise_location

OPERATIONS = ("create", "start", "deallocate", "delete")
POWER_STATES = frozenset(
    {"running", "deallocated", "stopped", "stopping", "starting", "deallocating", "unknown"}
)


@dataclass(frozen=True)
class VmNames:
    vm: str
    nic: str
    os_disk: str


# Ubuntu 22.04 LTS from Canonical per Hyper-V generation (Azure Marketplace image SKUs; see
# learn.microsoft.com/azure/virtual-machines/generation-2): a size boots only the generations
# its resource SKU lists in HyperVGenerations.
IMAGE_BY_GENERATION = {
    "V2": "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest",
    "V1": "Canonical:0001-com-ubuntu-server-jammy:22_04-lts:latest",
}
PREMIUM_SSD, STANDARD_SSD = "Premium_LRS", "StandardSSD_LRS"  # OS disk storageAccountType


@dataclass(frozen=True)
class VmSpec:
    """What to create. custom_data is cloud-init text (sent base64-encoded); os_disk_gb in GiB.
    spot: an Azure Spot VM (priority Spot), deallocated when Azure evicts it and never evicted
    for price (max price -1: it pays up to the pay-as-you-go price). ssh_public_key "": the
    owner gave none, and the VM gets a key nobody holds (unusable_ssh_key)."""

    workspace_id: str
    location: str
    vm_size: str
    admin_username: str
    ssh_public_key: str
    custom_data: str
    tags: dict[str, str]
    # publisher:offer:sku:version or a gallery image version id; see image_reference()
    image: str = IMAGE_BY_GENERATION["V2"]
    os_disk_gb: int = 128
    spot: bool = False
    os_disk_sku: str = PREMIUM_SSD  # storageAccountType; see SkuInfo.os_disk_sku
    # A capacity reservation group's id: the VM takes an instance of its reservation for the
    # size (cloud.azure_reservations); "" for none.
    capacity_reservation_group: str = ""
    # A managed disk to boot from instead of ``image`` (a disk copied from a kept snapshot,
    # cloud.azure_snapshots): attached as the OS disk, so Azure takes no osProfile; the
    # cloud-config travels as userData (IMDS) instead of customData.
    os_disk_id: str = ""


@dataclass(frozen=True)
class VmState:
    """A VM as Azure reports it. power_state is one of POWER_STATES; priority is Azure's
    ("Regular", "Spot"; "Regular" when Azure leaves it out)."""

    name: str
    vm_id: str | None
    location: str
    vm_size: str
    provisioning_state: str
    power_state: str
    private_ip: str | None
    priority: str = "Regular"


@dataclass(frozen=True)
class Usage:
    """One regional quota line, e.g. name="standardNCADSA100v4Family", unit="Count" (cores)."""

    name: str
    localized_name: str
    current_value: int
    limit: int
    unit: str


@dataclass(frozen=True)
class SkuInfo:
    """A VM size in one location as the Resource SKUs API describes it to this subscription.

    family is the quota family the regional usages name (e.g. "standardNCADSA100v4Family"),
    vcpus the vCPU count one VM of the size uses against it (0 when Azure does not say).
    offered is False with Azure's restriction reasonCode (e.g. "NotAvailableForSubscription"),
    or "NotOffered" when the size is not sold in the location; then family is "" and vcpus 0.
    Zone-only restrictions do not count: the portal deploys without zones.
    """

    name: str
    family: str
    vcpus: int
    offered: bool
    reason: str | None
    # From the capabilities HyperVGenerations ("V1,V2") and PremiumIO ("True"); Azure leaves
    # them out for sizes that boot Gen1 only and take no Premium SSD.
    hyper_v_generations: tuple[str, ...] = ("V1",)
    premium_io: bool = False

    @property
    def image(self) -> str:
        """The Gen2 image when the size boots Gen2, else the Gen1 one (IMAGE_BY_GENERATION)."""
        return IMAGE_BY_GENERATION["V2" if "V2" in self.hyper_v_generations else "V1"]

    @property
    def os_disk_sku(self) -> str:
        """Premium_LRS where the size takes Premium SSD (PremiumIO True), else StandardSSD_LRS."""
        return PREMIUM_SSD if self.premium_io else STANDARD_SSD


class _SendOnly(ARMPolling):
    """ARM polling that keeps the initial response (for the token) but never polls.

    Without it LROPoller would start polling in a background thread the moment
    begin() returns, doubling the traffic of the poll() that follows.
    """

    def run(self) -> None:
        return None


def vm_names(workspace_id: uuid.UUID | str) -> VmNames:
    """Deterministic names: "ws-<first 12 hex of the uuid>", "<vm>-nic", "<vm>-osdisk".

    Raises ValueError if workspace_id is not a UUID.
    """
    return _names(f"ws-{uuid.UUID(str(workspace_id)).hex[:12]}")


def _names(vm: str) -> VmNames:
    return VmNames(vm=vm, nic=f"{vm}-nic", os_disk=f"{vm}-osdisk")


def _check_operation(operation: str) -> None:
    if operation not in OPERATIONS:
        raise ValueError(f"unknown operation {operation!r}; expected one of {OPERATIONS}")


def begin(settings: AzureSettings, operation: str, *, name: str, spec: VmSpec | None = None) -> str:
    """Start `operation` on VM `name`; return its LRO continuation token without waiting.

    create needs `spec` (and `name` must be vm_names(spec.workspace_id).vm): it first
    ensures the NIC (an idempotent PUT it waits for, seconds), then sends the VM PUT.
    After a permanent create failure, call delete_leftovers(): the NIC may exist.

    Raises ValueError for an unknown operation or a missing/mismatched spec, and
    CloudError when Azure refuses (transient: throttled/busy/5xx; permanent e.g.
    SkuNotAvailable, OperationNotAllowed for quota, InvalidParameter).
    """
    _check_operation(operation)
    if operation == "create":
        if spec is None or vm_names(spec.workspace_id).vm != name:
            raise ValueError("create needs the spec of the workspace the VM is named after")
    elif spec is not None:
        raise ValueError(f"{operation} takes no spec")
    with azure_errors():
        if spec is not None:  # create: checked above
            poller = _begin_create(settings, _names(name), spec)
        else:
            start = _vm_action(settings, operation)
            poller = start(
                settings.resource_group, name, polling=_SendOnly(settings.polling_interval)
            )
        return poller.continuation_token()


@dataclass(frozen=True)
class Progress:
    """Where an operation stands after one poll. ``state`` is set once done (None after a
    delete, or while in progress)."""

    done: bool
    state: VmState | None = None


class _PollOnce(ARMPolling):
    """ARM polling that asks for the operation's status once instead of looping until done.

    Overrides the loop (``_poll``) rather than ``run()``, so run() still turns bad answers into
    HttpResponseError; once finished, the standard loop raises Azure's error for a Failed
    operation and fetches the final resource, exactly as a blocking wait would.
    """

    def _poll(self) -> None:
        if not self.finished():
            self.update_status()
        if self.finished():
            super()._poll()


def poll(settings: AzureSettings, operation: str, *, name: str, token: str) -> Progress:
    """Ask Azure once how the operation behind ``token`` (from begin()) is doing; GETs only.

    When it is done, returns get() (None for delete, which then also deletes the NIC and OS
    disk, waiting; a finished create first tags the OS disk as the VM, one PATCH). A worker
    calls this again later rather than sleeping between polls, so long operations (VM creates
    take minutes) hold no worker.

    Raises ValueError for an unknown operation or a malformed token; CloudError when polling
    fails (transient: poll again with the same token) or the operation ended Failed
    (permanent, status None, Azure's code, e.g. AllocationFailed; after a failed create, call
    delete_leftovers()).
    """
    _check_operation(operation)
    try:
        with azure_errors():
            polling = _PollOnce(settings.polling_interval)
            poller = _resumed(settings, operation, name, token, polling)
            poller.result()
            if not poller.polling_method().finished():
                return Progress(done=False)
    except CloudError as exc:
        if operation == "create" and exc.status is None and exc.code == "HttpResponseError":
            raise _provisioning_error(settings, name) or exc from exc
        raise
    if operation == "delete":
        _delete_all(settings, _names(name), include_vm=False)
        return Progress(done=True)
    if operation == "create":
        _tag_os_disk(settings, _names(name))
    return Progress(done=True, state=get(settings, name=name))


def _provisioning_error(settings: AzureSettings, name: str) -> CloudError | None:
    """Azure's code and message for a VM whose create ended Failed, from its instance view
    (status "ProvisioningState/failed/<code>", e.g. AllocationFailed). A create Azure answered
    without Azure-AsyncOperation is polled on the VM itself, and then the SDK reports only
    "Operation returned an invalid status 'OK'"; None when the view names no code."""
    with azure_errors():
        view = compute_client(settings).virtual_machines.instance_view(
            settings.resource_group, name
        )
    for status in view.statuses or []:
        parts = _text(status.code).split("/", 2)
        if len(parts) == 3 and parts[0].lower() == "provisioningstate" and parts[2]:
            return CloudError(parts[2], _text(status.message) or _text(status.display_status))
    return None


def _tag_os_disk(settings: AzureSettings, names: VmNames) -> None:
    """Give the OS disk its VM's tags: Azure does not copy them to a disk the VM creates, so
    without this Cost Management reports the disk's cost under no workspace. A PATCH of the
    same tags is harmless, so a resumed poll may send it again."""
    compute = compute_client(settings)
    with azure_errors():
        tags = compute.virtual_machines.get(settings.resource_group, names.vm).tags or {}
        compute.disks.begin_update(settings.resource_group, names.os_disk, {"tags": tags}).result()


def _resumed(
    settings: AzureSettings, operation: str, name: str, token: str, polling: ARMPolling
) -> LROPoller[Any]:
    vms = compute_client(settings).virtual_machines
    if operation == "create":
        # The body is in the token's past; the SDK ignores `parameters` when resuming.
        return vms.begin_create_or_update(  # type: ignore[call-overload,no-any-return]
            settings.resource_group, name, None, continuation_token=token, polling=polling
        )
    return _vm_action(settings, operation)(
        settings.resource_group, name, continuation_token=token, polling=polling
    )


def get(settings: AzureSettings, *, name: str) -> VmState | None:
    """The VM with its instance view and its NIC's private IP; None if the VM does not exist.

    Raises CloudError.
    """
    vms = compute_client(settings).virtual_machines
    with azure_errors():
        try:
            vm = vms.get(settings.resource_group, name, expand="instanceView")
        except ResourceNotFoundError:
            return None
        private_ip = _private_ip(settings, _names(name).nic)
    return _vm_state(vm, private_ip)


def power_states(settings: AzureSettings) -> dict[str, str]:
    """{VM name (lower case): power state} of every VM in the resource group, one of
    POWER_STATES, from one paged ARM call for the whole subscription (VirtualMachines_ListAll
    with statusOnly=true, which carries each VM's instance view).

    Raises CloudError.
    """
    prefix = f"/subscriptions/{settings.subscription_id}/resourceGroups/{settings.resource_group}/"
    with azure_errors():
        vms = list(compute_client(settings).virtual_machines.list_all(status_only="true"))
    return {
        _text(vm.name).lower(): _power_state(vm.properties.instance_view if vm.properties else None)
        for vm in vms
        if _text(vm.id).lower().startswith(prefix.lower())
    }


def delete_leftovers(settings: AzureSettings, *, name: str) -> None:
    """Remove whatever a failed create left: the VM (also one in provisioningState
    Failed), then the NIC, then the OS disk, waiting for each.

    Idempotent (absent resources are fine). Tries every step even if one fails, then
    raises the first CloudError, so a retry can finish the job.
    """
    _delete_all(settings, _names(name), include_vm=True)


def regional_usage(settings: AzureSettings, *, location: str) -> list[Usage]:
    """Compute quota usage in `location` (cores per VM family, VM counts, ...).

    Raises CloudError.
    """
    with azure_errors():
        items = list(compute_client(settings).usage.list(location))
    return [
        Usage(
            name=item.name.value or "",
            localized_name=item.name.localized_value or item.name.value or "",
            current_value=item.current_value,
            limit=item.limit,
            unit=_text(item.unit),
        )
        for item in items
    ]


def sku_info(settings: AzureSettings, *, location: str, vm_size: str) -> SkuInfo:
    """`vm_size` in `location` from the Resource SKUs API: its quota family, its vCPUs and
    whether this subscription may deploy it (see SkuInfo).

    Raises CloudError.
    """
    with azure_errors():
        skus = compute_client(settings).resource_skus.list(filter=f"location eq '{location}'")
        sku = next(
            (
                s
                for s in skus
                if s.resource_type == "virtualMachines" and _norm(s.name) == _norm(vm_size)
            ),
            None,
        )
    if sku is None:
        return SkuInfo(name=vm_size, family="", vcpus=0, offered=False, reason="NotOffered")
    reason = _restriction(sku, normalise_location(location))
    capabilities = {_norm(c.name): _text(c.value) for c in sku.capabilities or []}
    generations = capabilities.get("hypervgenerations", "V1").split(",")
    return SkuInfo(
        name=_text(sku.name),
        family=_text(sku.family),
        vcpus=_vcpus(sku),
        offered=reason is None,
        reason=reason,
        hyper_v_generations=tuple(g.strip().upper() for g in generations if g.strip()) or ("V1",),
        premium_io=capabilities.get("premiumio", "").lower() == "true",
    )


def _restriction(sku: Any, location: str) -> str | None:
    """Azure's reasonCode of a location restriction on the SKU, or None when unrestricted."""
    for restriction in sku.restrictions or []:
        values = [normalise_location(v) for v in restriction.values_property or []]
        if _norm(restriction.type) == "location" and (not values or location in values):
            return _text(restriction.reason_code) or "Restricted"
    return None


def _vcpus(sku: Any) -> int:
    for capability in sku.capabilities or []:
        if _norm(capability.name) == "vcpus":
            try:
                return int(float(capability.value))
            except (TypeError, ValueError):
                return 0
    return 0


# --- create -----------------------------------------------------------------


def _begin_create(settings: AzureSettings, names: VmNames, spec: VmSpec) -> LROPoller[Any]:
    nic_id = _ensure_nic(settings, names.nic, spec)
    body = _vm_body(names, nic_id, spec)
    vms = compute_client(settings).virtual_machines
    # The body is ARM's JSON as a dict, which the SDK sends as it is; its overloads name only
    # the model class and raw bytes.
    return vms.begin_create_or_update(  # type: ignore[call-overload,no-any-return]
        settings.resource_group, names.vm, body, polling=_SendOnly(settings.polling_interval)
    )


def _ensure_nic(settings: AzureSettings, nic_name: str, spec: VmSpec) -> str:
    """PUT the NIC and wait (idempotent); return its ARM id.

    On a permanent failure the NIC is deleted again before the error propagates,
    so a refused create leaves nothing behind.
    """
    nics = network_client(settings).network_interfaces
    try:
        poller = nics.begin_create_or_update(  # type: ignore[call-overload]  # a JSON dict
            settings.resource_group, nic_name, _nic_body(settings, spec)
        )
        return str(poller.result().id)
    except AzureError as exc:
        if not from_azure(exc).transient:
            # Best effort: the original error is the one worth reporting.
            with contextlib.suppress(AzureError):
                _delete_and_wait(nics.begin_delete, settings.resource_group, nic_name)
        raise


def _nic_body(settings: AzureSettings, spec: VmSpec) -> dict[str, Any]:
    # No publicIPAddress: workspaces are reached through the portal's network only.
    ip_config = {
        "name": "ipconfig1",
        "properties": {
            "subnet": {"id": settings.subnet_id},
            "privateIPAllocationMethod": "Dynamic",
            "primary": True,
        },
    }
    return {
        "location": spec.location,
        "tags": dict(spec.tags),
        "properties": {"ipConfigurations": [ip_config]},
    }


def image_reference(image: str) -> dict[str, str]:
    """ARM's imageReference of ``image``: an Azure Compute Gallery image version id
    ("/subscriptions/…/versions/1.0.0") as {"id"}, a marketplace URN "publisher:offer:sku:version"
    as its four parts. Raises ValueError for anything else."""
    if image.startswith("/subscriptions/"):
        return {"id": image}
    publisher, offer, sku, version = image.split(":")
    return {"publisher": publisher, "offer": offer, "sku": sku, "version": version}


def _vm_body(names: VmNames, nic_id: str, spec: VmSpec) -> dict[str, Any]:
    # deleteOption Detach on disk and NIC: Azure must not delete them behind our back;
    # poll("delete") and delete_leftovers() remove them explicitly, in order.
    os_disk = {
        "name": names.os_disk,
        "createOption": "FromImage",
        "deleteOption": "Detach",
        "caching": "ReadWrite",
        "diskSizeGB": spec.os_disk_gb,
        "managedDisk": {"storageAccountType": spec.os_disk_sku},
    }
    nic_ref = {"id": nic_id, "properties": {"primary": True, "deleteOption": "Detach"}}
    properties: dict[str, Any] = {
        "hardwareProfile": {"vmSize": spec.vm_size},
        "storageProfile": {
            "imageReference": image_reference(spec.image),
            "osDisk": os_disk,
        },
        "osProfile": _os_profile(names.vm, spec),
        "networkProfile": {"networkInterfaces": [nic_ref]},
    }
    if spec.os_disk_id:
        del properties["osProfile"]
        properties.update(_attached_os_disk(names, spec))
    if spec.spot:
        properties.update(_spot_properties())
    if spec.capacity_reservation_group:
        group = {"id": spec.capacity_reservation_group}
        properties["capacityReservation"] = {"capacityReservationGroup": group}
    return {"location": spec.location, "tags": dict(spec.tags), "properties": properties}


def _attached_os_disk(names: VmNames, spec: VmSpec) -> dict[str, Any]:
    """A VM on an existing (specialized) OS disk, as Microsoft's examples attach one:
    osDisk createOption Attach with managedDisk.id and osType, no imageReference and no
    osProfile (Azure refuses them: the disk has its OS set up); the cloud-config as userData
    (learn.microsoft.com/azure/virtual-machines/user-data)."""
    os_disk = {
        "name": names.os_disk,
        "osType": "Linux",
        "createOption": "Attach",
        "deleteOption": "Detach",
        "caching": "ReadWrite",
        "managedDisk": {"id": spec.os_disk_id},
    }
    return {
        "storageProfile": {"osDisk": os_disk},
        "userData": base64.b64encode(spec.custom_data.encode("utf-8")).decode("ascii"),
    }


def _spot_properties() -> dict[str, Any]:
    # Deallocate keeps the OS disk, so an evicted workspace starts again like a stopped one;
    # max price -1 means Azure evicts it only for capacity, never for price.
    return {
        "priority": VirtualMachinePriorityTypes.SPOT,
        "evictionPolicy": VirtualMachineEvictionPolicyTypes.DEALLOCATE,
        "billingProfile": BillingProfile(max_price=-1),
    }


def _os_profile(computer_name: str, spec: VmSpec) -> dict[str, Any]:
    user = spec.admin_username
    key_data = spec.ssh_public_key or unusable_ssh_key()
    ssh_key = {"path": f"/home/{user}/.ssh/authorized_keys", "keyData": key_data}
    return {
        "computerName": computer_name,
        "adminUsername": user,
        "customData": base64.b64encode(spec.custom_data.encode("utf-8")).decode("ascii"),
        "linuxConfiguration": {
            "disablePasswordAuthentication": True,
            "ssh": {"publicKeys": [ssh_key]},
        },
    }


def unusable_ssh_key() -> str:
    """A fresh Ed25519 public key whose private half is dropped at once: the authorized key of
    a VM whose owner gave none (they work in the browser, through the app proxy).

    Azure refuses a Linux VM with neither a password nor an SSH key ("Authentication using
    either SSH or by user name and password must be enabled in Linux profile."), and a password
    would open sshd to guessing; a key nobody holds opens nothing. Never logged or stored."""
    private = ed25519.Ed25519PrivateKey.generate()
    line = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return line.decode("ascii") + " gpu-portal-no-ssh-login"


# --- start / deallocate / delete ----------------------------------------------


def _vm_action(settings: AzureSettings, operation: str) -> Callable[..., LROPoller[None]]:
    vms = compute_client(settings).virtual_machines
    actions: dict[str, Callable[..., LROPoller[None]]] = {
        "start": vms.begin_start,
        "deallocate": vms.begin_deallocate,
        "delete": vms.begin_delete,
    }
    return actions[operation]


def _delete_and_wait(begin_delete: Callable[..., LROPoller[None]], group: str, name: str) -> None:
    # Azure answers 204 for an absent resource; a 404 means the same: already gone.
    with contextlib.suppress(ResourceNotFoundError):
        begin_delete(group, name).result()


def _delete_all(settings: AzureSettings, names: VmNames, *, include_vm: bool) -> None:
    """Delete (VM,) NIC, OS disk in that order -- the NIC and disk cannot go while the
    VM holds them. Tries every step; raises the first CloudError at the end."""
    compute = compute_client(settings)
    steps: list[tuple[Callable[..., LROPoller[None]], str]] = [
        (network_client(settings).network_interfaces.begin_delete, names.nic),
        (compute.disks.begin_delete, names.os_disk),
    ]
    if include_vm:
        steps.insert(0, (compute.virtual_machines.begin_delete, names.vm))
    first_error: CloudError | None = None
    for begin_delete, resource in steps:
        try:
            with azure_errors():
                _delete_and_wait(begin_delete, settings.resource_group, resource)
        except CloudError as exc:
            first_error = first_error or exc
    if first_error is not None:
        raise first_error


# --- reading ------------------------------------------------------------------


def _private_ip(settings: AzureSettings, nic_name: str) -> str | None:
    nics = network_client(settings).network_interfaces
    try:
        nic = nics.get(settings.resource_group, nic_name)
    except ResourceNotFoundError:
        return None
    configs = (nic.properties.ip_configurations if nic.properties else None) or []
    for config in configs:
        if config.properties and config.properties.private_ip_address:
            return config.properties.private_ip_address
    return None


def _vm_state(vm: Any, private_ip: str | None) -> VmState:
    props = vm.properties
    hardware = props.hardware_profile if props else None
    return VmState(
        name=vm.name,
        vm_id=props.vm_id if props else None,
        location=normalise_location(vm.location),
        vm_size=_text(hardware.vm_size if hardware else None),
        provisioning_state=_text(props.provisioning_state if props else None) or "Unknown",
        power_state=_power_state(props.instance_view if props else None),
        private_ip=private_ip,
        priority=_text(props.priority if props else None) or "Regular",
    )


def _power_state(instance_view: Any) -> str:
    """Map "PowerState/running" to "running"; missing or unexpected codes to "unknown"."""
    for status in (instance_view.statuses if instance_view else None) or []:
        code = status.code or ""
        if code.startswith("PowerState/"):
            state = code.split("/", 1)[1].lower()
            return state if state in POWER_STATES else "unknown"
    return "unknown"


def _text(value: Any) -> str:
    """A plain str: the SDK hands out str-Enums, and str() of those is "Type.MEMBER"."""
    if isinstance(value, Enum):
        value = value.value
    return "" if value is None else str(value)


def _norm(value: Any) -> str:
    return _text(value).replace(" ", "").lower()
