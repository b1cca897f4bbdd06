"""The worker's side of resizing a VM workspace (workspaces.resizes is the user's side).

Microsoft's resize guide (https://learn.microsoft.com/azure/virtual-machines/sizes/resize-vm):
check the size can be used where the VM is, deallocate it, change ``hardwareProfile.vmSize``,
start it. Here: before the deallocate (Stopping with ``resize_to`` set) the Resource SKUs API
must offer the size to the subscription in the VM's region, or nothing is touched and the VM
stays running; once deallocated (Resizing) the size must be among the VM's available sizes
(ListAvailableSizes) before the PATCH is sent. The workspace's vm_size, GPUs and price change
only when Azure accepted the PATCH, in the transition to Starting (the compute meter reopens at
the new price) or, for a VM that was stopped, back to Stopped. A refusal at any step puts the
VM back as it was: started again at its old size if it was running. Errors raised: CloudError
(transient only; Azure's refusals are recorded in the history).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from typing import Any

from cloud.errors import CloudError
from cloud.protocols import VmCloud, VmResizer
from common.words import usd_hourly
from workspaces import azure, selectors, states
from workspaces.azure import azure_settings
from workspaces.backends.base import ResizeChoice
from workspaces.chains import Next
from workspaces.models import SizeOffering, Workspace
from workspaces.states import Status

CLEARED: dict[str, Any] = {
    "resize_to": "",
    "resize_restart": False,
    "resize_target": {},
    "operation": "",
}


def vm_resize_choices(workspace: Workspace, now: datetime) -> list[ResizeChoice]:
    """The other sizes offered in the VM's region, at the price it would pay (the Spot price
    for a Spot VM, leaving out sizes without one)."""
    choices = []
    for offering in selectors.offering_list(region=workspace.region, now=now):
        if offering.vm_size.lower() == workspace.vm_size.lower():
            continue
        price = _price(workspace, offering, getattr(offering, "spot_hourly", None))
        if price is None:
            continue
        label = f"{offering.vm_size} ({offering.gpu_summary})"
        choices.append(
            ResizeChoice(
                key=offering.vm_size,
                label=label,
                gpu_model=offering.gpu_model,
                gpus=Fraction(offering.gpu_count),
                gpu_memory_gib=offering.gpu_count * offering.gpu_memory_gib,
                price_per_hour=price,
            )
        )
    return choices


def _price(workspace: Workspace, offering: SizeOffering, spot: Decimal | None) -> Decimal | None:
    if not workspace.spot:
        return offering.price_per_hour
    return None if spot is None else spot.quantize(Decimal("0.0001"))


def region_refusal(cloud: VmCloud, workspace: Workspace) -> str:
    """Why Azure would not take the target size in the VM's region (Resource SKUs: not sold
    there, or restricted for this subscription), "" when it would. Raises CloudError."""
    sku = cloud.sku_info(azure_settings(), location=workspace.region, vm_size=workspace.resize_to)
    if sku.offered:
        return ""
    return (
        f"Azure does not let this subscription deploy {workspace.resize_to} in "
        f"{workspace.region} ({sku.reason})."
    )


def refuse_before_deallocate(workspace: Workspace, why: str, now: datetime) -> Next:
    """The size check failed before anything changed: the VM stays running, as it was."""
    states.transition(
        workspace_id=workspace.pk,
        expected=Status.STOPPING,
        to=Status.RUNNING,
        now=now,
        reason=f"Resize to {workspace.resize_to} refused; nothing was changed: {why}",
        detail={"to": workspace.resize_to, "refused": why},
        operation_token="",
        **CLEARED,
    )
    return Next.DONE


def resize_step(
    cloud: VmCloud, resizer: VmResizer, workspace: Workspace, clock: Callable[[], datetime]
) -> Next:
    """One step of Resizing: check the size against the VM's available sizes and send the
    PATCH once (its token saved before polling), then poll it; finish or put back."""
    name = cloud.vm_names(workspace.pk).vm
    token = workspace.operation_token if workspace.operation == "resize" else ""
    try:
        if not token:
            why = _available_refusal(resizer, workspace, name)
            if why:
                return _put_back(workspace, why, {}, clock())
            token = resizer.begin_resize(azure_settings(), name=name, vm_size=workspace.resize_to)
            azure.azure_usage_changed(region=workspace.region)
            Workspace.objects.filter(pk=workspace.pk, status=Status.RESIZING).update(
                operation="resize", operation_token=token
            )
        progress = resizer.poll_resize(azure_settings(), name=name, token=token)
    except CloudError as exc:
        if exc.transient:
            raise
        error = {"code": exc.code, "message": exc.message, "status": exc.status}
        return _put_back(workspace, f"Azure refused it: {exc.code}.", error, clock())
    if not progress.done:
        Workspace.objects.filter(pk=workspace.pk, status=Status.RESIZING).update(updated_at=clock())
        return Next.POLL
    accepted = progress.state.vm_size if progress.state else workspace.resize_to
    return _accepted(workspace, accepted, clock())


def _available_refusal(resizer: VmResizer, workspace: Workspace, name: str) -> str:
    sizes = resizer.available_sizes(azure_settings(), name=name)
    if workspace.resize_to.lower() in {size.lower() for size in sizes}:
        return ""
    return (
        f"{workspace.resize_to} is not among the {len(sizes)} sizes Azure lists for this VM "
        "where it is (ListAvailableSizes)."
    )


def _next_status(workspace: Workspace) -> tuple[str, Next]:
    """Started again if it was running (the chain goes on), else stopped."""
    if workspace.resize_restart:
        return Status.STARTING, Next.POLL
    return Status.STOPPED, Next.DONE


def _put_back(workspace: Workspace, why: str, error: dict[str, Any], now: datetime) -> Next:
    """Azure refused the resize after the deallocate: the VM keeps its size, and is started
    again if it was running."""
    to, then = _next_status(workspace)
    again = "; starting it again at its old size" if to == Status.STARTING else ""
    states.transition(
        workspace_id=workspace.pk,
        expected=Status.RESIZING,
        to=to,
        now=now,
        reason=f"Resize to {workspace.resize_to} refused, {workspace.vm_size} kept{again}: {why}",
        detail={"to": workspace.resize_to, "refused": why, **error},
        operation_token="",
        error_code=error.get("code", ""),
        error_message=error.get("message", ""),
        **CLEARED,
    )
    return then


def _accepted(workspace: Workspace, vm_size: str, now: datetime) -> Next:
    """Azure took the new size: the workspace's size, GPUs and price become the new ones."""
    offering = SizeOffering.objects.filter(vm_size__iexact=vm_size, region=workspace.region).first()
    if offering is None:  # Not in the catalog: keep what is known, say so.
        fields: dict[str, Any] = {"vm_size": vm_size}
        price = workspace.price_per_hour
    else:
        spot = selectors.offering_spot_price(offering=offering, now=now) if workspace.spot else None
        price = _price(workspace, offering, spot) or offering.price_per_hour
        fields = {
            "vm_size": offering.vm_size,
            "gpu_model": offering.gpu_model,
            "gpu_count": offering.gpu_count,
            "price_per_hour": price,
        }
    to, then = _next_status(workspace)
    again = "; starting it" if to == Status.STARTING else ""
    states.transition(
        workspace_id=workspace.pk,
        expected=Status.RESIZING,
        to=to,
        now=now,
        reason=(
            f"Azure accepted size {fields['vm_size']} (was {workspace.vm_size}; listed in the "
            f"VM's available sizes); billed at "
            f"{usd_hourly(price)}/hour from its next start{again}"
        ),
        detail={"from": workspace.vm_size, "to": fields["vm_size"], "price_per_hour": str(price)},
        operation_token="",
        error_code="",
        error_message="",
        **fields,
        **CLEARED,
    )
    return then
