"""The NVIDIA GPU Driver Extension on a workspace's VM: put, get (with its instance view),
delete, through azure-mgmt-compute's ``virtual_machine_extensions``.

Facts (learn.microsoft.com/azure/virtual-machines/extensions/hpccompute-gpu-linux): publisher
Microsoft.HpcCompute, type NvidiaGpuDriverLinux, typeHandlerVersion 1.6 with
autoUpgradeMinorVersion; optional settings updateOS, driverVersion, installCUDA; it installs
CUDA drivers on NC/ND sizes and GRID drivers on NV sizes; the VM may reboot during the install;
its exit codes are EXIT_MEANINGS. The install takes minutes, so put() only sends the request:
the caller reads get() later to see how it went.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from azure.core.exceptions import ResourceNotFoundError

from .azure_vm import _SendOnly
from .clients import AzureSettings, compute_client
from .errors import azure_errors

NAME = "NvidiaGpuDriverLinux"  # the extension's resource name on the VM
PUBLISHER, TYPE, HANDLER_VERSION = "Microsoft.HpcCompute", "NvidiaGpuDriverLinux", "1.6"
SETTINGS = frozenset({"updateOS", "driverVersion", "installCUDA"})
EXIT_MEANINGS = {
    0: "Operation successful",
    1: "Incorrect usage of extension",
    10: "Linux Integration Services for Hyper-V and Azure not available or installed",
    11: "NVIDIA GPU not found on this VM size",
    12: "Image offer not supported",
    13: "VM size not supported",
    14: "Operation unsuccessful",
}
_EXIT_IN_CODE = re.compile(r"^ProvisioningState/failed/(\d+)$", re.IGNORECASE)
_EXIT_IN_TEXT = re.compile(r"exit (?:code|status)\s*[=:]?\s*(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class ExtensionState:
    """The extension as Azure reports it. provisioning_state: "Creating", "Updating",
    "Succeeded", "Failed", "Deleting"; exit_code: the handler's, when the instance view gives
    one; message: the instance view's status and substatus messages, joined."""

    name: str
    provisioning_state: str
    exit_code: int | None
    message: str

    @property
    def succeeded(self) -> bool:
        return self.provisioning_state.lower() == "succeeded"

    @property
    def failed(self) -> bool:
        return self.provisioning_state.lower() == "failed"

    @property
    def meaning(self) -> str:
        """What Microsoft says the exit code means ("" when none or unknown)."""
        return EXIT_MEANINGS.get(self.exit_code, "") if self.exit_code is not None else ""


def driver_extension_body(*, location: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The PUT body: the extension at ``location`` with ``settings`` (keys of SETTINGS).
    Raises ValueError for any other setting."""
    unknown = set(settings) - SETTINGS
    if unknown:
        raise ValueError(f"Unknown NvidiaGpuDriverLinux settings: {', '.join(sorted(unknown))}")
    return {
        "location": location,
        "properties": {
            "publisher": PUBLISHER,
            "type": TYPE,
            "typeHandlerVersion": HANDLER_VERSION,
            "autoUpgradeMinorVersion": True,
            "settings": dict(settings),
        },
    }


def put(
    azure: AzureSettings, *, vm: str, location: str, settings: dict[str, Any], name: str = NAME
) -> str:
    """Send the extension's PUT on VM ``vm`` (running); return the LRO continuation token
    without waiting. Raises ValueError (settings) or CloudError (e.g. 409
    OperationNotAllowed while the VM is not running; throttling, transient)."""
    body = driver_extension_body(location=location, settings=settings)
    with azure_errors():
        extensions = compute_client(azure).virtual_machine_extensions
        poller = extensions.begin_create_or_update(  # type: ignore[call-overload]  # JSON dict
            azure.resource_group, vm, name, body, polling=_SendOnly(azure.polling_interval)
        )
        return str(poller.continuation_token())


def get(azure: AzureSettings, *, vm: str, name: str = NAME) -> ExtensionState | None:
    """The extension with its instance view, or None when the VM has none of that name (or
    the VM is gone). Raises CloudError."""
    with azure_errors():
        try:
            ext = compute_client(azure).virtual_machine_extensions.get(
                azure.resource_group, vm, name, expand="instanceView"
            )
        except ResourceNotFoundError:
            return None
    return _state(ext)


def delete(azure: AzureSettings, *, vm: str, name: str = NAME) -> None:
    """Send the extension's DELETE without waiting (the driver it installed stays on the VM).
    Raises CloudError."""
    with azure_errors():
        compute_client(azure).virtual_machine_extensions.begin_delete(
            azure.resource_group, vm, name, polling=_SendOnly(azure.polling_interval)
        )


def _state(ext: Any) -> ExtensionState:
    view = getattr(ext, "instance_view", None)
    statuses = [
        *(getattr(view, "statuses", None) or []),
        *(getattr(view, "substatuses", None) or []),
    ]
    messages = [str(s.message) for s in statuses if getattr(s, "message", None)]
    return ExtensionState(
        name=str(ext.name),
        provisioning_state=str(ext.provisioning_state or ""),
        exit_code=_exit_code(statuses, messages),
        message=" ".join(dict.fromkeys(messages)),
    )


def _exit_code(statuses: list[Any], messages: list[str]) -> int | None:
    for status in statuses:
        found = _EXIT_IN_CODE.match(str(getattr(status, "code", "") or ""))
        if found:
            return int(found.group(1))
    for message in messages:
        found = _EXIT_IN_TEXT.search(message)
        if found:
            return int(found.group(1))
    return None
