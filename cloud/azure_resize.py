"""Resizing an Azure VM: which sizes it can take where it is, and the change of
``hardwareProfile.vmSize`` as a long-running operation split in begin and poll, as
cloud.azure_vm splits the others (the token is saved between them, so a worker that dies is
resumed, never sending the PATCH twice).

Microsoft's resize guide (https://learn.microsoft.com/azure/virtual-machines/sizes/resize-vm)
lists the sizes with VirtualMachines_ListAvailableSizes (``GET .../virtualMachines/{vm}/vmSizes``:
the sizes of the VM's hardware cluster while it is allocated, of its region once deallocated),
deallocates when the size is not listed, and changes the size by updating the VM.
Errors raised: CloudError.
"""

from __future__ import annotations

from typing import Any

from .azure_vm import Progress, _PollOnce, _SendOnly, get
from .clients import AzureSettings, compute_client
from .errors import CloudError, azure_errors


def available_sizes(settings: AzureSettings, *, name: str) -> list[str]:
    """The names of the sizes VM ``name`` can be resized to now (ListAvailableSizes), as Azure
    spells them. Raises CloudError (ResourceNotFound for a VM that does not exist)."""
    vms = compute_client(settings).virtual_machines
    with azure_errors():
        return [str(size.name) for size in vms.list_available_sizes(settings.resource_group, name)]


def begin_resize(settings: AzureSettings, *, name: str, vm_size: str) -> str:
    """Send the PATCH (VirtualMachines_Update) that sets ``hardwareProfile.vmSize`` of VM
    ``name`` to ``vm_size``, without waiting; return its continuation token.

    Raises CloudError as Azure refuses: SkuNotAvailable (not offered in the VM's region),
    OperationNotAllowed (a running VM's hardware cluster cannot host it, or a vCPU quota),
    transient ones (throttled, busy: send again later)."""
    body: dict[str, Any] = {"properties": {"hardwareProfile": {"vmSize": vm_size}}}
    vms = compute_client(settings).virtual_machines
    with azure_errors():
        poller = vms.begin_update(  # type: ignore[call-overload]  # a JSON dict, sent as it is
            settings.resource_group, name, body, polling=_SendOnly(settings.polling_interval)
        )
        return str(poller.continuation_token())


def poll_resize(settings: AzureSettings, *, name: str, token: str) -> Progress:
    """Ask once how the resize behind ``token`` is doing (GETs only); once done, the VM as it
    is now (its ``vm_size`` the one Azure accepted).

    Raises CloudError when polling fails (transient) or the update ended Failed (e.g.
    AllocationFailed while a running VM moved)."""
    vms = compute_client(settings).virtual_machines
    with azure_errors():
        poller = vms.begin_update(  # type: ignore[call-overload]
            settings.resource_group,
            name,
            None,
            continuation_token=token,
            polling=_PollOnce(settings.polling_interval),
        )
        poller.result()
        if not poller.polling_method().finished():
            return Progress(done=False)
    state = get(settings, name=name)
    if state is None:
        raise CloudError("ResourceNotFound", f"The VM {name} is gone.", status=404)
    return Progress(done=True, state=state)
