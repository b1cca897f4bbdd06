"""What the portal needs from a cloud's VM service: the VmCloud protocol.

cloud.azure_vm fulfils it (as a module: PEP 544 lets a module implement a protocol); a second
cloud would be a second adapter module with these functions, and the VM backend
(workspaces.backends.vm) would take it instead. Shapes are cloud.azure_vm's dataclasses;
every function raises cloud.errors.CloudError.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import uuid

    from cloud.azure_vm import Progress, SkuInfo, Usage, VmNames, VmSpec
    from cloud.clients import AzureSettings


class VmCloud(Protocol):
    def vm_names(self, workspace_id: uuid.UUID | str) -> VmNames:
        """The names of the workspace's VM, NIC and OS disk."""
        ...

    def begin(
        self, settings: AzureSettings, operation: str, *, name: str, spec: VmSpec | None = None
    ) -> str:
        """Send ``operation`` ("create", "start", "deallocate", "delete") without waiting;
        return its continuation token."""
        ...

    def poll(self, settings: AzureSettings, operation: str, *, name: str, token: str) -> Progress:
        """Ask once how the operation behind ``token`` is doing."""
        ...

    def delete_leftovers(self, settings: AzureSettings, *, name: str) -> None:
        """Delete what a failed create left (VM, NIC, OS disk)."""
        ...

    def sku_info(self, settings: AzureSettings, *, location: str, vm_size: str) -> SkuInfo:
        """Whether the size is offered to the subscription in ``location``, its vCPUs, family."""
        ...

    def regional_usage(self, settings: AzureSettings, *, location: str) -> list[Usage]:
        """The subscription's vCPU quotas and their use in ``location``."""
        ...


class VmResizer(Protocol):
    """What resizing a VM needs (cloud.azure_resize fulfils it)."""

    def available_sizes(self, settings: AzureSettings, *, name: str) -> list[str]:
        """The sizes the VM can be resized to where it is now."""
        ...

    def begin_resize(self, settings: AzureSettings, *, name: str, vm_size: str) -> str:
        """Send the change of the VM's size without waiting; return its continuation token."""
        ...

    def poll_resize(self, settings: AzureSettings, *, name: str, token: str) -> Progress:
        """Ask once how the resize behind ``token`` is doing."""
        ...
