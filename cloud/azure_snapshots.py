"""Managed disk snapshots through azure-mgmt-compute: keep a workspace's OS disk before it is
deleted, and make a new disk from the snapshot for a new workspace (Microsoft Learn, "Create a
snapshot of a virtual hard disk", learn.microsoft.com/azure/virtual-machines/snapshot-copy-
managed-disk; incremental snapshots, learn.microsoft.com/azure/virtual-machines/disks-
incremental-snapshots: billed for the GiB used, on standard storage whatever the disk's tier).

Every function raises cloud.errors.CloudError on an Azure failure and returns dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass

from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.compute import models

from .clients import AzureSettings, compute_client
from .errors import azure_errors


@dataclass(frozen=True)
class SnapshotInfo:
    name: str
    id: str
    source_disk_id: str
    size_gb: int


@dataclass(frozen=True)
class DiskInfo:
    name: str
    id: str
    size_gb: int


def snapshot_disk(
    settings: AzureSettings, *, name: str, disk_id: str, location: str, tags: dict[str, str]
) -> SnapshotInfo:
    """An incremental Standard_LRS snapshot of the disk, named ``name`` (a PUT: sent again,
    it takes the disk again). Azure allows it while a VM runs on the disk (crash-consistent)."""
    body = models.Snapshot(
        {
            "location": location,
            "tags": dict(tags),
            "sku": {"name": "Standard_LRS"},
            "properties": {
                "creationData": {"createOption": "Copy", "sourceResourceId": disk_id},
                "incremental": True,
            },
        }
    )
    with azure_errors():
        snap = (
            compute_client(settings)
            .snapshots.begin_create_or_update(settings.resource_group, name, body)
            .result()
        )
    data = snap.creation_data
    return SnapshotInfo(
        name=snap.name or name,
        id=snap.id or "",
        source_disk_id=(data.source_resource_id if data else None) or disk_id,
        size_gb=int(snap.disk_size_gb or 0),
    )


def get_snapshot(settings: AzureSettings, *, name: str) -> SnapshotInfo | None:
    with azure_errors():
        try:
            snap = compute_client(settings).snapshots.get(settings.resource_group, name)
        except ResourceNotFoundError:
            return None
    data = snap.creation_data
    return SnapshotInfo(
        name=snap.name or name,
        id=snap.id or "",
        source_disk_id=(data.source_resource_id if data else None) or "",
        size_gb=int(snap.disk_size_gb or 0),
    )


def delete_snapshot(settings: AzureSettings, *, name: str) -> None:
    with azure_errors():
        compute_client(settings).snapshots.begin_delete(settings.resource_group, name).result()


def get_disk(settings: AzureSettings, *, name: str) -> DiskInfo | None:
    with azure_errors():
        try:
            disk = compute_client(settings).disks.get(settings.resource_group, name)
        except ResourceNotFoundError:
            return None
    return DiskInfo(name=disk.name or name, id=disk.id or "", size_gb=int(disk.disk_size_gb or 0))


def ensure_disk_from_snapshot(
    settings: AzureSettings, *, name: str, snapshot_id: str, location: str, sku: str
) -> DiskInfo:
    """The disk ``name``, copied from the snapshot unless it exists already (a create tried
    again after a worker died finds the disk it made)."""
    found = get_disk(settings, name=name)
    if found is not None:
        return found
    return disk_from_snapshot(
        settings, name=name, snapshot_id=snapshot_id, location=location, sku=sku
    )


def disk_from_snapshot(
    settings: AzureSettings, *, name: str, snapshot_id: str, location: str, sku: str
) -> DiskInfo:
    """A new managed disk ``name`` copied from the snapshot (a new workspace's OS disk)."""
    body = models.Disk(
        {
            "location": location,
            "sku": {"name": sku},
            "properties": {
                "creationData": {"createOption": "Copy", "sourceResourceId": snapshot_id}
            },
        }
    )
    with azure_errors():
        disk = (
            compute_client(settings)
            .disks.begin_create_or_update(settings.resource_group, name, body)
            .result()
        )
    return DiskInfo(name=disk.name or name, id=disk.id or "", size_gb=int(disk.disk_size_gb or 0))
