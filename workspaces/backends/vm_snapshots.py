"""A VM workspace's OS disk kept as a snapshot before its delete, and a VM started from one
(docs/storage.md, issue 33): the VM backend's side, through cloud.azure_snapshots.

Before the delete is sent, a workspace whose owner asked for it (Workspace.keep_snapshot) has
its OS disk snapshotted (incremental, Microsoft.Compute/snapshots) and a DiskSnapshot row
records it; a failure raises CloudError and the delete is not sent, so the disk is never lost
for want of its snapshot. A VM requested ``from_snapshot`` gets a managed disk copied from the
snapshot, named as its OS disk would be, and boots from it (osDisk createOption Attach).
Errors raised: CloudError.
"""

from __future__ import annotations

from datetime import datetime

from cloud import azure_snapshots, azure_vm
from workspaces.azure import azure_settings
from workspaces.models import DiskSnapshot, Workspace


def snapshot_name(workspace: Workspace) -> str:
    """The Azure name of the workspace's kept snapshot: "ws-<12 hex>-kept"."""
    return f"{azure_vm.vm_names(workspace.pk).vm}-kept"


def keep_before_delete(workspace: Workspace, now: datetime) -> DiskSnapshot | None:
    """Snapshot the OS disk if its owner asked and it is not kept yet (a delete tried again
    finds the row and snapshots nothing twice); None when nothing is kept (not asked, or no
    disk: a create that never made one). Raises CloudError."""
    if not workspace.keep_snapshot:
        return None
    kept = DiskSnapshot.objects.filter(workspace=workspace).first()
    if kept is not None:
        return kept
    azure = azure_settings()
    disk = azure_snapshots.get_disk(azure, name=azure_vm.vm_names(workspace.pk).os_disk)
    if disk is None:
        return None
    snap = azure_snapshots.snapshot_disk(
        azure,
        name=snapshot_name(workspace),
        disk_id=disk.id,
        location=workspace.region,
        tags={
            "portal": "gpu-workspace-portal",
            "team": workspace.team.slug,
            "workspace": str(workspace.pk),
            "owner": workspace.owner.username,
        },
    )
    kept, _ = DiskSnapshot.objects.get_or_create(
        workspace=workspace,
        defaults={
            "team_id": workspace.team_id,
            "owner_id": workspace.owner_id,
            "kind": workspace.kind,
            "name": snap.name,
            "azure_id": snap.id,
            "region": workspace.region,
            "vm_size": workspace.vm_size,
            "size_gb": snap.size_gb or disk.size_gb,
            "created_at": now,
        },
    )
    return kept


def os_disk_from_snapshot(workspace: Workspace, *, sku: str) -> str:
    """The id of the OS disk a VM requested ``from_snapshot`` boots from, copied from the
    snapshot now unless a create tried before made it ("" for a VM made from an image).
    ``sku`` is the disk's storageAccountType (the size's: Premium_LRS where it takes it)."""
    snapshot = workspace.from_snapshot
    if snapshot is None:
        return ""
    disk = azure_snapshots.ensure_disk_from_snapshot(
        azure_settings(),
        name=azure_vm.vm_names(workspace.pk).os_disk,
        snapshot_id=snapshot.azure_id,
        location=workspace.region,
        sku=sku,
    )
    return disk.id
