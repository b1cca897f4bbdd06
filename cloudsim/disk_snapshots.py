"""Microsoft.Compute/snapshots and disks copied from them, in the shapes of the
azure-rest-api-specs DiskRP examples (snapshotExamples/Snapshot_Get.json,
diskExamples/Disk_Create_ByCopyingASnapshot.json): a snapshot of a managed disk (PUT with
creationData {"createOption": "Copy", "sourceResourceId": <disk id>}), GET, DELETE, and a new
disk copied from a snapshot. Both answer 200 with provisioningState Succeeded at once (the
examples' 200).

Each managed disk's files are a real directory (cloudsim.storage_state.disk_dir): what a VM
writes outside its NFS mounts lands on its OS disk (cloudsim.storage_mounts), a snapshot
copies it, and a disk copied from the snapshot starts with those files.
"""

from __future__ import annotations

import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from . import errors, faults, views
from .cloud import Cloud
from .errors import ArmError
from .models import COMPUTE, Disk, iso, key_of, resource_id
from .protocol import Request, Response, dig

SNAPSHOT_TYPE = "Microsoft.Compute/snapshots"


@dataclass
class DiskSnapshot:
    id: str
    name: str
    location: str
    source_id: str
    source_unique_id: str
    size_gb: int
    path: Path
    incremental: bool = False
    image: dict = field(default_factory=dict)  # the source disk's: its OS and driver
    tags: dict = field(default_factory=dict)
    created: float = field(default_factory=time.time)
    unique_id: str = field(default_factory=lambda: str(uuid.uuid4()))


def disk_dir(cloud: Cloud, disk: Disk) -> Path:
    """The disk's files (made on first use)."""
    path = cloud.storage.root / "disks" / disk.unique_id
    path.mkdir(parents=True, exist_ok=True)
    return path


def _snapshots(cloud: Cloud) -> dict[str, DiskSnapshot]:
    return cloud.storage.disk_snapshots  # type: ignore[no-any-return]


def snapshot_body(snap: DiskSnapshot) -> dict:
    props = {
        "osType": "Linux",
        "hyperVGeneration": "V2",
        "creationData": {
            "createOption": "Copy",
            "sourceResourceId": snap.source_id,
            "sourceUniqueId": snap.source_unique_id,
        },
        "diskSizeGB": snap.size_gb,
        "incremental": snap.incremental,
        "timeCreated": iso(snap.created),
        "provisioningState": "Succeeded",
        "uniqueId": snap.unique_id,
    }
    body = {"id": snap.id, "name": snap.name, "type": SNAPSHOT_TYPE, "location": snap.location}
    return body | {"tags": snap.tags, "sku": {"name": "Standard_LRS"}, "properties": props}


def _snapshot_id(req: Request) -> str:
    return resource_id(req.params["sub"], req.params["rg"], SNAPSHOT_TYPE, req.params["name"])


def put_snapshot(cloud: Cloud, req: Request) -> Response:
    """Snapshot a managed disk (createOption Copy of a disk id); 404 for a disk not there."""
    faults.raise_injected(cloud, "disk.snapshot", req.params["sub"])
    body = req.json()
    source = str(dig(body, "properties", "creationData", "sourceResourceId") or "")
    option = str(dig(body, "properties", "creationData", "createOption") or "")
    disk = cloud.disk("/" + source.lstrip("/")) if source else None
    if option.lower() != "copy" or disk is None:
        raise errors.not_found(views.DISK_TYPE, source.rsplit("/", 1)[-1], req.params["rg"])
    rid = _snapshot_id(req)
    path = cloud.storage.root / "disk-snapshots" / str(uuid.uuid4())
    shutil.copytree(disk_dir(cloud, disk), path)
    snap = DiskSnapshot(
        id=rid,
        name=req.params["name"],
        location=str(body.get("location") or disk.location),
        source_id=disk.id,
        source_unique_id=disk.unique_id,
        size_gb=disk.size_gb,
        path=path,
        incremental=dig(body, "properties", "incremental") is True,
        image=dict(disk.image),
        tags=body.get("tags") or {},
    )
    old = _snapshots(cloud).pop(key_of(rid), None)
    if old is not None:
        shutil.rmtree(old.path, ignore_errors=True)
    _snapshots(cloud)[key_of(rid)] = snap
    return Response(200, snapshot_body(snap))


def get_snapshot(cloud: Cloud, req: Request) -> Response:
    snap = _snapshots(cloud).get(key_of(_snapshot_id(req)))
    if snap is None:
        raise errors.not_found(SNAPSHOT_TYPE, req.params["name"], req.params["rg"])
    return Response(200, snapshot_body(snap))


def delete_snapshot(cloud: Cloud, req: Request) -> Response:
    snap = _snapshots(cloud).pop(key_of(_snapshot_id(req)), None)
    if snap is None:
        return Response(204)
    shutil.rmtree(snap.path, ignore_errors=True)
    return Response(200)


def put_disk(cloud: Cloud, req: Request) -> Response:
    """A new disk copied from a snapshot (createOption Copy of a snapshot id); 409 if the name
    is taken, 404 for a snapshot not there."""
    rid = resource_id(req.params["sub"], req.params["rg"], views.DISK_TYPE, req.params["name"])
    body = req.json()
    source = str(dig(body, "properties", "creationData", "sourceResourceId") or "")
    snap = _snapshots(cloud).get(key_of("/" + source.lstrip("/"))) if source else None
    if snap is None:
        raise errors.not_found(SNAPSHOT_TYPE, source.rsplit("/", 1)[-1], req.params["rg"])
    if cloud.disk(rid) is not None:
        raise ArmError(409, "Conflict", f"Disk {req.params['name']} already exists.")
    sku = str(dig(body, "sku", "name") or "Premium_LRS")
    disk = Disk(
        id=rid,
        name=req.params["name"],
        resource_group=req.params["rg"],
        location=str(body.get("location") or snap.location),
        storage_type=sku,
        size_gb=int(dig(body, "properties", "diskSizeGB") or snap.size_gb),
        image=dict(snap.image),
        managed_by=None,
        tags=body.get("tags") or {},
    )
    shutil.copytree(snap.path, cloud.storage.root / "disks" / disk.unique_id)
    cloud.disks[key_of(rid)] = disk
    answer = views.disk_body(cloud, disk)
    answer["properties"]["creationData"] = {"createOption": "Copy", "sourceResourceId": snap.id}
    return Response(200, answer)


ROUTES = {
    (COMPUTE.lower(), "snapshots", ()): {
        "GET": get_snapshot,
        "PUT": put_snapshot,
        "DELETE": delete_snapshot,
    },
}
