"""Meters: UsageInterval rows opened and closed as workspaces change state (called by
workspaces.states.transition through the hooks); what billing.pricing prices."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from uuid import UUID

from billing.models import Meter, PriceKind, UsageInterval
from billing.price_sync import price_in_effect
from workspaces.backends import backend_for
from workspaces.models import Workspace
from workspaces.states import Status

# Every VM's OS disk: 128 GiB Premium SSD (cloud.azure_vm.VmSpec), billed as tier P10 LRS.
OS_DISK_TIER = "P10 LRS"
# While a delete is asked and not yet confirmed (Deleting, or Failed after a refused delete:
# Retry the delete goes back to Deleting), whatever was billing goes on billing.
UNTIL_GONE = frozenset({Status.DELETING, Status.FAILED})


def usage_meter(*, workspace_id: UUID | str, expected: str, to: str, now: datetime) -> None:
    """Open or close the workspace's meters for the change ``expected -> to`` (called inside
    workspaces.states.transition's transaction), as its kind's backend says
    (WorkspaceBackend.meters): compute while its status is billable, at its hourly price times
    its share (a VM: its own price, on the Spot meter for a Spot VM; a MIG slice or a
    namespace: its share of its node pool's VM price); an OS disk, for kinds that have one,
    from the first time it runs until it is deleted.

    Meters follow what Azure (or Kubernetes) says: compute opens only once the resource exists
    (a VM's create succeeded: Running; Provisioning bills nothing, so a create Azure refused
    costs nothing), and a delete keeps whatever was billing until the delete is confirmed
    (Deleted): through Deleting, a failed delete and its retry, as Azure bills a VM until it
    is gone (the page shows what a stuck delete has cost: billing.workspace_cost)."""
    workspace = Workspace.objects.select_related("node_pool").get(pk=workspace_id)
    meters = backend_for(workspace.kind).meters(workspace)
    if to in meters.billable and expected not in meters.billable:
        sku, hourly = workspace.vm_size, meters.hourly
        _open(workspace, Meter.COMPUTE, PriceKind.VM, sku, hourly, now, meters.share)
    elif expected in meters.billable | UNTIL_GONE and to not in meters.billable | UNTIL_GONE:
        _close(workspace_id, Meter.COMPUTE, now)
    if not meters.os_disk:
        return
    if to == Status.RUNNING and not _is_open(workspace_id, Meter.DISK):
        disk = price_in_effect(
            kind=PriceKind.DISK, sku=OS_DISK_TIER, region=workspace.region, at=now
        )
        hourly = disk.hourly if disk else Decimal(0)
        _open(workspace, Meter.DISK, PriceKind.DISK, OS_DISK_TIER, hourly, now)
    elif to == Status.DELETED:
        _close(workspace_id, Meter.DISK, now)


def _open(
    workspace: Workspace,
    meter: str,
    price_kind: str,
    sku: str,
    hourly: Decimal,
    now: datetime,
    share: tuple[int, int] = (1, 1),
) -> None:
    UsageInterval.objects.create(
        share_num=share[0],
        share_den=share[1],
        workspace_id=workspace.pk,
        team_id=workspace.team_id,
        kind=workspace.kind,
        meter=meter,
        price_kind=price_kind,
        sku=sku,
        region=workspace.region,
        spot=meter == Meter.COMPUTE and workspace.spot,  # a Spot VM's disk is billed as any disk
        started_at=now,
        price_per_hour=round(hourly, 4),
    )


def _close(workspace_id: UUID | str, meter: str, now: datetime) -> None:
    UsageInterval.objects.filter(workspace_id=workspace_id, meter=meter, ended_at=None).update(
        ended_at=now
    )


def _is_open(workspace_id: UUID | str, meter: str) -> bool:
    return UsageInterval.objects.filter(
        workspace_id=workspace_id, meter=meter, ended_at=None
    ).exists()
